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

// run parses the flags into a Config, runs the webhook until SIGTERM or
// SIGINT and maps the outcome to an exit code.
func run(args []string, stderr io.Writer) int {
	app := webhookapp.DefaultConfig()
	cfg := &app.Webhook
	fs := flag.NewFlagSet("webhook", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bindFlags(fs, cfg)
	cluster := bindClusterFlags(fs, &app)
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
	if cluster.enabled {
		return runCluster(app, stderr)
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var err error
	if cluster.natsSet {
		// Files for policies and certificates, JetStream for results.
		log, lerr := webhook.NewLogger(stderr, cfg.LogLevel, cfg.LogFormat)
		if lerr != nil {
			fmt.Fprintln(stderr, lerr)
			return exitUsage
		}
		err = webhookapp.RunFiles(ctx, app, log)
	} else {
		err = webhook.Run(ctx, *cfg)
	}
	if err != nil {
		fmt.Fprintf(stderr, "webhook: %v\n", err)
		if errors.Is(err, webhook.ErrInvalidConfig) {
			return exitUsage
		}
		return exitFailed
	}
	return exitOK
}

// runCluster runs the cluster mode until SIGTERM or SIGINT.
func runCluster(app webhookapp.Config, stderr io.Writer) int {
	if err := app.Validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return exitUsage
	}
	log, err := webhook.NewLogger(stderr, app.Webhook.LogLevel, app.Webhook.LogFormat)
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
