// Command webhook is Verdict's admission webhook: mutate, validate and
// policy validation over HTTPS. Everything but flag parsing lives in
// internal/webhook.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/webhook"
	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
)

// Exit codes (service.Exit*).
const (
	exitOK    = platform.ExitOK
	exitUsage = platform.ExitUsage
)

func main() {
	os.Exit(run(os.Args[1:], os.Stderr))
}

// run parses the flags into a Config, runs the webhook in its mode until
// SIGTERM or SIGINT and maps the outcome to an exit code.
func run(args []string, stderr io.Writer) int {
	app := webhookapp.DefaultConfig()
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bindFlags(fs, &app.Webhook)
	bindServiceFlags(fs, &app)
	if code, done := platform.ParseFlags(fs, args); done {
		return code
	}
	if app.Mode == webhookapp.ModeFiles {
		var refused []string
		fs.Visit(func(f *flag.Flag) {
			if slices.Contains(clusterOnly, f.Name) {
				refused = append(refused, "--"+f.Name)
			}
		})
		if len(refused) > 0 {
			fmt.Fprintf(stderr, "%s: cluster mode's flags, not used in files mode\n", strings.Join(refused, ", "))
			return exitUsage
		}
	}
	if os.Getenv("GOGC") == "" && app.Validate() == nil {
		debug.SetGCPercent(app.GCPercent)
	}
	return platform.Serve(stderr, "webhook", app.Validate, app.Webhook.Log, func(ctx context.Context, log zerolog.Logger) error {
		return webhookapp.Run(ctx, app, log)
	}, webhookapp.ErrInvalidConfig, webhook.ErrInvalidConfig)
}
