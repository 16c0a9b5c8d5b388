package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const requireLabel = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: require-app-label
  annotations:
    policies.kyverno.io/category: Best Practices
    policies.kyverno.io/severity: medium
spec:
  validationFailureAction: Enforce
  rules:
  - name: check-app
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "label app is required"
      pattern: {metadata: {labels: {app: "?*"}}}
`

const twoPods = `apiVersion: v1
kind: Pod
metadata: {name: good, labels: {app: web}}
spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: Pod
metadata: {name: bad}
spec: {containers: [{name: c, image: nginx}]}
`

func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestApplyTable(t *testing.T) {
	dir := writeFiles(t, map[string]string{"policy.yaml": requireLabel, "pods.yaml": twoPods})
	code, out, _ := run(t, "apply", "-p", filepath.Join(dir, "policy.yaml"), "-r", filepath.Join(dir, "pods.yaml"))
	if code != ExitFailed {
		t.Fatalf("exit %d, want %d", code, ExitFailed)
	}
	if !strings.Contains(out, "Pod/default/bad") || !strings.Contains(out, "rule check-app failed at path /metadata/labels/") {
		t.Fatalf("table does not show the failure:\n%s", out)
	}
	if !strings.HasSuffix(out, "pass: 1, fail: 1, warn: 0, error: 0, skip: 0\n") {
		t.Fatalf("summary line missing:\n%s", out)
	}
}

func TestApplyPassExitsZero(t *testing.T) {
	dir := writeFiles(t, map[string]string{"p/policy.yaml": requireLabel, "r/pod.yaml": strings.Split(twoPods, "---")[0]})
	code, out, _ := run(t, "apply", "-p", filepath.Join(dir, "p"), "-r", filepath.Join(dir, "r"))
	if code != ExitOK || !strings.Contains(out, "pass: 1, fail: 0") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

func TestApplyJSONAndReport(t *testing.T) {
	dir := writeFiles(t, map[string]string{"policy.yaml": requireLabel, "pods.yaml": twoPods})
	_, out, _ := run(t, "apply", "-p", filepath.Join(dir, "policy.yaml"), "-r", filepath.Join(dir, "pods.yaml"), "-o", "json")
	var doc struct {
		Results []applyResult  `json:"results"`
		Summary map[string]int `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if len(doc.Results) != 2 || doc.Summary["fail"] != 1 || doc.Results[0].Category != "Best Practices" {
		t.Fatalf("json = %+v", doc)
	}
	_, out, _ = run(t, "apply", "-p", filepath.Join(dir, "policy.yaml"), "-r", filepath.Join(dir, "pods.yaml"), "-o", "report")
	for _, want := range []string{"kind: ClusterPolicyReport", "apiVersion: wgpolicyk8s.io/v1alpha2", "result: fail", "severity: medium", "fail: 1"} {
		if !strings.Contains(out, want) {
			t.Fatalf("report misses %q:\n%s", want, out)
		}
	}
}

func TestApplyInvalidPolicy(t *testing.T) {
	bad := strings.Replace(requireLabel, "pattern:", "patern:", 1)
	dir := writeFiles(t, map[string]string{"policy.yaml": bad, "pods.yaml": twoPods})
	code, _, errOut := run(t, "apply", "-p", filepath.Join(dir, "policy.yaml"), "-r", filepath.Join(dir, "pods.yaml"))
	if code != ExitUsage {
		t.Fatalf("exit %d, want %d", code, ExitUsage)
	}
	if !strings.Contains(errOut, `spec.rules[0].validate.patern: unknown field "patern"`) {
		t.Fatalf("error does not name the field:\n%s", errOut)
	}
}

func TestApplyMalformedYAML(t *testing.T) {
	dir := writeFiles(t, map[string]string{"policy.yaml": requireLabel, "pods.yaml": "apiVersion: v1\nkind: Pod\nmetadata: {name: [\n"})
	code, _, errOut := run(t, "apply", "-p", filepath.Join(dir, "policy.yaml"), "-r", filepath.Join(dir, "pods.yaml"))
	if code != ExitUsage || !strings.Contains(errOut, "pods.yaml") {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
}

func TestTestCommand(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"policy.yaml":                  requireLabel,
		".kyverno-test/resources.yaml": twoPods,
		".kyverno-test/kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: t}
policies: [../policy.yaml]
resources: [resources.yaml]
results:
- policy: require-app-label
  rule: check-app
  kind: Pod
  resources: [good]
  result: pass
- policy: require-app-label
  rule: check-app
  kind: Pod
  resources: [bad, default/good]
  result: fail
`,
	})
	code, out, _ := run(t, "test", dir)
	if code != ExitFailed {
		t.Fatalf("exit %d, want 1:\n%s", code, out)
	}
	if !strings.Contains(out, "resource default/good: want fail, got pass") {
		t.Fatalf("failure line missing:\n%s", out)
	}
	if !strings.HasSuffix(out, "2 passed, 1 failed\n") {
		t.Fatalf("summary missing:\n%s", out)
	}
	code, out, _ = run(t, "test", dir, "--json")
	var sum TestSummary
	if err := json.Unmarshal([]byte(out), &sum); err != nil || sum.Passed != 2 || sum.Failed != 1 || code != ExitFailed {
		t.Fatalf("json: %v %+v", err, sum)
	}
}

func TestSplitDocuments(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 3000; i++ {
		b.WriteString("---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\ndata: {k: \"---\"}\n")
	}
	chunks := splitDocuments([]byte(b.String()))
	if len(chunks) < 2 {
		t.Fatalf("%d chunks", len(chunks))
	}
	total := 0
	for _, c := range chunks {
		total += len(c)
	}
	if total != b.Len() {
		t.Fatalf("chunks hold %d bytes of %d", total, b.Len())
	}
	dir := writeFiles(t, map[string]string{"cms.yaml": b.String()})
	objs, err := loadResources([]string{filepath.Join(dir, "cms.yaml")}, nil)
	if err != nil || len(objs) != 3000 {
		t.Fatalf("loaded %d, %v", len(objs), err)
	}
}

func TestTestCommandContextAndClone(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"policy.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: registries
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: allowed
      configMap: {name: registries, namespace: default}
    - name: podcount
      apiCall:
        urlPath: "/api/v1/namespaces/{{ request.object.metadata.namespace }}/pods"
        jmesPath: "items | length(@)"
    validate:
      message: "{{ podcount }} pods"
      deny:
        conditions:
          any:
          - key: "{{ images.containers.*.registry }}"
            operator: AnyNotIn
            value: "{{ allowed.data.list | split(@, ',') }}"
          - key: "{{ podcount }}"
            operator: GreaterThan
            value: 2
  - name: copy-secret
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate:
      apiVersion: v1
      kind: Secret
      name: regcred
      namespace: "{{ request.object.metadata.name }}"
      clone: {namespace: default, name: regcred}
`,
		".kyverno-test/resources.yaml": `apiVersion: v1
kind: ConfigMap
metadata: {name: registries, namespace: default}
data: {list: "ghcr.io,docker.io"}
---
apiVersion: v1
kind: Pod
metadata: {name: ok, namespace: default}
spec: {containers: [{name: c, image: ghcr.io/a/b:1}]}
---
apiVersion: v1
kind: Pod
metadata: {name: bad, namespace: default}
spec: {containers: [{name: c, image: quay.io/a/b:1}]}
---
apiVersion: v1
kind: Namespace
metadata: {name: team}
`,
		".kyverno-test/values.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Values
apiCallResponses:
- urlPath: /api/v1/namespaces/default/pods
  response: {items: [{}, {}]}
`,
		".kyverno-test/source.yaml":    "apiVersion: v1\nkind: Secret\nmetadata: {name: regcred, namespace: default}\ndata: {a: Yg==}\n",
		".kyverno-test/generated.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: regcred, namespace: team}\ndata: {a: Yg==}\n",
		".kyverno-test/kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: t}
policies: [../policy.yaml]
resources: [resources.yaml]
variables: values.yaml
results:
- {policy: p, rule: registries, kind: Pod, resources: [ok], result: pass}
- {policy: p, rule: registries, kind: Pod, resources: [bad], result: fail}
- {policy: p, rule: copy-secret, kind: Namespace, resources: [team], result: pass, generatedResource: generated.yaml, cloneSourceResource: source.yaml}
`,
	})
	code, out, _ := run(t, "test", dir)
	if code != ExitOK || !strings.HasSuffix(out, "3 passed, 0 failed\n") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
