// Command verdict evaluates Kyverno-language policies: `verdict apply`
// on manifests or a cluster's resources, `verdict test` on test suites,
// `verdict compare` to set Verdict's reports beside Kyverno's; `verdict
// work` shows and steers the work queue in the cluster's NATS (pending
// and dead-lettered work). Run as kyverno or kubectl-kyverno (a link to
// it), it takes the Kyverno CLI's meanings where the two differ
// (cli.Dialect).
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
	code := cli.MainDialect(ctx, cli.DialectOf(os.Args[0]), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
