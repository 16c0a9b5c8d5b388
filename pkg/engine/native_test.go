package engine_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// scopedLister serves params: ConfigMaps are namespaced, Nodes not.
type scopedLister struct{ memLister }

func (scopedLister) Namespaced(_ context.Context, _, kind string) (bool, error) {
	return kind != "Node" && kind != "Namespace", nil
}

// compileNativeDocs compiles the policies of y with their bindings.
func compileNativeDocs(t *testing.T, eng *engine.Engine, y string) (*engine.Policy, error) {
	t.Helper()
	docs, err := policy.Parse([]byte(y), "test")
	if err != nil {
		return nil, err
	}
	docs.Bind()
	if len(docs.Policies) != 1 {
		t.Fatalf("want one policy, got %d", len(docs.Policies))
	}
	return eng.Compile(docs.Policies[0])
}

func mustNative(t *testing.T, eng *engine.Engine, y string) *engine.Policy {
	t.Helper()
	p, err := compileNativeDocs(t, eng, y)
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return p
}

const replicasVAP = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: max-replicas}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  matchConditions:
  - {name: not-frozen, expression: "!has(object.metadata.labels) || !('frozen' in object.metadata.labels)"}
  variables:
  - {name: replicas, expression: "object.spec.replicas"}
  validations:
  - expression: "variables.replicas <= int(params.data.max)"
    messageExpression: "'replicas ' + string(variables.replicas) + ' over ' + params.data.max"
`

func deployment(t *testing.T, ns string, replicas int, labels string) map[string]any {
	return obj(t, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web, namespace: `+ns+`, labels: {`+labels+`}}, spec: {replicas: `+strconv.Itoa(replicas)+`}}`)
}

// A ValidatingAdmissionPolicy is evaluated as the API server evaluates
// it: its matchConstraints, each binding's matchResources, the binding's
// params (by name in the request's namespace or paramRef's, or by
// selector, each evaluated), matchConditions, variables and
// messageExpression; validationActions decide whether a failure denies.
func TestValidatingAdmissionPolicy(t *testing.T) {
	params := scopedLister{memLister{
		obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: limits, namespace: team-a, labels: {tier: gold}}, data: {max: "3"}}`),
		obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: limits, namespace: team-b, labels: {tier: gold}}, data: {max: "5"}}`),
		obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: strict, namespace: team-b, labels: {tier: gold}}, data: {max: "1"}}`),
		obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: limits, namespace: shared}, data: {max: "4"}}`),
	}}
	eng := newEngine(t, engine.WithResourceLister(params))
	cases := []struct {
		name     string
		bindings string
		obj      map[string]any
		nsLabels map[string]string
		want     engine.Status // "" for no result
		message  string
		enforce  bool
	}{
		{"params in the request's namespace, pass", `paramRef: {name: limits}
  validationActions: [Deny]`, deployment(t, "team-a", 3, ""), nil, engine.StatusPass, "", true},
		{"params in the request's namespace, fail", `paramRef: {name: limits}
  validationActions: [Deny]`, deployment(t, "team-a", 4, ""), nil, engine.StatusFail, "replicas 4 over 3", true},
		{"params in another namespace", `paramRef: {name: limits, namespace: shared}
  validationActions: [Deny]`, deployment(t, "team-a", 4, ""), nil, engine.StatusPass, "", true},
		{"audit only", `paramRef: {name: limits}
  validationActions: [Audit, Warn]`, deployment(t, "team-a", 4, ""), nil, engine.StatusFail, "replicas 4 over 3", false},
		{"every params object of a selector", `paramRef: {selector: {matchLabels: {tier: gold}}}
  validationActions: [Deny]`, deployment(t, "team-b", 2, ""), nil, engine.StatusFail, "replicas 2 over 1", true},
		{"no params: allowed", `paramRef: {name: missing}
  validationActions: [Deny]`, deployment(t, "team-a", 9, ""), nil, "", "", false},
		{"no params: denied", `paramRef: {name: missing, parameterNotFoundAction: Deny}
  validationActions: [Deny]`, deployment(t, "team-a", 1, ""), nil, engine.StatusError, "failed to configure binding max-replicas-binding: no params found for policy binding with `Deny` parameterNotFoundAction", false},
		{"matchConditions leave it out", `paramRef: {name: limits}
  validationActions: [Deny]`, deployment(t, "team-a", 9, "frozen: x"), nil, engine.StatusSkip, "match conditions aren't met", true},
		{"binding's object selector leaves it out", `paramRef: {name: limits}
  validationActions: [Deny]
  matchResources: {objectSelector: {matchLabels: {app: web}}}`, deployment(t, "team-a", 9, ""), nil, "", "", false},
		{"binding's namespace selector", `paramRef: {name: limits}
  validationActions: [Deny]
  matchResources: {namespaceSelector: {matchLabels: {env: prod}}}`, deployment(t, "team-a", 9, ""), map[string]string{"env": "prod"}, engine.StatusFail, "replicas 9 over 3", true},
		{"binding's namespace selector leaves it out", `paramRef: {name: limits}
  validationActions: [Deny]
  matchResources: {namespaceSelector: {matchLabels: {env: prod}}}`, deployment(t, "team-a", 9, ""), map[string]string{"env": "dev"}, "", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := mustNative(t, eng, replicasVAP+`---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-replicas-binding}
spec:
  policyName: max-replicas
  `+c.bindings+"\n")
			got := statuses(t, eng, p, &engine.Request{Operation: "CREATE", Object: c.obj, NamespaceLabels: c.nsLabels})
			rr, ok := got["max-replicas"]
			if c.want == "" {
				if ok || len(got) != 0 {
					t.Fatalf("results %+v; want none", got)
				}
				return
			}
			if !ok || rr.Status != c.want || rr.Message != c.message || rr.Enforce != c.enforce || rr.Type != engine.TypeValidation {
				t.Fatalf("result %+v (all %v); want %s %q enforce=%v", rr, got, c.want, c.message, c.enforce)
			}
		})
	}

	// Another resource than matchConstraints select: no result.
	p := mustNative(t, eng, replicasVAP)
	cm := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: x, namespace: team-a}}`)
	if got := statuses(t, eng, p, &engine.Request{Operation: "CREATE", Object: cm}); len(got) != 0 {
		t.Fatalf("results %+v on a ConfigMap; want none", got)
	}
	// DELETE is not among the operations.
	if got := statuses(t, eng, p, &engine.Request{Operation: "DELETE", OldObject: deployment(t, "team-a", 9, "")}); len(got) != 0 {
		t.Fatalf("results %+v on a DELETE; want none", got)
	}
}

// The request's fields are the API server's: oldObject on an UPDATE,
// request.userInfo, namespaceObject.
func TestValidatingAdmissionPolicyRequest(t *testing.T) {
	eng := newEngine(t)
	p := mustNative(t, eng, `apiVersion: admissionregistration.k8s.io/v1beta1
kind: ValidatingAdmissionPolicy
metadata: {name: no-scale-down}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [UPDATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicas >= oldObject.spec.replicas || request.userInfo.username == 'admin'"
    message: scaling down is for admins
  - expression: "namespaceObject.metadata.name == object.metadata.namespace"
`)
	old := deployment(t, "team-a", 3, "")
	cases := []struct {
		user string
		n    int
		want engine.Status
	}{{"dev", 4, engine.StatusPass}, {"dev", 2, engine.StatusFail}, {"admin", 2, engine.StatusPass}}
	for _, c := range cases {
		got := statuses(t, eng, p, &engine.Request{Operation: "UPDATE", Object: deployment(t, "team-a", c.n, ""), OldObject: old, UserInfo: engine.UserInfo{Username: c.user}})
		if rr := got["no-scale-down"]; rr.Status != c.want {
			t.Errorf("%s to %d: %+v; want %s", c.user, c.n, rr, c.want)
		}
	}
	if got := statuses(t, eng, p, &engine.Request{Operation: "UPDATE", Object: deployment(t, "team-a", 1, ""), OldObject: old, UserInfo: engine.UserInfo{Username: "dev"}}); got["no-scale-down"].Message != "scaling down is for admins" {
		t.Errorf("message %q; want the validation's", got["no-scale-down"].Message)
	}
}

// A policy is compiled in the API server's environment: an expression
// that does not compile, or calls one of Kyverno's functions (which the
// API server lacks), is an error naming the field; so is an invalid
// document.
func TestValidatingAdmissionPolicyInvalid(t *testing.T) {
	eng := newEngine(t)
	head := `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: bad}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
`
	cases := map[string]string{
		"spec.validations":  head + "  validations: [{expression: \"object.spec.containers.size( > 1\"}]\n",
		"undeclared":        head + "  validations: [{expression: \"hash.sha256('x') != ''\"}]\n",
		"spec.variables[0]": head + "  variables: [{name: v, expression: \"object.(\"}]\n  validations: [{expression: \"true\"}]\n",
		"params":            head + "  validations: [{expression: \"params.x == 1\"}]\n",
	}
	for want, y := range cases {
		_, err := compileNativeDocs(t, eng, y)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v; want it to name %q", err, want)
		}
	}
	if _, err := policy.Parse([]byte(head), "f.yaml"); err == nil || !strings.Contains(err.Error(), "spec.validations: one validation or audit annotation is required") {
		t.Errorf("error %v; want the missing validations named", err)
	}
	if _, err := policy.Parse([]byte(head+"  validations: [{expression: \"true\"}]\n  unknownField: 1\n"), "f.yaml"); err == nil || !strings.Contains(err.Error(), "unknownField") {
		t.Errorf("error %v; want the unknown field named", err)
	}
	if _, err := policy.Parse([]byte(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b}
spec: {policyName: bad, validationActions: [Reject]}
`), "f.yaml"); err == nil || !strings.Contains(err.Error(), `"Reject" is not Deny, Warn or Audit`) {
		t.Errorf("error %v; want the action named", err)
	}
}

// An expression that would run past the API server's cost budget is
// stopped: an error, never a stalled evaluation.
func TestValidatingAdmissionPolicyBounded(t *testing.T) {
	eng := newEngine(t)
	p := mustNative(t, eng, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: costly}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  validations:
  - expression: "object.data.all(k, object.data.all(k2, object.data.all(k3, object.data[k] + object.data[k2] + object.data[k3] != 'x')))"
`)
	data := map[string]any{}
	for i := range 400 {
		data[strings.Repeat("k", 1+i%40)+strconv.Itoa(i%100)+string(rune('a'+i/100))] = strings.Repeat("v", 64)
	}
	cm := map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "big", "namespace": "default"}, "data": data}
	rr := statuses(t, eng, p, &engine.Request{Operation: "CREATE", Object: cm})["costly"]
	if rr.Status != engine.StatusError || !strings.Contains(rr.Message, "cost") {
		t.Fatalf("result %+v; want an error about the cost budget", rr)
	}
}

const labelMAP = `apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicy
metadata: {name: defaults}
spec:
  paramKind: {apiVersion: v1, kind: ConfigMap}
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  matchConditions:
  - {name: unlabelled, expression: "!has(object.metadata.labels) || !('skip' in object.metadata.labels)"}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{spec: Object.spec{replicas: int(params.data.replicas)}}"
  - patchType: JSONPatch
    jsonPatch:
      expression: "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {'team': params.metadata.namespace}}]"
---
apiVersion: admissionregistration.k8s.io/v1alpha1
kind: MutatingAdmissionPolicyBinding
metadata: {name: defaults-binding}
spec:
  policyName: defaults
  paramRef: {name: defaults}
`

// A MutatingAdmissionPolicy applies its mutations in order, each on the
// result of the one before (ApplyConfiguration merged with the API
// server's structured merge, JSONPatch), with its params; in a
// background evaluation a mutation the resource lacks is a failure.
func TestMutatingAdmissionPolicy(t *testing.T) {
	params := scopedLister{memLister{
		obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: defaults, namespace: team-a}, data: {replicas: "3"}}`),
	}}
	eng := newEngine(t, engine.WithResourceLister(params))
	p := mustNative(t, eng, labelMAP)
	resps, patched := eng.Apply(t.Context(), &engine.Request{Operation: "CREATE", Object: deployment(t, "team-a", 1, "")}, &engine.Set{Policies: []*engine.Policy{p}})
	if len(resps) != 1 || len(resps[0].Rules) != 1 || resps[0].Rules[0].Status != engine.StatusPass || resps[0].Rules[0].Type != engine.TypeMutation {
		t.Fatalf("responses %+v; want one passing mutation", resps)
	}
	if v, _ := document.Get(patched, "spec", "replicas"); v != float64(3) {
		t.Fatalf("patched %v; want replicas 3", patched)
	}
	if a := document.String(patched, "metadata", "annotations", "team"); a != "team-a" {
		t.Fatalf("patched %v; want the annotation from the params", patched)
	}
	// matchConditions: no mutation.
	got := statuses(t, eng, p, &engine.Request{Operation: "CREATE", Object: deployment(t, "team-a", 1, "skip: x")})
	if rr := got["defaults"]; rr.Status != engine.StatusSkip || rr.Message != "match conditions aren't met" {
		t.Fatalf("result %+v; want skip", rr)
	}
	// Background: the stored resource lacks the mutation, then has it.
	got = statuses(t, eng, p, &engine.Request{Object: deployment(t, "team-a", 1, "")})
	if rr := got["defaults"]; rr.Status != engine.StatusFail || rr.Message != "mutation is not applied" {
		t.Fatalf("background result %+v; want fail", rr)
	}
	got = statuses(t, eng, p, &engine.Request{Object: patched})
	if rr := got["defaults"]; rr.Status != engine.StatusPass {
		t.Fatalf("background result on the mutated resource %+v; want pass", rr)
	}
	// An object read from the API has int64 numbers: holding the
	// mutation, it passes all the same.
	fromAPI := document.DeepCopyMap(patched)
	fromAPI["spec"].(map[string]any)["replicas"] = int64(3)
	if rr := eng.Check(t.Context(), &engine.Request{Object: fromAPI}, p, nil).Rules; len(rr) != 1 || rr[0].Status != engine.StatusPass {
		t.Fatalf("Check of the mutated resource as the API gives it: %+v; want pass", rr)
	}
	// Check, a background scan's evaluation, reports the same.
	if rr := eng.Check(t.Context(), &engine.Request{Object: deployment(t, "team-a", 1, "")}, p, nil).Rules; len(rr) != 1 || rr[0].Status != engine.StatusFail || rr[0].Message != "mutation is not applied" {
		t.Fatalf("Check: %+v; want the mutation reported not applied", rr)
	}
	if !p.HasChecks() || p.ChecksKind("apps", "v1", "Deployment") != engine.KindNamed || p.ChecksKind("", "v1", "Pod") != engine.KindNotSelected {
		t.Fatal("a MutatingAdmissionPolicy is scanned on the kinds its matchConstraints name")
	}
	// No params in the namespace: the binding does not apply.
	if got := statuses(t, eng, p, &engine.Request{Operation: "CREATE", Object: deployment(t, "team-b", 1, "")}); len(got) != 0 {
		t.Fatalf("results %+v without params; want none", got)
	}
}
