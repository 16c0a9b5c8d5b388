package cli

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// kyvernoFlag is a flag of the Kyverno CLI 1.19 (the flags its apply and
// test commands define, cmd/cli/kubectl-kyverno/commands/{apply,test}/
// command.go at v1.19.0, and the logging flags every command has),
// written down here as data, and what verdict makes of it.
type kyvernoFlag struct {
	name, short string
	// value is what the flag is given; "" for a flag without a value.
	value string
	// refused: verdict refuses the flag; the message names what to do
	// instead (want). Otherwise verdict takes it: the run exits code,
	// and its stderr holds want, if any.
	refused bool
	want    string
	code    int
	// extra are more arguments the run needs.
	extra []string
}

// kyvernoApplyFlags are apply's. The base run (testdata/kyverno, a
// warning, a pass and a skip) exits 0; each flag is added to it.
func kyvernoApplyFlags(t *testing.T) []kyvernoFlag {
	dir := t.TempDir()
	missing := filepath.Join(dir, "no-kubeconfig")
	cluster := func(f kyvernoFlag) kyvernoFlag {
		// No cluster here: the run gets as far as reading the kubeconfig.
		f.code, f.want = ExitFailed, "kubeconfig"
		f.extra = append(f.extra, "--cluster", "--kubeconfig", missing)
		return f
	}
	return []kyvernoFlag{
		{name: "json", value: "payload.json", refused: true, want: "JSON payloads are evaluated by verdict test (a test file's jsonPayloads)"},
		{name: "http-payload", value: "request.json", refused: true, want: "verdict does not evaluate the HTTP authorization mode"},
		{name: "envoy-payload", value: "request.json", refused: true, want: "verdict does not evaluate the Envoy authorization mode"},
		{name: "resource", short: "r", value: "testdata/kyverno/pods.yaml"},
		{name: "resources", value: "testdata/kyverno/pods.yaml"},
		{name: "target-resource", value: "testdata/kyverno/pods.yaml"},
		{name: "target-resources", value: "testdata/kyverno"},
		cluster(kyvernoFlag{name: "cluster", short: "c"}),
		{name: "output", short: "o", value: filepath.Join(dir, "mutated.yaml")},
		{name: "userinfo", short: "u", value: "testdata/kyverno/user.yaml"},
		{name: "set", short: "s", value: "approved=redis"},
		{name: "values-file", short: "f", value: "testdata/kyverno/values.yaml"},
		{name: "context-file", value: "testdata/kyverno/context.yaml"},
		{name: "policy-report", short: "p"},
		{name: "output-format", value: "json", extra: []string{"--policy-report"}},
		cluster(kyvernoFlag{name: "namespace", short: "n", value: "default"}),
		{name: "stdin", short: "i"},
		{name: "registry"},
		cluster(kyvernoFlag{name: "kubeconfig", value: missing}),
		cluster(kyvernoFlag{name: "context", value: "kind-kind"}),
		{name: "git-branch", short: "b", value: "main", refused: true, want: "clone the repository (git clone --branch <branch> <url>) and give its folder"},
		{name: "username", value: "me", refused: true, want: "clone the repository"},
		{name: "password", value: "secret", refused: true, want: "clone the repository"},
		{name: "audit-warn"},
		{name: "warn-exit-code", value: "3", code: 3},
		{name: "warn-no-pass"},
		{name: "remove-color"},
		{name: "detailed-results"},
		{name: "table", short: "t"},
		{name: "parameter-resource", value: "testdata/kyverno/pods.yaml"},
		{name: "exception", short: "e", value: "testdata/kyverno/exception.yaml"},
		{name: "exceptions", value: "testdata/kyverno/exception.yaml"},
		{name: "continue-on-fail"},
		{name: "exceptions-with-resources"},
		{name: "exceptions-within-resources"},
		{name: "exceptions-within-policies"},
		{name: "generate-exceptions", refused: true, want: "verdict create exception <name>"},
		{name: "generated-exception-ttl", value: "24h", refused: true, want: "exceptions are not generated"},
		cluster(kyvernoFlag{name: "cluster-wide-resources"}),
		{name: "concurrent", value: "4"},
		{name: "batch-size", value: "10"},
		{name: "continue-on-error"},
		{name: "show-performance"},
		{name: "crd-paths", value: "testdata/kyverno/crd.yaml"},
		{name: "crd-path", value: "testdata/kyverno/crd.yaml"},
	}
}

// kyvernoTestFlags are test's. The base run (testdata, the assertions
// the selector keeps) exits 0.
var kyvernoTestFlags = []kyvernoFlag{
	{name: "file-name", short: "f", value: "kyverno-test.yaml"},
	{name: "git-branch", short: "b", value: "main", refused: true, want: "clone the branch (git clone --branch main <url>) and give its directory"},
	{name: "test-case-selector", short: "t", value: "policy=disallow-*,rule=privileged-*"},
	{name: "output-format", short: "o", value: "junit"},
	{name: "registry"},
	{name: "fail-only"},
	{name: "remove-color"},
	{name: "detailed-results"},
	{name: "require-tests"},
}

// kyvernoGlobalFlags are the logging flags (klog's) and --kubeconfig
// every command of the Kyverno CLI takes: verdict writes no logs.
var kyvernoGlobalFlags = []kyvernoFlag{
	{name: "v", short: "v", value: "4"},
	{name: "add_dir_header"},
	{name: "alsologtostderr"},
	{name: "alsologtostderrthreshold", value: "INFO"},
	{name: "kubeconfig", value: "config"},
	{name: "legacy_stderr_threshold_behavior"},
	{name: "log_backtrace_at", value: ":0"},
	{name: "log_dir", value: "/tmp"},
	{name: "log_file", value: "log.txt"},
	{name: "log_file_max_size", value: "1800"},
	{name: "logtostderr"},
	{name: "one_output"},
	{name: "skip_headers"},
	{name: "skip_log_headers"},
	{name: "stderrthreshold", value: "2"},
	{name: "vmodule", value: "x=2"},
}

// TestKyvernoFlags walks the Kyverno CLI's flags of apply and test, and
// its global flags: run as kyverno, each is defined with Kyverno's
// shorthand and kind (with or without a value), and a run with it either
// works or fails with a message naming what to use instead, never with
// an unknown flag.
func TestKyvernoFlags(t *testing.T) {
	applyBase := []string{"apply", "testdata/kyverno/policy.yaml", "-r", "testdata/kyverno/pods.yaml", "-e", "testdata/kyverno/exception.yaml"}
	testBase := []string{"test", "testdata/outputs", "-t", "policy=disallow-*,rule=privileged-*"}
	groups := []struct {
		command string
		base    []string
		flags   []kyvernoFlag
	}{
		{"apply", applyBase, kyvernoApplyFlags(t)},
		{"test", testBase, kyvernoTestFlags},
		{"apply", applyBase, kyvernoGlobalFlags},
		{"test", testBase, kyvernoGlobalFlags},
		{"jp", []string{"jp", "function", "truncate"}, kyvernoGlobalFlags},
	}
	for _, g := range groups {
		cmd := findCommand(t, DialectKyverno, g.command)
		for _, f := range g.flags {
			t.Run(g.command+" --"+f.name, func(t *testing.T) {
				flag := cmd.Flags().Lookup(f.name)
				if flag == nil {
					flag = cmd.InheritedFlags().Lookup(f.name)
				}
				if flag == nil {
					t.Fatalf("kyverno %s has no --%s", g.command, f.name)
				}
				if flag.Shorthand != f.short {
					t.Errorf("--%s: shorthand %q, Kyverno's is %q", f.name, flag.Shorthand, f.short)
				}
				if takesValue := flag.NoOptDefVal == ""; takesValue != (f.value != "") {
					t.Errorf("--%s: takes a value: %v, Kyverno's: %v", f.name, takesValue, f.value != "")
				}
				args := append(append(append([]string{}, g.base...), f.extra...), "--"+f.name)
				if f.value != "" {
					args = append(args, f.value)
				}
				code, _, errOut := runDialect(t, DialectKyverno, args...)
				for _, bad := range []string{"unknown flag", "unknown shorthand", "flag needs an argument", "invalid argument"} {
					if strings.Contains(errOut, bad) {
						t.Fatalf("%s: %s", strings.Join(args, " "), errOut)
					}
				}
				switch {
				case f.refused:
					if code != ExitFailed || !strings.Contains(errOut, "--"+f.name+": ") || !strings.Contains(errOut, f.want) {
						t.Errorf("%s: exit %d, stderr %q; want a refusal saying %q", strings.Join(args, " "), code, errOut, f.want)
					}
				case code != f.code || !strings.Contains(errOut, f.want):
					t.Errorf("%s: exit %d, stderr %q; want exit %d and %q", strings.Join(args, " "), code, errOut, f.code, f.want)
				}
			})
		}
	}
}

// TestDialects: apply's -p and -o are verdict's (--policy, the output
// format) when run as verdict and Kyverno's (--policy-report, where the
// mutated resources go) when run as kyverno or kubectl-kyverno; every
// other flag of Kyverno's means the same in both.
func TestDialects(t *testing.T) {
	for argv0, want := range map[string]Dialect{
		"verdict": DialectVerdict, "/usr/local/bin/verdict": DialectVerdict, "kyverno": DialectKyverno,
		"/usr/local/bin/kubectl-kyverno": DialectKyverno, `C:\bin\kyverno.exe`: DialectKyverno, "kyverno-cli": DialectVerdict,
	} {
		if got := DialectOf(argv0); got != want {
			t.Errorf("DialectOf(%q) = %v, want %v", argv0, got, want)
		}
	}
	verdict, kyverno := findCommand(t, DialectVerdict, "apply"), findCommand(t, DialectKyverno, "apply")
	for short, names := range map[string][2]string{"p": {"policy", "policy-report"}, "o": {"output", "output"}} {
		if got := verdict.Flags().ShorthandLookup(short).Name; got != names[0] {
			t.Errorf("verdict apply -%s is --%s, want --%s", short, got, names[0])
		}
		if got := kyverno.Flags().ShorthandLookup(short).Name; got != names[1] {
			t.Errorf("kyverno apply -%s is --%s, want --%s", short, got, names[1])
		}
	}
	if verdict.Flags().Lookup("output").Value.String() != "table" || kyverno.Flags().Lookup("output").Value.String() != "" {
		t.Error("--output: verdict's is the output format (table), kyverno's a path (none)")
	}
	for _, f := range kyvernoApplyFlags(t) {
		if f.short == "p" || f.short == "o" || f.name == "policy-report" {
			continue
		}
		vf, kf := verdict.Flags().Lookup(f.name), kyverno.Flags().Lookup(f.name)
		if vf == nil || kf == nil || vf.Shorthand != kf.Shorthand || vf.Value.Type() != kf.Value.Type() {
			t.Errorf("--%s differs between the dialects", f.name)
		}
	}
	// A usage error exits 2 in verdict's dialect, 1 (as every error of
	// the Kyverno CLI) in Kyverno's.
	args := []string{"apply", "testdata/kyverno/policy.yaml"}
	if code, _, _ := runDialect(t, DialectVerdict, args...); code != ExitUsage {
		t.Errorf("verdict: exit %d, want %d", code, ExitUsage)
	}
	if code, _, _ := runDialect(t, DialectKyverno, args...); code != ExitFailed {
		t.Errorf("kyverno: exit %d, want %d", code, ExitFailed)
	}
}

// TestKyvernoOnlyCommands: the Kyverno CLI's commands verdict lacks say
// what to use instead.
func TestKyvernoOnlyCommands(t *testing.T) {
	for args, want := range map[string]string{
		"docs -o docs":            "verdict <command> --help",
		"migrate --resource x":    "nothing to migrate",
		"fix test . --save":       "fix it by hand",
		"oci pull -i x":           "oras pull",
		"create metrics-config":   "Verdict's metrics are its chart's values",
		"create cluster-role x y": "Verdict's chart grants",
	} {
		code, _, errOut := runDialect(t, DialectKyverno, strings.Fields(args)...)
		if code != ExitFailed || !strings.Contains(errOut, want) {
			t.Errorf("kyverno %s: exit %d, stderr %q; want %q", args, code, errOut, want)
		}
	}
}

// findCommand is the command of the root built in the dialect.
func findCommand(t *testing.T, d Dialect, name string) *cobra.Command {
	t.Helper()
	root := newRoot(context.Background(), d, strings.NewReader(""), io.Discard)
	cmd, _, err := root.Find([]string{name})
	if err != nil || cmd == root {
		t.Fatalf("no command %s: %v", name, err)
	}
	return cmd
}
