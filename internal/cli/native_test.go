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
	sum, err := RunTests(t.Context(), TestOptions{Dirs: []string{"testdata/outputs/native"}}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if sum.Passed != 7 || sum.Failed != 0 || sum.Unsupported != 0 || len(sum.Errors) != 0 {
		t.Fatalf("passed %d, failed %d, unsupported %d, errors %v; want 7 passed\n%s", sum.Passed, sum.Failed, sum.Unsupported, sum.Errors, out.String())
	}

	dir := t.TempDir()
	for _, name := range []string{"policies.yaml", "params.yaml", "resources.yaml", "patched.yaml", "kyverno-test.yaml"} {
		data, err := os.ReadFile(filepath.Join("testdata/outputs/native", name))
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

// A result that names no resource is about every resource of the test,
// as the reference CLI reads it: each is an assertion, and one the
// policy treats otherwise fails.
func TestResultWithoutResources(t *testing.T) {
	write := func(dir, name, text string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	run := func(secondLabel string) (*TestSummary, string) {
		dir := t.TempDir()
		write(dir, "policy.yaml", `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: require-app}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations: [{expression: "'app' in object.metadata.?labels.orValue({})"}]
`)
		write(dir, "resources.yaml", `apiVersion: v1
kind: ConfigMap
metadata: {name: one, labels: {app: a}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: two, labels: {`+secondLabel+`: b}}
`)
		write(dir, "kyverno-test.yaml", `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: all}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {isValidatingAdmissionPolicy: true, policy: require-app, kind: ConfigMap, result: pass}
`)
		var out strings.Builder
		sum, err := RunTests(t.Context(), TestOptions{Dirs: []string{dir}}, &out)
		if err != nil {
			t.Fatalf("%v\n%s", err, out.String())
		}
		return sum, out.String()
	}
	if sum, out := run("app"); sum.Passed != 2 || sum.Failed != 0 {
		t.Fatalf("passed %d, failed %d; want both resources passed\n%s", sum.Passed, sum.Failed, out)
	}
	if sum, out := run("other"); sum.Passed != 1 || sum.Failed != 1 || !strings.Contains(out, "resource default/two: want pass, got fail") {
		t.Fatalf("passed %d, failed %d; want the unlabelled resource failed\n%s", sum.Passed, sum.Failed, out)
	}
}
