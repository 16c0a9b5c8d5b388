// Command reporter keeps Verdict's PolicyReports and ClusterPolicyReports:
// `reporter run` (the default) projects VERDICT_RESULTS into them as
// results arrive; `reporter replay [--prune]` rebuilds every report from
// the stream. Everything but flag parsing lives in internal/reports/app.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/platform"
	reporterapp "github.com/verdict-dev/verdict/internal/reports/app"
)

// Exit codes (service.Exit*).
const (
	exitOK    = platform.ExitOK
	exitUsage = platform.ExitUsage
)

// Commands.
const (
	cmdRun    = "run"
	cmdReplay = "replay"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run parses the command and its flags into a Config, runs it until it
// ends (or SIGTERM or SIGINT) and maps the outcome to an exit code.
func run(args []string, stdout, stderr io.Writer) int {
	cmd := cmdRun
	if len(args) > 0 && (args[0] == cmdRun || args[0] == cmdReplay) {
		cmd, args = args[0], args[1:]
	}
	cfg := reporterapp.DefaultConfig()
	fs := flag.NewFlagSet("reporter "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: reporter [run] [flags]\n       reporter replay [--prune] [flags]\n\nflags:\n")
		fs.PrintDefaults()
	}
	bindFlags(fs, &cfg)
	var prune bool
	if cmd == cmdReplay {
		fs.BoolVar(&prune, "prune", false, "also delete Verdict's reports of resources that have no results in the stream")
	}
	if code, done := platform.ParseFlags(fs, args); done {
		return code
	}
	return platform.Serve(stderr, "reporter "+cmd, cfg.Validate, cfg.Log, func(ctx context.Context, log zerolog.Logger) error {
		if cmd == cmdReplay {
			_, err := reporterapp.Replay(ctx, cfg, prune, stdout, log)
			return err
		}
		return reporterapp.Run(ctx, cfg, log)
	}, reporterapp.ErrInvalidConfig)
}
