// Command cleaner runs the cleanup policies on their schedules and the
// TTL label cleanup: every replica keeps the policies' JetStream message
// schedules, and the replica that takes a tick reads its policy from the
// API and deletes what it selects (see docs/cleaner.md). Run any number
// of replicas. Everything but flag parsing lives in internal/cleaner/app.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	cleanerapp "github.com/verdict-dev/verdict/internal/cleaner/app"
	"github.com/verdict-dev/verdict/internal/platform"
)

// Exit codes (service.Exit*).
const (
	exitOK    = platform.ExitOK
	exitUsage = platform.ExitUsage
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run parses the flags into a Config, runs it until SIGTERM or SIGINT
// and maps the outcome to an exit code.
func run(args []string, stderr io.Writer) int {
	cfg := cleanerapp.DefaultConfig()
	fs := flag.NewFlagSet("cleaner", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: cleaner [flags]\n\nflags:\n")
		fs.PrintDefaults()
	}
	bindFlags(fs, &cfg)
	if code, done := platform.ParseFlags(fs, args); done {
		return code
	}
	return platform.Serve(stderr, "cleaner", cfg.Validate, cfg.Log, func(ctx context.Context, log zerolog.Logger) error {
		return cleanerapp.Run(ctx, cfg, log)
	}, cleanerapp.ErrInvalidConfig)
}
