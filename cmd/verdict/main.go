// Command verdict evaluates Kyverno-language policies on manifests:
// `verdict apply` and `verdict test`, with no cluster.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/verdict-dev/verdict/internal/cli"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
