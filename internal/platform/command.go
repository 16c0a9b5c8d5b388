package platform

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/platform/cliflag"
)

// Exit codes of every Verdict service command.
const (
	ExitOK     = 0
	ExitFailed = 1
	// ExitUsage is a bad flag, argument or configuration.
	ExitUsage = 2
)

// ParseFlags parses args with fs (whose output is where it explains a bad
// flag). When the command must stop there, done is true and code is its
// exit code: ExitOK after -h, ExitUsage after a bad flag or with arguments
// left over.
func ParseFlags(fs *flag.FlagSet, args []string) (code int, done bool) {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return ExitOK, true
		}
		return ExitUsage, true
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(fs.Output(), "unexpected arguments: %v\n", fs.Args())
		return ExitUsage, true
	}
	return ExitOK, false
}

// SignalContext returns a context that SIGTERM or SIGINT cancels: the
// start of a service's drain.
func SignalContext() (context.Context, context.CancelFunc) {
	return signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
}

// ExitCode reports err on stderr, prefixed with what, and gives the exit
// code: ExitOK without an error, ExitUsage for an error wrapping one of
// invalid (a configuration the command refused), ExitFailed otherwise.
func ExitCode(stderr io.Writer, what string, err error, invalid ...error) int {
	if err == nil {
		return ExitOK
	}
	fmt.Fprintf(stderr, "%s: %v\n", what, err)
	for _, target := range invalid {
		if errors.Is(err, target) {
			return ExitUsage
		}
	}
	return ExitFailed
}

// ListFlag binds a repeatable, comma-separated list flag: see cliflag.List.
func ListFlag(fs *flag.FlagSet, name, usage string, reset func(), add func(string) error) {
	cliflag.List(fs, name, usage, reset, add)
}

// StringsFlag is ListFlag that appends the items to *dst: see
// cliflag.Strings.
func StringsFlag(fs *flag.FlagSet, name, usage string, dst *[]string) {
	cliflag.Strings(fs, name, usage, dst)
}

// Serve runs a service command once its flags are parsed: it validates
// the configuration and makes the logger (a problem with either is a
// usage error, printed), runs run until SIGTERM or SIGINT, and maps the
// outcome to an exit code as ExitCode does.
func Serve(stderr io.Writer, name string, validate func() error, logs LogConfig, run func(ctx context.Context, log zerolog.Logger) error, invalid ...error) int {
	if err := validate(); err != nil {
		fmt.Fprintln(stderr, err)
		return ExitUsage
	}
	log, err := logs.Logger(stderr)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return ExitUsage
	}
	ctx, stop := SignalContext()
	defer stop()
	return ExitCode(stderr, name, run(ctx, log), invalid...)
}
