// Package cli implements the verdict command line: apply and test for
// pipelines, with no cluster; work, to see and steer the work queue in the
// cluster's NATS (pending and dead-lettered work).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/verdict-dev/verdict/internal/cli/work"
)

// Exit codes. ExitFailed: apply and test found failures; work could not do
// its work. ExitUsage: bad input or flags.
const (
	ExitOK      = 0
	ExitFailed  = 1
	ExitUsage   = 2
	exitUnknown = 3
)

// exitCodeError asks Main to exit with its code and print nothing: a
// run that worked, whose outcome the caller asked to be told by the code
// (apply's --warn-exit-code).
type exitCodeError int

func (e exitCodeError) Error() string { return fmt.Sprintf("exit code %d", int(e)) }

// errFailures marks a run that worked but found failures (or, for apply,
// rule results that are errors).
var errFailures = errors.New("failures found")

// Main runs the command line and returns the exit code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(ctx, stdin, stdout)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, errFailures):
		return ExitFailed
	case errors.As(err, new(exitCodeError)):
		var code exitCodeError
		errors.As(err, &code)
		return int(code)
	case errors.As(err, new(work.FailedError)):
		fmt.Fprintln(stderr, "Error:", err)
		return ExitFailed
	default:
		fmt.Fprintln(stderr, "Error:", err)
		return ExitUsage
	}
}

// newRoot builds the commands; they run under ctx.
func newRoot(ctx context.Context, stdin io.Reader, stdout io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "verdict",
		Short:         "Verdict evaluates Kyverno-language policies",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newApply(ctx, stdin, stdout), newTest(ctx, stdout), newJP(stdin, stdout), newCreate(stdout), newVersion(stdout), work.New(ctx, stdin, stdout))
	return root
}

func newApply(ctx context.Context, stdin io.Reader, stdout io.Writer) *cobra.Command {
	opts := ApplyOptions{}
	var policyReport bool
	var warnExitCode int
	cmd := &cobra.Command{
		Use:   "apply (<policies>... | -p <policies>) -r <resources>",
		Short: "Apply policies to resource manifests and report the results",
		Long: `Apply evaluates every policy on every resource (files or directories,
multi-document YAML or JSON, "-" for stdin), mutations first, then
validations. It prints the results and the summary line
"pass: N, fail: N, warn: N, error: N, skip: N".

It takes the Kyverno CLI's shape too: policy paths as arguments,
--resources, --exception/-e, --policy-report, --detailed-results,
--warn-exit-code, --table and --remove-color (accepted). Where the two
differ, verdict's -p names policies (Kyverno's -p is --policy-report)
and -o is the output format (Kyverno writes mutated resources there).

Resources are read one document at a time; a document larger than
--max-document-bytes is an error naming the file and the document.

Exit codes:
  0  no rule failed or ended in error (pass, skip and warn results only)
  1  a rule failed, or a rule ended in error (it could not be evaluated:
     a JMESPath function failed, a variable names a missing field, ...)
  2  bad input: an invalid policy or option, unreadable YAML, or a -p or
     -r path that yields no policy or no resource (an empty file, a
     folder without manifests)`,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Kyverno's shape: the policy paths as arguments.
			opts.Policies = append(opts.Policies, args...)
			if policyReport {
				opts.Output = "report"
			}
			counts, err := Apply(ctx, opts, stdin, stdout)
			if err != nil {
				return err
			}
			switch {
			case counts.Error == 1:
				fmt.Fprintln(cmd.ErrOrStderr(), "1 rule result is an error: the rule could not be evaluated (its message says why)")
			case counts.Error > 1:
				fmt.Fprintf(cmd.ErrOrStderr(), "%d rule results are errors: those rules could not be evaluated (their messages say why)\n", counts.Error)
			}
			if counts.Fail > 0 || counts.Error > 0 {
				return errFailures
			}
			if counts.Warn > 0 && warnExitCode != 0 {
				return exitCodeError(warnExitCode)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringSliceVarP(&opts.Policies, "policy", "p", nil, "policy files or directories (or give them as arguments, as the Kyverno CLI takes them)")
	f.StringSliceVarP(&opts.Resources, "resource", "r", nil, "resource files or directories")
	f.StringSliceVar(&opts.Resources, "resources", nil, "the same as --resource (the Kyverno CLI's other name)")
	f.StringSliceVarP(&opts.Exceptions, "exception", "e", nil, "files of PolicyExceptions to apply besides those among the policies")
	f.StringSliceVar(&opts.Exceptions, "exceptions", nil, "the same as --exception")
	f.StringVarP(&opts.Output, "output", "o", "table", "output format: table, json or report")
	f.BoolVar(&policyReport, "policy-report", false, "write a ClusterPolicyReport (-o report; the Kyverno CLI's -p is verdict's --policy)")
	f.BoolVar(&opts.Detailed, "detailed", false, "list every result in the table, not only failures")
	f.BoolVar(&opts.Detailed, "detailed-results", false, "the same as --detailed (the Kyverno CLI's name)")
	f.StringVarP(&opts.ValuesFile, "values-file", "f", "", "a values file (the Kyverno CLI's kind Values): variables for the policies, namespace labels")
	f.StringSliceVarP(&opts.Set, "set", "s", nil, "global values, name=value (over the values file's)")
	f.StringVarP(&opts.UserInfo, "userinfo", "u", "", "a user info file (the Kyverno CLI's kind UserInfo): who makes every request")
	f.BoolVar(&opts.AuditWarn, "audit-warn", false, "report the failures of rules in Audit mode as warnings (with --warn-exit-code, the exit code says there were some)")
	f.IntVar(&warnExitCode, "warn-exit-code", 0, "exit with this code when results warn and none fails or errs")
	f.BoolP("table", "t", false, "accepted for the Kyverno CLI's pipelines: the table is the default output")
	f.Bool("remove-color", false, "accepted for the Kyverno CLI's pipelines: verdict writes no color")
	f.StringVar(&opts.Operation, "operation", "CREATE", "admission operation: CREATE, UPDATE or DELETE")
	f.StringVar(&opts.SigstoreTrustedRoot, "sigstore-trusted-root", "", trustedRootUsage)
	f.Int64Var(&opts.MaxDocumentBytes, "max-document-bytes", DefaultMaxDocumentBytes, "largest resource document read; a larger one is an error")
	return cmd
}

func newTest(ctx context.Context, stdout io.Writer) *cobra.Command {
	opts := TestOptions{}
	cmd := &cobra.Command{
		Use:   "test <dir>...",
		Short: "Run Kyverno CLI test suites (kyverno-test.yaml) found below the directories",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.Dirs = args
			sum, err := RunTests(ctx, opts, stdout)
			if err != nil {
				return err
			}
			if sum.Failed > 0 || len(sum.Errors) > 0 {
				return errFailures
			}
			return nil
		},
	}
	var gitBranch string
	cmd.PreRunE = func(*cobra.Command, []string) error {
		if gitBranch != "" {
			return fmt.Errorf("--git-branch: verdict test reads directories, not repositories: clone the branch (git clone --branch %s <url>) and give its directory", gitBranch)
		}
		return nil
	}
	f := cmd.Flags()
	f.StringVarP(&opts.FileName, "file-name", "f", "kyverno-test.yaml", "name of the test files")
	f.BoolVar(&opts.JSON, "json", false, "write the results as JSON (--output-format json)")
	f.StringVarP(&opts.Output, "output-format", "o", "", "write the results as json, yaml, junit (JUnit XML, for CI systems) or markdown; text by default")
	f.BoolVar(&opts.FailOnly, "fail-only", false, "with a structured --output-format, list only failed assertions")
	f.BoolVar(&opts.Detailed, "detailed-results", false, "in the text output, list the assertions that passed too")
	f.StringVarP(&opts.Selector, "test-case-selector", "t", "policy=*,rule=*,resource=*", "run only the assertions of the policies, rules and resources these patterns (* and ?) match")
	// Kyverno's flags that change nothing here, so that its pipelines run.
	f.Bool("remove-color", false, "accepted for the Kyverno CLI's pipelines: verdict writes no color")
	f.Bool("registry", false, "accepted for the Kyverno CLI's pipelines: registries are always read, with the environment's credentials")
	f.Bool("require-tests", false, "accepted for the Kyverno CLI's pipelines: finding no test file is always an error")
	f.StringVarP(&gitBranch, "git-branch", "b", "", "refused: verdict test reads directories; clone the branch and give its directory")
	f.StringVar(&opts.SigstoreTrustedRoot, "sigstore-trusted-root", "", trustedRootUsage)
	f.BoolVar(&opts.AllowPathsOutsideSuite, "allow-paths-outside-suite", false, "let test files read files outside the directory they were found below (absolute paths, ../ beyond it, symbolic links leading out)")
	return cmd
}
