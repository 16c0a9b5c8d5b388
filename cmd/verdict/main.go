// Command verdict evaluates Kyverno-language policies on manifests:
// `verdict apply` and `verdict test`, with no cluster; `verdict work` shows
// and steers the work queue in the cluster's NATS (pending and
// dead-lettered work).
package main

import (
	"context"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"

	"github.com/verdict-dev/verdict/internal/cli"
)

// gcPercent is the garbage collector's target unless GOGC says otherwise.
// verdict is a short run whose live heap stays small (resources are
// streamed), so collecting a fifth as often costs little memory (about
// 30 MiB peak instead of 23 MiB on BENCHMARKS.md's 1,000 pods) and saves
// about a third of the CPU.
const gcPercent = 400

func main() {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(gcPercent)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := cli.Main(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
