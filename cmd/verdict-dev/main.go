// Command verdict-dev runs Verdict for development and demonstration:
// `verdict-dev demo` starts a local control plane (etcd and kube-apiserver
// built from their modules), an embedded JetStream, the webhook and the
// reporter in one process, and walks through sample policies and Pods.
// It is kept apart from the pipeline CLI (cmd/verdict), which links none
// of this.
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

	"github.com/verdict-dev/verdict/internal/demo"
)

// Exit codes.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: verdict-dev demo [--once]

  demo   a local control plane, JetStream, the webhook and the reporter in one
         process; sample policies, Pods and a Deployment; the reports at the
         end. Ctrl-C stops everything.
`

// run parses the command line and runs the command.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "demo" {
		fmt.Fprint(stderr, usage)
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			return exitOK
		}
		return exitUsage
	}
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	once := fs.Bool("once", false, "go through once, print the reports and exit")
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "unexpected arguments: %v\n", fs.Args())
		return exitUsage
	}
	if err := demo.Run(ctx, demo.Options{Out: stdout, Once: *once}); err != nil {
		fmt.Fprintf(stderr, "demo: %v\n", err)
		return exitFailed
	}
	return exitOK
}
