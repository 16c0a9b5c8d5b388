package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/rs/zerolog"
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

// ListFlag binds a repeatable flag whose values may also be
// comma-separated; blanks around items are dropped, empty items ignored.
// Each item goes through add, which may refuse it. The first use of the
// flag replaces the defaults (reset is called once before it), when reset
// is not nil.
func ListFlag(fs *flag.FlagSet, name, usage string, reset func(), add func(string) error) {
	first := true
	fs.Func(name, usage, func(s string) error {
		if first && reset != nil {
			reset()
		}
		first = false
		for _, item := range strings.Split(s, ",") {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			if err := add(item); err != nil {
				return err
			}
		}
		return nil
	})
}

// StringsFlag is ListFlag that appends the items to *dst.
func StringsFlag(fs *flag.FlagSet, name, usage string, dst *[]string) {
	ListFlag(fs, name, usage, nil, func(s string) error {
		*dst = append(*dst, s)
		return nil
	})
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
