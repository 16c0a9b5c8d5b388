package cli

import (
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/internal/testkit/golden"
)

// TestOutputGolden pins, with golden files under testdata/golden, every
// output format of `verdict apply` and `verdict test` for the policies and
// Pods under testdata/outputs/apply (two Pod Security policies of the Kyverno
// library, a hand-written unscored policy and an exception: every
// outcome, pass to skip; and a ConfigMap no policy matches) and the suite under testdata/outputs/test (assertions
// that hold and one that does not), which reads ../apply: refused
// unless the root given holds it or paths outside are allowed. Paths are relative to the package, as
// `go test` runs in it, so the outputs that name test files are the same
// on every machine.
func TestOutputGolden(t *testing.T) {
	apply := []string{"apply", "-p", "testdata/outputs/apply/policies", "-r", "testdata/outputs/apply/pods.yaml"}
	applyNone := []string{"apply", "-p", "testdata/outputs/apply/policies", "-r", "testdata/outputs/apply/configmap.yaml"}
	tests := map[string]struct {
		args []string
		code int
		// stdout and stderr name golden files; stderr "" expects nothing.
		stdout, stderr string
	}{
		"apply table": {
			args: apply, code: ExitFailed,
			stdout: "apply-table.txt", stderr: "apply-stderr.txt",
		},
		"apply detailed table": {
			args: slices.Concat(apply, []string{"--detailed"}), code: ExitFailed,
			stdout: "apply-detailed.txt", stderr: "apply-stderr.txt",
		},
		"apply json": {
			args: slices.Concat(apply, []string{"-o", "json"}), code: ExitFailed,
			stdout: "apply.json", stderr: "apply-stderr.txt",
		},
		"apply report": {
			args: slices.Concat(apply, []string{"-o", "report"}), code: ExitFailed,
			stdout: "apply-report.yaml", stderr: "apply-stderr.txt",
		},
		"apply table, no results": {
			args: applyNone, code: ExitOK,
			stdout: "apply-none-table.txt",
		},
		"apply json, no results": {
			args: slices.Concat(applyNone, []string{"-o", "json"}), code: ExitOK,
			stdout: "apply-none.json",
		},
		"apply report, no results": {
			args: slices.Concat(applyNone, []string{"-o", "report"}), code: ExitOK,
			stdout: "apply-none-report.yaml",
		},
		// The Kyverno CLI's shape: policies as arguments, --resources,
		// -e, --detailed-results, --table, --warn-exit-code,
		// --policy-report (testdata/kyverno: a warning, a pass and a
		// skip by the exception given with -e).
		"apply, the Kyverno CLI's shape": {
			args: []string{
				"apply", "testdata/kyverno/policy.yaml", "--resources", "testdata/kyverno/pods.yaml", "-e", "testdata/kyverno/exception.yaml",
				"--detailed-results", "--table", "--remove-color", "--warn-exit-code", "3",
			},
			code: 3, stdout: "apply-kyverno.txt",
		},
		"apply, the Kyverno CLI's shape, policy report": {
			args: []string{"apply", "testdata/kyverno/policy.yaml", "-r", "testdata/kyverno/pods.yaml", "--exceptions", "testdata/kyverno/exception.yaml", "--policy-report"},
			code: ExitOK, stdout: "apply-kyverno-report.yaml",
		},
		// Variables from a values file (global and per resource), --set
		// over them, and the requester from a user info file.
		"apply, values, --set and --userinfo": {
			args: []string{
				"apply", "testdata/kyverno/values-policy.yaml", "-r", "testdata/kyverno/pods.yaml", "-f", "testdata/kyverno/values.yaml",
				"-u", "testdata/kyverno/user.yaml", "--set", "approved=redis", "--detailed-results", "--audit-warn",
			},
			// An Enforce policy's failures stay failures with --audit-warn.
			code: ExitFailed, stdout: "apply-values.txt",
		},
		"apply --audit-warn": {
			args: []string{"apply", "testdata/outputs/apply/policies/disallow-host-namespaces.yaml", "-r", "testdata/outputs/apply/pods.yaml", "--audit-warn", "--warn-exit-code", "4"},
			code: 4, stdout: "apply-audit-warn.txt",
		},
		// verdict jp: Kyverno's JMESPath on the command line.
		"jp query": {
			args: []string{"jp", "query", "-i", "testdata/kyverno/pods.yaml", "metadata", "truncate(metadata.namespace, `2`)", "spec.containers[].image"},
			code: ExitOK, stdout: "jp-query.txt",
		},
		"jp query, compact and unquoted": {
			args: []string{"jp", "query", "-i", "testdata/kyverno/pods.yaml", "-c", "-u", "metadata", "metadata.name"},
			code: ExitOK, stdout: "jp-query-compact.txt",
		},
		"jp function": {
			args: []string{"jp", "function"}, code: ExitOK, stdout: "jp-function.txt",
		},
		"jp parse": {
			args: []string{"jp", "parse", "spec.containers[?image==`\"nginx\"`].name"}, code: ExitOK, stdout: "jp-parse.txt",
		},
		// The suite reads ../apply: the root given holds both.
		"test": {
			args: []string{"test", "testdata/outputs"}, code: ExitFailed,
			stdout: "test.txt",
		},
		"test json": {
			args: []string{"test", "testdata/outputs", "--json"}, code: ExitFailed,
			stdout: "test.json",
		},
		"test json, failures only": {
			args: []string{"test", "testdata/outputs", "--json", "--fail-only"}, code: ExitFailed,
			stdout: "test-fail-only.json",
		},
		// Kyverno's --output-format and --test-case-selector.
		"test junit": {
			args: []string{"test", "testdata/outputs", "--output-format", "junit"}, code: ExitFailed,
			stdout: "test-junit.xml",
		},
		"test yaml, failures only": {
			args: []string{"test", "testdata/outputs", "-o", "yaml", "--fail-only"}, code: ExitFailed,
			stdout: "test-fail-only.yaml",
		},
		"test markdown": {
			args: []string{"test", "testdata/outputs", "-o", "markdown"}, code: ExitFailed,
			stdout: "test.md",
		},
		"test, detailed, selected": {
			args: []string{"test", "testdata/outputs", "--detailed-results", "-t", "policy=disallow-*,rule=privileged-*", "--remove-color", "--registry", "--require-tests"}, code: ExitOK,
			stdout: "test-selected.txt",
		},
		"test, with paths outside the suite allowed": {
			args: []string{"test", "testdata/outputs/test", "--allow-paths-outside-suite"}, code: ExitFailed,
			stdout: "test-outside-allowed.txt",
		},
		"test, a path outside the suite": {
			args: []string{"test", "testdata/outputs/test"}, code: ExitFailed,
			stdout: "test-outside.txt",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := run(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstderr: %s", code, tc.code, errOut)
			}
			golden.Assert(t, "testdata/golden/"+tc.stdout, []byte(out))
			switch {
			case tc.stderr != "":
				golden.Assert(t, "testdata/golden/"+tc.stderr, []byte(errOut))
			case errOut != "":
				t.Errorf("stderr %q, want nothing", errOut)
			}
		})
	}
}

// Kyverno's flags that cannot apply are refused with the reason
// and what to do instead; a selector or format Verdict does not know is
// a usage error naming what it takes.
func TestTestFlagsRefused(t *testing.T) {
	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"a git branch":   {[]string{"test", "testdata/outputs", "-b", "main"}, "clone the branch (git clone --branch main <url>) and give its directory"},
		"a selector key": {[]string{"test", "testdata/outputs", "-t", "kind=Pod"}, "the keys are policy, rule and resource"},
		"a selector":     {[]string{"test", "testdata/outputs", "-t", "policy"}, "each part is <key>=<pattern>"},
		"a format":       {[]string{"test", "testdata/outputs", "-o", "html"}, "use text, json, yaml, junit, markdown"},
		"a --set without a value": {
			[]string{"apply", "testdata/kyverno/values-policy.yaml", "-r", "testdata/kyverno/pods.yaml", "--set", "approved"},
			`--set "approved": use name=value`,
		},
		"a jp syntax error":      {[]string{"jp", "query", "-i", "testdata/kyverno/pods.yaml", "metadata.["}, "metadata.[: "},
		"an unknown jp function": {[]string{"jp", "function", "nope"}, `no custom function "nope"`},
		"a policy given as an exception": {
			[]string{"apply", "testdata/kyverno/policy.yaml", "-r", "testdata/kyverno/pods.yaml", "-e", "testdata/kyverno/policy.yaml"},
			"an exception file holds PolicyExceptions only",
		},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := run(t, tc.args...)
			if code != ExitUsage || out != "" || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stdout %q, stderr %q; want %d and %q", code, out, errOut, ExitUsage, tc.want)
			}
		})
	}
}

// `verdict version` prints the build's module version, commit (dirty
// when the tree had changes), time, Go release and the Kyverno level.
func TestVersionText(t *testing.T) {
	info := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.9.0"}, Settings: []debug.BuildSetting{
		{Key: "vcs.revision", Value: "abc123"}, {Key: "vcs.time", Value: "2026-11-28T06:00:00Z"}, {Key: "vcs.modified", Value: "true"},
	}}
	want := "Version: v0.9.0\nCommit: abc123-dirty\nBuilt: 2026-11-28T06:00:00Z\nGo: go1.26.8\nKyverno: 1.19 (the policy language and test files it reads)\n"
	if got := versionText(info); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if got := versionText(nil); !strings.HasPrefix(got, "Version: unknown\nCommit: unknown\n") {
		t.Fatalf("without build info: %q", got)
	}
	code, out, _ := run(t, "version")
	if code != ExitOK || !strings.Contains(out, "Kyverno: "+KyvernoLevel) {
		t.Fatalf("verdict version: exit %d, %q", code, out)
	}
}
