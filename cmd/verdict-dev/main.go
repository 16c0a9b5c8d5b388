// Command verdict-dev runs Verdict for development and demonstration:
// `verdict-dev demo` starts a local control plane (etcd and kube-apiserver
// built from their modules), an embedded JetStream, the webhook and the
// reporter in one process, and walks through sample policies and Pods.
// It is kept apart from the pipeline CLI (cmd/verdict), which links none
// of this.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/verdict-dev/verdict/internal/demo"
	"github.com/verdict-dev/verdict/internal/platform"
)

// Exit codes (service.Exit*).
const (
	exitOK    = platform.ExitOK
	exitUsage = platform.ExitUsage
)

func main() {
	ctx, stop := platform.SignalContext()
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
	if code, done := platform.ParseFlags(fs, args[1:]); done {
		return code
	}
	return platform.ExitCode(stderr, "demo", demo.Run(ctx, demo.Options{Out: stdout, Once: *once}))
}
