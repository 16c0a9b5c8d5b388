package cli

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Dialect is whose meanings the commands give the flags on which verdict
// and the Kyverno CLI differ.
//
// Invoked as verdict, apply's -p names policies and -o is the output
// format. Invoked as kyverno or kubectl-kyverno (a symbolic link, a
// renamed copy: the name the program is run by), the commands speak the
// Kyverno CLI's: apply's -p is --policy-report, -o (--output) is where
// mutated resources are written, its default output is the Kyverno CLI's
// text, and every error exits 1 as Kyverno's do. The rest is the same
// in both (docs/conformance.md, "The Kyverno CLI's flags").
type Dialect int

const (
	// DialectVerdict is verdict's own.
	DialectVerdict Dialect = iota
	// DialectKyverno is the Kyverno CLI's.
	DialectKyverno
)

// DialectOf is the dialect of a program run as argv0: Kyverno's when its
// base name is kyverno or kubectl-kyverno (with or without .exe).
func DialectOf(argv0 string) Dialect {
	name := argv0
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:] // a Windows path too
	}
	name = strings.TrimSuffix(name, ".exe")
	if name == "kyverno" || name == "kubectl-kyverno" {
		return DialectKyverno
	}
	return DialectVerdict
}

// refusedFlag is a flag of the Kyverno CLI that verdict parses only to
// refuse it: why says why and what to do instead.
type refusedFlag struct {
	name, short string
	// value is false for a flag without a value (a boolean).
	value bool
	why   string
}

// refuse registers the flags, hidden, and makes the command fail with
// their reasons when one is given.
func refuse(cmd *cobra.Command, flags ...refusedFlag) {
	f := cmd.Flags()
	for _, r := range flags {
		if r.value {
			f.StringP(r.name, r.short, "", "refused: "+r.why)
		} else {
			f.BoolP(r.name, r.short, false, "refused: "+r.why)
		}
		_ = f.MarkHidden(r.name) // the flag was just defined
	}
	next := cmd.PreRunE
	cmd.PreRunE = func(c *cobra.Command, args []string) error {
		for _, r := range flags {
			if c.Flags().Changed(r.name) {
				return fmt.Errorf("%w: --%s: %s", ErrInvalidOptions, r.name, r.why)
			}
		}
		if next != nil {
			return next(c, args)
		}
		return nil
	}
}

// accept registers flags of the Kyverno CLI that change nothing in
// verdict, hidden from the help but parsed, so that pipelines run: why
// says why they need not.
func accept(f *pflag.FlagSet, why string, names ...string) {
	for _, n := range names {
		f.Bool(n, false, "accepted for the Kyverno CLI's pipelines: "+why)
		_ = f.MarkHidden(n) // the flag was just defined
	}
}

// globalFlags are the Kyverno CLI's flags of every command: its logging
// (klog's flags, -v) and --kubeconfig. verdict writes no logs, so they
// are parsed and change nothing; a command that reads a cluster has its
// own --kubeconfig.
func globalFlags(root *cobra.Command) {
	f := root.PersistentFlags()
	for _, n := range []string{"add_dir_header", "alsologtostderr", "legacy_stderr_threshold_behavior", "logtostderr", "one_output", "skip_headers", "skip_log_headers"} {
		f.Bool(n, false, "accepted for the Kyverno CLI's pipelines: verdict writes no logs")
		_ = f.MarkHidden(n)
	}
	for _, n := range []string{"alsologtostderrthreshold", "log_backtrace_at", "log_dir", "log_file", "log_file_max_size", "stderrthreshold", "vmodule", "kubeconfig"} {
		f.String(n, "", "accepted for the Kyverno CLI's pipelines: verdict writes no logs")
		_ = f.MarkHidden(n)
	}
	f.StringP("v", "v", "", "accepted for the Kyverno CLI's pipelines: verdict writes no logs")
	_ = f.MarkHidden("v")
}

// kyvernoOnly are the Kyverno CLI's commands verdict does not have; run,
// each says why and what to use.
func kyvernoOnly() []*cobra.Command {
	return []*cobra.Command{
		refusedCommand("docs", "verdict does not write its reference as files: see `verdict <command> --help` and docs/conformance.md"),
		refusedCommand("migrate", "verdict reads kyverno.io and policies.kyverno.io objects at their stored versions: there is nothing to migrate (docs/migrating-from-kyverno.md)"),
		refusedCommand("fix", "verdict reads the policies and test files as Kyverno 1.19 writes them: verdict test says what a test file lacks; fix it by hand"),
		refusedCommand("oci", "verdict reads policies from files: pull the image (oras pull <image>) and give the folder"),
	}
}
