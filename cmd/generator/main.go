// Command generator works the generate items of VERDICT_WORK: for each
// generate rule an admitted request triggered, it checks the trigger and
// the policy against the API and applies what the rule generates (see
// docs/generator.md). Run any number of replicas. Everything but flag
// parsing lives in internal/generator/app.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	generatorapp "github.com/verdict-dev/verdict/internal/generator/app"
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
	cfg := generatorapp.DefaultConfig()
	fs := flag.NewFlagSet("generator", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: generator [flags]\n\nflags:\n")
		fs.PrintDefaults()
	}
	bindFlags(fs, &cfg)
	if code, done := platform.ParseFlags(fs, args); done {
		return code
	}
	return platform.Serve(stderr, "generator", cfg.Validate, cfg.Log, func(ctx context.Context, log zerolog.Logger) error {
		return generatorapp.Run(ctx, cfg, log)
	}, generatorapp.ErrInvalidConfig)
}
