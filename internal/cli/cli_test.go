package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine/document"
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

// TestInterrupted runs the commands under a context that has ended (an
// interrupt): no result is reported as the policies' verdict.
func TestInterrupted(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"policy.yaml": requireLabel,
		"pods.yaml":   twoPods,
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: t}
policies: [policy.yaml]
resources: [pods.yaml]
results:
- {policy: require-app-label, rule: check-app, kind: Pod, resources: [good], result: pass}
`,
	})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	tests := map[string][]string{
		"apply": {"apply", "-p", filepath.Join(dir, "policy.yaml"), "-r", filepath.Join(dir, "pods.yaml")},
		"test":  {"test", dir},
	}
	for name, args := range tests {
		t.Run(name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := Main(ctx, args, strings.NewReader(""), &out, &errOut)
			if code != ExitUsage || !strings.Contains(errOut.String(), context.Canceled.Error()) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errOut.String(), ExitUsage, context.Canceled)
			}
			if strings.Contains(out.String(), "pass:") || strings.Contains(out.String(), "passed") {
				t.Fatalf("results written after the interrupt:\n%s", out.String())
			}
		})
	}
}

func TestApplyPassExitsZero(t *testing.T) {
	dir := writeFiles(t, map[string]string{"p/policy.yaml": requireLabel, "r/pod.yaml": strings.Split(twoPods, "---")[0]})
	code, out, _ := run(t, "apply", "-p", filepath.Join(dir, "p"), "-r", filepath.Join(dir, "r"))
	if code != ExitOK || !strings.Contains(out, "pass: 1, fail: 0") {
		t.Fatalf("exit %d:\n%s", code, out)
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

// TestApplyStreamsResources reads a file of many documents (with "---"
// inside a value) and a List, one document at a time.
func TestApplyStreamsResources(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 3000; i++ {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm-%d}\ndata: {k: \"---\"}\n", i)
	}
	b.WriteString("---\napiVersion: v1\nkind: List\nitems:\n- {apiVersion: v1, kind: ConfigMap, metadata: {name: in-list}}\n")
	dir := writeFiles(t, map[string]string{"cms.yaml": b.String()})
	src := resourceSource{paths: []string{filepath.Join(dir, "cms.yaml")}, maxDocumentBytes: DefaultMaxDocumentBytes}
	if err := src.check(); err != nil {
		t.Fatal(err)
	}
	var names []string
	ends := 0
	err := src.pieces(func(p resourcePiece) error {
		if p.end {
			ends++
			return nil
		}
		objs, err := p.resources()
		if err != nil {
			return err
		}
		for _, obj := range objs {
			names = append(names, document.String(obj, "metadata", "name"))
			if document.String(obj, "metadata", "namespace") != "default" {
				t.Errorf("%s has no default namespace", names[len(names)-1])
			}
		}
		return nil
	})
	if ends != 1 {
		t.Errorf("%d ends of path for one path", ends)
	}
	if err != nil || len(names) != 3001 || names[0] != "cm-0" || names[2999] != "cm-2999" || names[3000] != "in-list" {
		t.Fatalf("read %d resources (%v), %v", len(names), err, names[len(names)-1])
	}
}

// TestApplyOutputsInInputOrder checks that results come in input order
// although resources are evaluated on several cores.
func TestApplyOutputsInInputOrder(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 500; i++ {
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: p%03d}\nspec: {containers: [{name: c, image: nginx}]}\n", i)
	}
	dir := writeFiles(t, map[string]string{"policy.yaml": requireLabel, "pods.yaml": b.String()})
	code, out, _ := run(t, "apply", "-p", filepath.Join(dir, "policy.yaml"), "-r", filepath.Join(dir, "pods.yaml"), "-o", "json")
	var doc struct {
		Results []applyResult `json:"results"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil || code != ExitFailed || len(doc.Results) != 500 {
		t.Fatalf("exit %d, %d results, %v", code, len(doc.Results), err)
	}
	for i, r := range doc.Results {
		if want := fmt.Sprintf("p%03d", i); r.Name != want {
			t.Fatalf("result %d is for %s, want %s", i, r.Name, want)
		}
	}
}

// TestApplyExitCodes pins `verdict apply`'s exit codes: 0 when nothing
// failed, 1 when a rule failed or ended in error (as kyverno apply), 2 on
// bad input, including paths that yield nothing.
func TestApplyExitCodes(t *testing.T) {
	badRegex := strings.Replace(requireLabel, `pattern: {metadata: {labels: {app: "?*"}}}`,
		`deny: {conditions: {any: [{key: "{{ regex_match('([a-z', request.object.metadata.name) }}", operator: Equals, value: true}]}}`, 1)
	stringPattern := strings.Replace(requireLabel, `pattern: {metadata: {labels: {app: "?*"}}}`, `pattern: "foo"`, 1)
	good := strings.Split(twoPods, "---")[0]
	huge := "apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {app: web}}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata: {k: \"" + strings.Repeat("x", 64<<10) + "\"}\n"
	dir := writeFiles(t, map[string]string{
		"policy.yaml":         requireLabel,
		"bad-regex.yaml":      badRegex,
		"string-pattern.yaml": stringPattern,
		"exception.yaml":      "apiVersion: kyverno.io/v2\nkind: PolicyException\nmetadata: {name: e, namespace: default}\nspec:\n  exceptions: [{policyName: require-app-label, ruleNames: [check-app]}]\n  match: {any: [{resources: {kinds: [Pod], names: [bad]}}]}\n",
		"pods.yaml":           twoPods,
		"good.yaml":           good,
		"empty.yaml":          "",
		"comments.yaml":       "# nothing yet\n---\n",
		"only-policy.yaml":    requireLabel,
		"huge.yaml":           huge,
		"no-manifests/README": "not a manifest",
		"no-policies.yaml":    good,
	})
	path := func(name string) string { return filepath.Join(dir, name) }
	tests := map[string]struct {
		args   []string
		code   int
		stderr string
	}{
		"all pass":                        {args: []string{"-p", path("policy.yaml"), "-r", path("good.yaml")}, code: ExitOK},
		"a rule fails":                    {args: []string{"-p", path("policy.yaml"), "-r", path("pods.yaml")}, code: ExitFailed},
		"a rule ends in error":            {args: []string{"-p", path("bad-regex.yaml"), "-r", path("good.yaml")}, code: ExitFailed, stderr: "1 rule result is an error"},
		"an exception turns fail to skip": {args: []string{"-p", path("policy.yaml"), "-p", path("exception.yaml"), "-r", path("pods.yaml")}, code: ExitOK},
		"empty resource file":             {args: []string{"-p", path("policy.yaml"), "-r", path("empty.yaml")}, code: ExitUsage, stderr: "no resources in " + path("empty.yaml")},
		"comment-only resource file":      {args: []string{"-p", path("policy.yaml"), "-r", path("comments.yaml")}, code: ExitUsage, stderr: "no resources in " + path("comments.yaml")},
		"one empty path among good ones":  {args: []string{"-p", path("policy.yaml"), "-r", path("good.yaml"), "-r", path("empty.yaml")}, code: ExitUsage, stderr: "no resources in " + path("empty.yaml")},
		"resource file of policies":       {args: []string{"-p", path("policy.yaml"), "-r", path("only-policy.yaml")}, code: ExitUsage, stderr: "its documents are empty or hold only policies"},
		"resource folder without manifests": {
			args: []string{"-p", path("policy.yaml"), "-r", path("no-manifests")}, code: ExitUsage,
			stderr: "no resources in " + path("no-manifests") + ": it holds no .yaml, .yml or .json file",
		},
		"missing resource path":          {args: []string{"-p", path("policy.yaml"), "-r", path("nope.yaml")}, code: ExitUsage, stderr: "nope.yaml"},
		"empty policy file":              {args: []string{"-p", path("empty.yaml"), "-r", path("good.yaml")}, code: ExitUsage, stderr: "no policies in " + path("empty.yaml")},
		"policy folder without policies": {args: []string{"-p", path("no-manifests"), "-r", path("good.yaml")}, code: ExitUsage, stderr: "no YAML or JSON files found in " + path("no-manifests")},
		"policy path of resources":       {args: []string{"-p", path("no-policies.yaml"), "-r", path("good.yaml")}, code: ExitUsage, stderr: "no policies in " + path("no-policies.yaml")},
		"only an exception":              {args: []string{"-p", path("exception.yaml"), "-r", path("good.yaml")}, code: ExitUsage, stderr: "no policies to apply in " + path("exception.yaml")},
		"string pattern is refused":      {args: []string{"-p", path("string-pattern.yaml"), "-r", path("good.yaml")}, code: ExitUsage, stderr: `spec.rules[0].validate.pattern: must be an object`},
		"document over the size limit":   {args: []string{"-p", path("policy.yaml"), "-r", path("huge.yaml"), "--max-document-bytes", "32768"}, code: ExitUsage, stderr: path("huge.yaml") + ": document 2: document too large: over 32768 bytes"},
		"document under a raised limit":  {args: []string{"-p", path("policy.yaml"), "-r", path("huge.yaml"), "--max-document-bytes", "1048576"}, code: ExitOK},
		"bad size limit":                 {args: []string{"-p", path("policy.yaml"), "-r", path("good.yaml"), "--max-document-bytes", "-1"}, code: ExitUsage, stderr: "--max-document-bytes must be positive"},
		"unknown output":                 {args: []string{"-p", path("policy.yaml"), "-r", path("good.yaml"), "-o", "xml"}, code: ExitUsage, stderr: `unknown output "xml"`},
		"missing flags":                  {args: []string{"-p", path("policy.yaml")}, code: ExitUsage, stderr: "resources are required: --resource (-r) files, or --cluster"},
		"no policies":                    {args: []string{"-r", path("good.yaml")}, code: ExitUsage, stderr: "policies (as arguments or with --policy) are required"},
		"a namespace without a cluster":  {args: []string{"-p", path("policy.yaml"), "-r", path("good.yaml"), "-n", "default"}, code: ExitUsage, stderr: "--namespace selects the cluster's resources: give --cluster too"},
		"a policy URL": {
			args: []string{"https://github.com/kyverno/policies/pod-security", "-r", path("good.yaml")}, code: ExitUsage,
			stderr: "verdict reads files and folders, not URLs: download the file (curl -LO <url>) or clone the repository",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := run(t, append([]string{"apply"}, tc.args...)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errOut)
			}
			if !strings.Contains(errOut, tc.stderr) {
				t.Fatalf("stderr %q does not contain %q", errOut, tc.stderr)
			}
		})
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

// TestOneLine checks the fast path of oneLine against folding the fields.
func TestOneLine(t *testing.T) {
	for _, s := range []string{"", "a", "a b", " a", "a ", "a  b", "a\tb", "a\nb", "a\u00a0b", "é b", "x\r", "one two three"} {
		if got, want := oneLine(s), strings.Join(strings.Fields(s), " "); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", s, got, want)
		}
	}
}

// TestWithValues: values below request.object or request.oldObject are
// written into a copy of the resource, as the reference CLI reads the
// request's objects back from the context after setting the values.
func TestWithValues(t *testing.T) {
	obj := map[string]any{"kind": "Role", "metadata": map[string]any{"name": "r"}}
	vals := map[string]any{
		`request.object.metadata.annotations."example.com/team"`: "platform",
		"request.oldObject.metadata.labels.old":                  "yes",
		"request.operation":                                      "UPDATE",
		"other":                                                  1,
	}
	got := withValues(obj, vals, "object")
	if document.String(got, "metadata", "annotations", "example.com/team") != "platform" || document.String(got, "metadata", "labels", "old") != "" {
		t.Fatalf("object: %v", got)
	}
	if _, ok := obj["metadata"].(map[string]any)["annotations"]; ok {
		t.Fatal("the resource itself was changed")
	}
	if old := withValues(obj, vals, "oldObject"); document.String(old, "metadata", "labels", "old") != "yes" {
		t.Fatalf("oldObject: %v", old)
	}
	if same := withValues(obj, map[string]any{"request.operation": "CREATE"}, "object"); document.String(same, "metadata", "name") != "r" {
		t.Fatalf("no values below request.object: %v", same)
	}
}

// verdict apply evaluates DeletingPolicies as a tick would: a resource
// whose conditions all hold would be deleted (pass), one selected but
// kept fails with the condition's name, one not selected has no result.
func TestApplyDeletingPolicy(t *testing.T) {
	dpol := `apiVersion: policies.kyverno.io/v1
kind: DeletingPolicy
metadata: {name: old-pods}
spec:
  schedule: "*/5 * * * *"
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], resources: [pods]}]
  conditions:
  - name: expired
    expression: "has(object.metadata.labels) && object.metadata.labels.?expired.orValue('') == 'true'"
`
	res := `apiVersion: v1
kind: Pod
metadata: {name: gone, namespace: a, labels: {expired: "true"}}
---
apiVersion: v1
kind: Pod
metadata: {name: kept, namespace: a}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other, namespace: a, labels: {expired: "true"}}
`
	dir := writeFiles(t, map[string]string{"dpol.yaml": dpol, "res.yaml": res})
	code, out, errOut := run(t, "apply", "-p", filepath.Join(dir, "dpol.yaml"), "-r", filepath.Join(dir, "res.yaml"), "--detailed")
	if code != ExitFailed {
		t.Fatalf("exit %d, want %d:\n%s%s", code, ExitFailed, out, errOut)
	}
	for _, want := range []string{
		"Pod/a/gone  pass    resource matched: it would be deleted",
		`Pod/a/kept  fail    condition "expired" is false`,
		"pass: 1, fail: 1, warn: 0, error: 0, skip: 0",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "ConfigMap/a/other") {
		t.Errorf("a resource the policy does not select has a result:\n%s", out)
	}
}
