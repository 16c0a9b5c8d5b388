package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNativePoliciesSuite runs `verdict test` on a suite of Kubernetes
// admission policies in Kyverno's layout (isValidatingAdmissionPolicy,
// isMutatingAdmissionPolicy, paramResources): a ValidatingAdmissionPolicy
// with two bindings selecting namespaces by label, each with its params,
// and a MutatingAdmissionPolicy whose patched resource is compared. The
// same suite with the expectations turned around fails every assertion,
// so the judge compares what each policy did.
func TestNativePoliciesSuite(t *testing.T) {
	var out strings.Builder
	sum, err := RunTests(t.Context(), TestOptions{Dirs: []string{"testdata/native"}}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if sum.Passed != 7 || sum.Failed != 0 || sum.Unsupported != 0 || len(sum.Errors) != 0 {
		t.Fatalf("passed %d, failed %d, unsupported %d, errors %v; want 7 passed\n%s", sum.Passed, sum.Failed, sum.Unsupported, sum.Errors, out.String())
	}

	dir := t.TempDir()
	for _, name := range []string{"policies.yaml", "params.yaml", "resources.yaml", "patched.yaml", "kyverno-test.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata/native", name))
		if err != nil {
			t.Fatal(err)
		}
		text := string(data)
		switch name {
		case "kyverno-test.yaml":
			text = strings.NewReplacer("[api], result: pass", "[api], result: fail",
				"[batch], result: fail", "[batch], result: pass",
				"[toy], result: fail", "[toy], result: pass",
				"[scratch], result: error", "[scratch], result: pass",
				"[loose], result: skip", "[loose], result: fail",
				"[batch], result: skip", "[batch], result: pass").Replace(text)
		case "patched.yaml":
			text = strings.Replace(text, "labels: {team: shop}", "labels: {team: other}", 1)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	out.Reset()
	sum, err = RunTests(t.Context(), TestOptions{Dirs: []string{dir}}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if sum.Passed != 0 || sum.Failed != 7 {
		t.Fatalf("turned around: passed %d, failed %d; want 7 failed\n%s", sum.Passed, sum.Failed, out.String())
	}
}
