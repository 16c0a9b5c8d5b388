package crds_test

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

var (
	clusterPolicies    = schema.GroupVersionResource{Group: "verdict.dev", Version: "v1", Resource: "clusterpolicies"}
	policies           = schema.GroupVersionResource{Group: "verdict.dev", Version: "v1", Resource: "policies"}
	policyExceptions   = schema.GroupVersionResource{Group: "verdict.dev", Version: "v1", Resource: "policyexceptions"}
	validatingPolicies = schema.GroupVersionResource{Group: "verdict.dev", Version: "v1", Resource: "validatingpolicies"}
)

// object reads a manifest written in YAML.
func object(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

// sameJSON compares two values as JSON (numbers read from the API and
// numbers decoded here have different Go types).
func sameJSON(t *testing.T, what string, got, want any) {
	t.Helper()
	g, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	w, err := json.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}
	if string(g) != string(w) {
		t.Errorf("%s:\n got %s\nwant %s", what, g, w)
	}
}

// TestE2ESchemas installs the CRDs in a real kube-apiserver (which refuses
// a schema that is not structural) and checks what the schemas promise:
// Kyverno's defaults are filled in, nothing a user wrote is pruned, typed
// fields are validated, Verdict's status round-trips unchanged, and the
// published OpenAPI describes the fields.
func TestE2ESchemas(t *testing.T) {
	cp := controlplane.StartForTest(t)
	cfg := cp.RESTConfig()
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)

	t.Run("defaults", func(t *testing.T) { testDefaults(t, dyn) })
	t.Run("unknown fields kept", func(t *testing.T) { testUnknownFieldsKept(t, dyn) })
	t.Run("typed fields validated", func(t *testing.T) { testValidated(t, dyn) })
	t.Run("status", func(t *testing.T) { testStatus(t, dyn) })
	t.Run("namespaced kinds", func(t *testing.T) { testNamespaced(t, kube, dyn) })
	t.Run("openapi", func(t *testing.T) { testOpenAPI(t, kube) })
	t.Run("kyverno corpus", func(t *testing.T) { testCorpus(t, kube, dyn) })
}

const defaulted = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: defaulted}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: cm
      apiCall: {urlPath: /api/v1/namespaces}
    validate: {pattern: {metadata: {name: "?*"}}}
`

func testDefaults(t *testing.T, dyn dynamic.Interface) {
	ctx := t.Context()
	if _, err := dyn.Resource(clusterPolicies).Create(ctx, object(t, defaulted), metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	got, err := dyn.Resource(clusterPolicies).Get(ctx, "defaulted", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := object(t, defaulted)
	spec := want.Object["spec"].(map[string]any)
	spec["admission"] = true
	spec["background"] = true
	spec["emitWarning"] = false
	spec["validationFailureAction"] = "Audit"
	rule := spec["rules"].([]any)[0].(map[string]any)
	rule["skipBackgroundRequests"] = true
	rule["validate"].(map[string]any)["allowExistingViolations"] = true
	rule["context"].([]any)[0].(map[string]any)["apiCall"].(map[string]any)["method"] = "GET"
	sameJSON(t, "spec read back", got.Object["spec"], spec)

	// What Verdict reads from it is what it read before the defaults.
	var p policy.Policy
	b, err := json.Marshal(got.Object)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &p); err != nil {
		t.Fatal(err)
	}
	if !p.Spec.AdmissionEnabled() || !p.Spec.BackgroundEnabled() {
		t.Errorf("admission %v background %v, want both on", p.Spec.AdmissionEnabled(), p.Spec.BackgroundEnabled())
	}
}

// kyvernoFuture is a policy with fields Verdict's types do not have, at
// every level, and nulls in untyped values.
const kyvernoFuture = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: future}
spec:
  admission: false
  background: false
  validationFailureAction: Enforce
  emitWarning: true
  futureSpecField: {a: [1, 2, {b: c}]}
  rules:
  - name: r
    skipBackgroundRequests: false
    futureRuleField: x
    match:
      any:
      - resources: {kinds: [Pod], futureFilter: {k: v}}
        futureMatchField: 1
    context:
    - name: call
      futureEntryField: true
      apiCall:
        method: POST
        urlPath: /apis/x
        data: [{key: k, value: null}]
    preconditions:
    - {key: "{{ request.operation }}", operator: AnyIn, value: [CREATE], futureConditionField: z}
    validate:
      allowExistingViolations: false
      message: m
      futureValidateField: {nested: {deeper: [true, null]}}
      pattern:
        spec:
          =(hostNetwork): "false"
          optional: null
      deny:
        conditions: {any: [{key: a, operator: Equals, value: null}], futureDeny: 1}
      foreach:
      - list: request.object.spec.containers
        futureForeachField: q
        foreach: [{list: x, pattern: {a: b}}]
`

func testUnknownFieldsKept(t *testing.T, dyn dynamic.Interface) {
	ctx := t.Context()
	in := object(t, kyvernoFuture)
	if _, err := dyn.Resource(clusterPolicies).Create(ctx, in, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create: %v", err)
	}
	got, err := dyn.Resource(clusterPolicies).Get(ctx, "future", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "spec read back (every field set, so no default applies)", got.Object["spec"], in.Object["spec"])
}

func testValidated(t *testing.T, dyn dynamic.Interface) {
	tests := map[string]string{
		"a boolean as a string": `{admission: "yes", rules: [{name: r, match: {}}]}`,
		"a rule without name":   `{rules: [{match: {}}]}`,
		"a list as an object":   `{rules: {name: r}}`,
		"kinds not a list":      `{rules: [{name: r, match: {any: [{resources: {kinds: Pod}}]}}]}`,
	}
	for name, spec := range tests {
		t.Run(name, func(t *testing.T) {
			u := object(t, "apiVersion: verdict.dev/v1\nkind: ClusterPolicy\nmetadata: {name: invalid}\nspec: "+spec+"\n")
			_, err := dyn.Resource(clusterPolicies).Create(t.Context(), u, metav1.CreateOptions{})
			if !apierrors.IsInvalid(err) {
				t.Errorf("create: %v, want invalid", err)
			}
		})
	}
}

// testStatus writes a status as Verdict's status writer does (the Go
// type) and reads it back unchanged: no default or requirement under
// status, which the writer compares with what it wants.
func testStatus(t *testing.T, dyn dynamic.Interface) {
	ctx := t.Context()
	u, err := dyn.Resource(clusterPolicies).Get(ctx, "defaulted", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	st := policy.Status{
		Ready: true,
		Conditions: []policy.StatusCondition{{Type: "Ready", Status: "True", Reason: "Succeeded",
			Message: "Ready", LastTransitionTime: time.Now().UTC().Format(time.RFC3339)}},
		RuleCount: policy.RuleCount{Validate: 1},
		Autogen: policy.AutogenStatus{Rules: []policy.Rule{{
			Name:       "autogen-r",
			Context:    []policy.ContextEntry{{Name: "c", APICall: &policy.APICall{URLPath: "/api"}}},
			Validation: &policy.Validation{Pattern: map[string]any{"a": "b"}},
		}}},
	}
	b, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	u.Object["status"] = want
	got, err := dyn.Resource(clusterPolicies).UpdateStatus(ctx, u, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update status: %v", err)
	}
	sameJSON(t, "status read back", got.Object["status"], want)

	// A status written in part (another writer's) is accepted too.
	got.Object["status"] = map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "False"}}}
	if _, err := dyn.Resource(clusterPolicies).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Errorf("partial status: %v", err)
	}
}

func testNamespaced(t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface) {
	ctx := t.Context()
	ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "crds-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pol := object(t, `apiVersion: verdict.dev/v1
kind: Policy
metadata: {name: local}
spec:
  background: false
  futureField: kept
  rules:
  - name: r
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    mutate: {patchStrategicMerge: {metadata: {labels: {+(team): a}}}, futureMutateField: [1]}
`)
	if _, err := dyn.Resource(policies).Namespace(ns.Name).Create(ctx, pol, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create Policy: %v", err)
	}
	got, err := dyn.Resource(policies).Namespace(ns.Name).Get(ctx, "local", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := pol.Object["spec"].(map[string]any)
	want["admission"], want["emitWarning"], want["validationFailureAction"] = true, false, "Audit"
	want["rules"].([]any)[0].(map[string]any)["skipBackgroundRequests"] = true
	sameJSON(t, "Policy spec read back", got.Object["spec"], want)

	ex := object(t, `apiVersion: verdict.dev/v1
kind: PolicyException
metadata: {name: except}
spec:
  futureField: {x: 1}
  exceptions: [{policyName: local, ruleNames: [r], futureEntry: y}]
  match: {any: [{resources: {kinds: [ConfigMap], names: [skip-*]}}]}
  conditions: [{key: a, operator: Equals, value: a}]
  podSecurity: [{controlName: Capabilities, images: [nginx*]}]
`)
	if _, err := dyn.Resource(policyExceptions).Namespace(ns.Name).Create(ctx, ex, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PolicyException: %v", err)
	}
	gotEx, err := dyn.Resource(policyExceptions).Namespace(ns.Name).Get(ctx, "except", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "PolicyException spec read back", gotEx.Object["spec"], ex.Object["spec"])

	// The kind also serves Kyverno's CEL PolicyException (policyRefs,
	// matchConditions): neither shape's fields are required by the
	// schema; the policy webhook checks each shape.
	celEx := object(t, "apiVersion: verdict.dev/v1\nkind: PolicyException\nmetadata: {name: cel}\nspec:\n  policyRefs: [{name: require-team, kind: ValidatingPolicy}]\n  matchConditions: [{name: n, expression: \"object.metadata.name == 'x'\"}]\n")
	if _, err := dyn.Resource(policyExceptions).Namespace(ns.Name).Create(ctx, celEx, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a CEL PolicyException: %v", err)
	}
	gotCEL, err := dyn.Resource(policyExceptions).Namespace(ns.Name).Get(ctx, "cel", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, "CEL PolicyException spec read back", gotCEL.Object["spec"], celEx.Object["spec"])
}

// testOpenAPI reads the group's OpenAPI v3 document, what kubectl explain
// and editors read.
func testOpenAPI(t *testing.T, kube kubernetes.Interface) {
	var doc struct {
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	// The apiserver publishes a CRD's OpenAPI shortly after it is
	// Established.
	deadline := time.Now().Add(30 * time.Second)
	for {
		raw, err := kube.Discovery().RESTClient().Get().AbsPath("/openapi/v3/apis/verdict.dev/v1").Do(t.Context()).Raw()
		if err == nil {
			err = json.Unmarshal(raw, &doc)
		}
		if err == nil && doc.Components.Schemas["dev.verdict.v1.ClusterPolicy"] != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ClusterPolicy in the OpenAPI v3 document of verdict.dev/v1: %v (schemas %d)", err, len(doc.Components.Schemas))
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, kind := range []string{"ClusterPolicy", "Policy"} {
		s := doc.Components.Schemas["dev.verdict.v1."+kind]
		validate := walk(t, s, "spec", "rules", "[]", "validate")
		if d, _ := validate["description"].(string); d == "" {
			t.Errorf("%s: spec.rules[].validate has no description", kind)
		}
		if _, ok := walk(t, validate, "foreach", "[]")["properties"].(map[string]any)["list"]; !ok {
			t.Errorf("%s: spec.rules[].validate.foreach[].list not described", kind)
		}
		if d := walk(t, s, "spec", "admission")["default"]; d != true {
			t.Errorf("%s: spec.admission default %v", kind, d)
		}
	}
	if d, _ := walk(t, doc.Components.Schemas["dev.verdict.v1.PolicyException"], "spec", "exceptions")["description"].(string); !strings.Contains(d, "exempt") {
		t.Errorf("PolicyException spec.exceptions description %q", d)
	}
}

// walk follows property names through an OpenAPI schema, "[]" for an
// array's items, looking through allOf wrappers.
func walk(t *testing.T, s map[string]any, path ...string) map[string]any {
	t.Helper()
	for _, p := range path {
		if all, ok := s["allOf"].([]any); ok && len(all) == 1 {
			if inner, ok := all[0].(map[string]any); ok && s["properties"] == nil {
				s = inner
			}
		}
		var next any
		if p == "[]" {
			next = s["items"]
		} else if props, ok := s["properties"].(map[string]any); ok {
			next = props[p]
		}
		n, ok := next.(map[string]any)
		if !ok {
			t.Fatalf("%v: no %q in %v", path, p, keys(s))
		}
		s = n
	}
	return s
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// corpusDir holds the kyverno/policies library, shared beside the
// repository checkout (see internal/cli's conformance test).
const corpusDir = "../../../shared/conformance/kyverno-policies"

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// testCorpus creates (dry run) every classic policy, ValidatingPolicy
// and exception of the kyverno/policies library and the demo's samples as verdict.dev/v1
// objects: none is refused, and everything each says is read back (the
// API server's defaults may add fields, never remove one).
func testCorpus(t *testing.T, kube kubernetes.Interface, dyn dynamic.Interface) {
	roots := []string{"../samples"}
	if _, err := os.Stat(corpusDir); err == nil {
		roots = append(roots, corpusDir)
	} else {
		t.Logf("no corpus at %s: samples only", corpusDir)
	}
	ns, err := kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "corpus-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	resources := map[string]schema.GroupVersionResource{"ClusterPolicy": clusterPolicies, "Policy": policies, "PolicyException": policyExceptions,
		"ValidatingPolicy": validatingPolicies}
	n := 0
	for _, root := range roots {
		err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && strings.HasPrefix(d.Name(), ".") && path != root {
				return filepath.SkipDir // chainsaw asserts and CLI tests: fragments, not policies
			}
			if d.IsDir() || !strings.HasSuffix(path, ".yaml") {
				return nil
			}
			raw, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, part := range docSeparator.Split(string(raw), -1) {
				u := &unstructured.Unstructured{}
				if yaml.Unmarshal([]byte(part), &u.Object) != nil || u.Object == nil {
					continue // not a manifest (a values file, a fragment)
				}
				gvr, ok := resources[u.GetKind()]
				if _, hasSpec := u.Object["spec"]; !ok || !hasSpec ||
					!strings.HasPrefix(u.GetAPIVersion(), "kyverno.io/") && !strings.HasPrefix(u.GetAPIVersion(), "policies.kyverno.io/") && u.GetAPIVersion() != "verdict.dev/v1" {
					continue
				}
				n++
				u.SetAPIVersion("verdict.dev/v1")
				u.SetName(fmt.Sprintf("corpus-%d", n))
				u.SetNamespace("")
				r := dyn.Resource(gvr)
				var got *unstructured.Unstructured
				var err error
				if gvr == clusterPolicies || gvr == validatingPolicies {
					got, err = r.Create(t.Context(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				} else {
					got, err = r.Namespace(ns.Name).Create(t.Context(), u, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
				}
				if err != nil {
					t.Errorf("%s #%d (%s): %v", path, i, u.GetKind(), err)
					continue
				}
				if lost := missing(got.Object["spec"], u.Object["spec"], "spec"); len(lost) > 0 {
					t.Errorf("%s #%d (%s): lost %v", path, i, u.GetKind(), lost)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("%d policies and exceptions created (dry run)", n)
}

// missing lists the paths of want that got does not hold with the same
// value.
func missing(got, want any, path string) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{path}
		}
		var out []string
		for k, v := range w {
			out = append(out, missing(g[k], v, path+"."+k)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{path}
		}
		var out []string
		for i := range w {
			out = append(out, missing(g[i], w[i], fmt.Sprintf("%s[%d]", path, i))...)
		}
		return out
	}
	gb, _ := json.Marshal(got)
	wb, _ := json.Marshal(want)
	if string(gb) != string(wb) {
		return []string{path}
	}
	return nil
}
