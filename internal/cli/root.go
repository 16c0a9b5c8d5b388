// Package cli implements the verdict command line: apply and test for
// pipelines, with no cluster; work, to see and steer the work queue in the
// cluster's NATS (pending and dead-lettered work).
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/verdict-dev/verdict/internal/cli/decisions"
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

// Main runs the command line, in verdict's dialect, and returns the exit
// code.
func Main(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return MainDialect(ctx, DialectVerdict, args, stdin, stdout, stderr)
}

// MainDialect runs the command line in the dialect and returns the exit
// code. In Kyverno's, every error exits ExitFailed, as the Kyverno CLI's
// do, bad input included.
func MainDialect(ctx context.Context, d Dialect, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRoot(ctx, d, stdin, stdout)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	code := ExitOK
	switch {
	case err == nil:
	case errors.Is(err, errFailures):
		code = ExitFailed
	case errors.As(err, new(exitCodeError)):
		var ec exitCodeError
		errors.As(err, &ec)
		return int(ec)
	case errors.As(err, new(work.FailedError)):
		fmt.Fprintln(stderr, "Error:", err)
		code = ExitFailed
	default:
		fmt.Fprintln(stderr, "Error:", err)
		code = ExitUsage
	}
	if d == DialectKyverno && code != ExitOK {
		return ExitFailed
	}
	return code
}

// newRoot builds the commands; they run under ctx.
func newRoot(ctx context.Context, d Dialect, stdin io.Reader, stdout io.Writer) *cobra.Command {
	use := "verdict"
	if d == DialectKyverno {
		use = "kyverno"
	}
	root := &cobra.Command{
		Use:           use,
		Short:         "Verdict evaluates Kyverno-language policies",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	globalFlags(root)
	create := newCreate(stdout)
	create.AddCommand(
		refusedCommand("metrics-config", "it writes the Kyverno chart's metrics configuration: Verdict's metrics are its chart's values (docs/migrating-from-kyverno.md)"),
		refusedCommand("cluster-role", "it writes RBAC for Kyverno's controllers: Verdict's chart grants its services what they read (reporter.rbac.readRules, generator.rbac)"),
	)
	root.AddCommand(newApply(ctx, d, stdin, stdout), newTest(ctx, stdout), newCompare(ctx, stdout), newJP(stdin, stdout), create, newVersion(stdout), work.New(ctx, stdin, stdout), decisions.New(ctx, stdout, time.Now), newWhatIf(ctx, stdin, stdout))
	root.AddCommand(kyvernoOnly()...)
	return root
}

// Apply's outputs, as -o (verdict) or --format (kyverno) names them.
const applyOutputs = "table, json, report (a ClusterPolicyReport) or text (the Kyverno CLI's)"

func newApply(ctx context.Context, d Dialect, stdin io.Reader, stdout io.Writer) *cobra.Command {
	opts := ApplyOptions{}
	var policyReport, table, stdinMode, warnNoPass bool
	var warnExitCode int
	var targets []string
	cmd := &cobra.Command{
		Use:   "apply <policies>... (-r <resources> | --cluster)",
		Short: "Apply policies to resource manifests, or to a cluster's resources, and report the results",
		Long:  applyLong(d),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Kyverno's shape: the policy paths as arguments.
			opts.Policies = append(opts.Policies, args...)
			opts.TargetResources = targets
			opts.AllowNoResources = warnNoPass
			switch {
			case policyReport:
				opts.Output = "report"
			case d == DialectKyverno && table && opts.Output == "text":
				opts.Output = "table"
			}
			if stdinMode {
				// The mutated resources go to stdout, for kubectl; the
				// results to stderr.
				opts.Mutated = stdout
				stdout = cmd.ErrOrStderr()
			}
			counts, err := Apply(ctx, opts, stdin, stdout)
			if err != nil {
				return err
			}
			text := opts.Output == "text"
			switch {
			case text:
			case counts.Error == 1:
				fmt.Fprintln(cmd.ErrOrStderr(), "1 rule result is an error: the rule could not be evaluated (its message says why)")
			case counts.Error > 1:
				fmt.Fprintf(cmd.ErrOrStderr(), "%d rule results are errors: those rules could not be evaluated (their messages say why)\n", counts.Error)
			}
			switch {
			case counts.Fail > 0 || counts.Error > 0:
				return errFailures
			case counts.Warn > 0 && warnExitCode != 0:
				if text {
					fmt.Fprintf(stdout, "exit as warnExitCode is %d\n", warnExitCode)
				}
				return exitCodeError(warnExitCode)
			case counts.Pass == 0 && warnNoPass:
				if text {
					fmt.Fprintln(stdout, "exit as no objects satisfied policy")
				}
				return exitCodeError(warnExitCode)
			}
			return nil
		},
	}
	f := cmd.Flags()
	// Where the dialects differ: -p and -o.
	if d == DialectKyverno {
		f.StringSliceVar(&opts.Policies, "policy", nil, "policy files or folders (or give them as arguments)")
		f.BoolVarP(&policyReport, "policy-report", "p", false, "write the results as a ClusterPolicyReport (--output-format yaml or json)")
		f.StringVarP(&opts.MutatedOutput, "output", "o", "", "write the resources mutations changed, and those generate rules would create, to this file (.yaml, .yml) or folder")
		f.StringVar(&opts.Output, "format", "text", "output: "+applyOutputs)
	} else {
		f.StringSliceVarP(&opts.Policies, "policy", "p", nil, "policy files or folders (or give them as arguments, as the Kyverno CLI takes them)")
		f.BoolVar(&policyReport, "policy-report", false, "write the results as a ClusterPolicyReport, as -o report (--output-format yaml or json; the Kyverno CLI's -p)")
		f.StringVarP(&opts.Output, "output", "o", "table", "output: "+applyOutputs)
		f.StringVar(&opts.MutatedOutput, "mutated-output", "", "write the resources mutations changed, and those generate rules would create, to this file (.yaml, .yml) or folder (the Kyverno CLI's -o)")
	}
	f.StringVar(&opts.ReportFormat, "output-format", "yaml", "the encoding of the report output: yaml or json")
	f.StringSliceVarP(&opts.Resources, "resource", "r", nil, "resource files or folders (\"-\" is stdin); with --cluster, names of the cluster's resources")
	f.StringSliceVar(&opts.Resources, "resources", nil, "the same as --resource")
	f.StringSliceVarP(&opts.Exceptions, "exception", "e", nil, "files of PolicyExceptions to apply besides those among the policies")
	f.StringSliceVar(&opts.Exceptions, "exceptions", nil, "the same as --exception")
	f.BoolVar(&opts.ExceptionsInResources, "exceptions-with-resources", false, "apply the PolicyExceptions found among the resource files too")
	f.BoolVar(&opts.ExceptionsInResources, "exceptions-within-resources", false, "the same as --exceptions-with-resources")
	f.BoolVar(&opts.Detailed, "detailed", false, "list every result in the table, not only failures")
	f.BoolVar(&opts.Detailed, "detailed-results", false, "the same as --detailed")
	f.BoolVarP(&table, "table", "t", false, "the table output (verdict's default; in the kyverno dialect, instead of the text)")
	f.StringVarP(&opts.ValuesFile, "values-file", "f", "", "a values file (the Kyverno CLI's kind Values): variables for the policies, namespace labels")
	f.StringSliceVarP(&opts.Set, "set", "s", nil, "global values, name=value (over the values file's)")
	f.StringVarP(&opts.UserInfo, "userinfo", "u", "", "a user info file (the Kyverno CLI's kind UserInfo): who makes every request")
	f.BoolVar(&opts.AuditWarn, "audit-warn", false, "report the failures of rules in Audit mode as warnings (with --warn-exit-code, the exit code says there were some)")
	f.IntVar(&warnExitCode, "warn-exit-code", 0, "exit with this code when results warn and none fails or errs")
	f.BoolVar(&warnNoPass, "warn-no-pass", false, "exit with --warn-exit-code's code when no result passed")
	f.BoolVarP(&opts.Cluster, "cluster", "c", false, "evaluate the policies on the cluster's resources of the kinds they select (--kubeconfig, --context, $KUBECONFIG)")
	f.StringVarP(&opts.Namespace, "namespace", "n", "", "with --cluster: the resources of this namespace only")
	f.BoolVar(&opts.ClusterWide, "cluster-wide-resources", false, "with --cluster: the cluster-scoped resources (and, with --namespace, that namespace's)")
	f.StringVar(&opts.Kube.Kubeconfig, "kubeconfig", "", "with --cluster: the kubeconfig file ($KUBECONFIG, then ~/.kube/config, by default)")
	f.StringVar(&opts.Kube.Context, "context", "", "with --cluster: the kubeconfig context (its current context by default)")
	f.Int64Var(&opts.BatchSize, "batch-size", defaultBatchSize, "with --cluster: objects asked for by each list request")
	f.StringSliceVar(&targets, "target-resource", nil, "files of the resources mutate-existing rules patch and generate rules clone")
	f.StringSliceVar(&targets, "target-resources", nil, "the same as --target-resource (files or folders)")
	f.StringSliceVar(&opts.ParamResources, "parameter-resource", nil, "files of the params of ValidatingAdmissionPolicies and MutatingAdmissionPolicies")
	f.StringVar(&opts.ContextFile, "context-file", "", "a context file (the Kyverno CLI's kind Context): objects context entries and CEL reads find, image data")
	f.StringSliceVar(&opts.CRDs, "crd-paths", nil, "files of CustomResourceDefinitions: their cluster-scoped kinds get no default namespace")
	f.StringSliceVar(&opts.CRDs, "crd-path", nil, "the same as --crd-paths")
	_ = f.MarkHidden("crd-path") // defined above
	f.BoolVarP(&stdinMode, "stdin", "i", false, "write the mutated resources to stdout (for kubectl apply -f -) and the results to stderr")
	f.StringVar(&opts.Operation, "operation", "CREATE", "admission operation: CREATE, UPDATE or DELETE")
	f.StringVar(&opts.SigstoreTrustedRoot, "sigstore-trusted-root", "", trustedRootUsage)
	f.Int64Var(&opts.MaxDocumentBytes, "max-document-bytes", DefaultMaxDocumentBytes, "largest resource document read; a larger one is an error")
	accept(f, "verdict writes no color", "remove-color")
	accept(f, "registries are always read, with the environment's credentials", "registry")
	accept(f, "verdict evaluates every resource, whatever another's outcome", "continue-on-fail")
	accept(f, "verdict always applies the PolicyExceptions found among the policies", "exceptions-within-policies")
	accept(f, "verdict evaluates on every core", "show-performance")
	f.Int("concurrent", 1, "accepted for the Kyverno CLI's pipelines: verdict evaluates on every core")
	f.Bool("continue-on-error", true, "accepted for the Kyverno CLI's pipelines: a kind verdict may not list is left out")
	for _, n := range []string{"concurrent", "continue-on-error"} {
		_ = f.MarkHidden(n) // defined above
	}
	const git = "verdict reads files and folders, not repositories: clone the repository (git clone --branch <branch> <url>) and give its folder"
	refuse(cmd,
		refusedFlag{name: "git-branch", short: "b", value: true, why: git},
		refusedFlag{name: "username", value: true, why: git},
		refusedFlag{name: "password", value: true, why: git},
		refusedFlag{name: "json", value: true, why: "verdict apply evaluates Kubernetes resources: JSON payloads are evaluated by verdict test (a test file's jsonPayloads)"},
		refusedFlag{name: "http-payload", value: true, why: "verdict does not evaluate the HTTP authorization mode of ValidatingPolicies"},
		refusedFlag{name: "envoy-payload", value: true, why: "verdict does not evaluate the Envoy authorization mode of ValidatingPolicies"},
		refusedFlag{name: "generate-exceptions", why: "write each PolicyException with verdict create exception <name> --policy-rules <policy>,<rule> --any kind=<kind>,name=<name>"},
		refusedFlag{name: "generated-exception-ttl", value: true, why: "exceptions are not generated: see --generate-exceptions"},
	)
	return cmd
}

// applyLong is apply's help in the dialect.
func applyLong(d Dialect) string {
	flags := `-p names policies and -o is the output (table, json, report, text);
the Kyverno CLI's -p is --policy-report and its -o is
--mutated-output. Run as kyverno or kubectl-kyverno, verdict takes
Kyverno's meanings.`
	if d == DialectKyverno {
		flags = `Run as kyverno, -p is --policy-report and -o (--output) is where mutated
resources are written, as in the Kyverno CLI; verdict's outputs are
--format table, json, report and text (the default, the Kyverno CLI's).
Every error exits 1.`
	}
	return `Apply evaluates every policy on every resource (files or folders,
multi-document YAML or JSON, "-" for stdin), mutations first, then
validations, and prints the results and the summary line
"pass: N, fail: N, warn: N, error: N, skip: N". With --cluster it
evaluates the resources of the cluster of the kubeconfig (--kubeconfig,
$KUBECONFIG, ~/.kube/config; --context) of the kinds the policies
select (-n, one namespace; -r, resources by name), and the cluster
answers context entries, resource reads and namespace selectors.

It takes the Kyverno CLI's shape: policy paths as arguments, --resources,
--exception/-e, --values-file/-f, --set/-s, --userinfo/-u,
--policy-report, --audit-warn, --warn-exit-code, --warn-no-pass,
--target-resource, --context-file. ` + flags + `

Resources are read one document at a time; a document larger than
--max-document-bytes is an error naming the file and the document.

Exit codes:
  0  no rule failed or ended in error (pass, skip and warn results only)
  1  a rule failed, or a rule ended in error (it could not be evaluated:
     a JMESPath function failed, a variable names a missing field, ...)
  2  bad input: an invalid policy or option, unreadable YAML, or a path
     that yields no policy or no resource (kyverno dialect: 1)
  N  --warn-exit-code N: results warned and none failed or erred, or
     (--warn-no-pass) none passed`
}

// refusedCommand is a command of the Kyverno CLI verdict does not have.
func refusedCommand(use, why string) *cobra.Command {
	return &cobra.Command{
		Use:                use,
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(*cobra.Command, []string) error {
			return fmt.Errorf("%w: %s: %s", ErrInvalidOptions, use, why)
		},
	}
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
	cmd.PreRunE = func(_ *cobra.Command, args []string) error {
		for _, a := range args {
			if isURL(a) {
				return fmt.Errorf("%w: %s: verdict test reads folders, not repositories: clone the repository (git clone --branch <branch> <url>) and give its folder", ErrInvalidOptions, a)
			}
		}
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
