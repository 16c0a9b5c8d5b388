package cli

import (
	"slices"
	"testing"

	"github.com/verdict-dev/verdict/internal/testkit/golden"
)

// TestOutputGolden pins, with golden files under testdata/golden, every
// output format of `verdict apply` and `verdict test` for the policies and
// Pods under testdata/apply (two Pod Security policies of the Kyverno
// library, a hand-written unscored policy and an exception: every
// outcome, pass to skip; and a ConfigMap no policy matches) and the suite under testdata/test (assertions
// that hold and one that does not), which reads ../apply: refused
// unless the root given holds it or paths outside are allowed. Paths are relative to the package, as
// `go test` runs in it, so the outputs that name test files are the same
// on every machine.
func TestOutputGolden(t *testing.T) {
	apply := []string{"apply", "-p", "testdata/apply/policies", "-r", "testdata/apply/pods.yaml"}
	applyNone := []string{"apply", "-p", "testdata/apply/policies", "-r", "testdata/apply/configmap.yaml"}
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
		// The suite reads ../apply: the root given holds both.
		"test": {
			args: []string{"test", "testdata"}, code: ExitFailed,
			stdout: "test.txt",
		},
		"test json": {
			args: []string{"test", "testdata", "--json"}, code: ExitFailed,
			stdout: "test.json",
		},
		"test json, failures only": {
			args: []string{"test", "testdata", "--json", "--fail-only"}, code: ExitFailed,
			stdout: "test-fail-only.json",
		},
		"test, with paths outside the suite allowed": {
			args: []string{"test", "testdata/test", "--allow-paths-outside-suite"}, code: ExitFailed,
			stdout: "test-outside-allowed.txt",
		},
		"test, a path outside the suite": {
			args: []string{"test", "testdata/test"}, code: ExitFailed,
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
