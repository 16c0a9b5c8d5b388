// Command webhook is Verdict's admission webhook: mutate, validate and
// policy validation over HTTPS. Everything but flag parsing lives in
// internal/webhook.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/verdict-dev/verdict/internal/webhook"
	"github.com/verdict-dev/verdict/internal/webhookapp"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
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
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return exitUsage
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
	if err := app.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	log, err := app.Webhook.Log.Logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := webhookapp.Run(ctx, app, log); err != nil {
		fmt.Fprintf(stderr, "webhook: %v\n", err)
		if errors.Is(err, webhookapp.ErrInvalidConfig) || errors.Is(err, webhook.ErrInvalidConfig) {
			return exitUsage
		}
		return exitFailed
	}
	return exitOK
}
