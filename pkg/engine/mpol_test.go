package engine_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

const mpolYAML = `apiVersion: policies.kyverno.io/v1beta1
kind: MutatingPolicy
metadata: {name: mp}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [pods]
  matchConditions:
  - name: not-system
    expression: "object.metadata.namespace != 'kube-system'"
  variables:
  - name: team
    expression: "has(object.metadata.labels) && 'team' in object.metadata.labels ? object.metadata.labels.team : 'none'"
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"owner": variables.team}},
          spec: Object.spec{containers: object.spec.containers.map(c,
            Object.spec.containers{name: c.name, imagePullPolicy: "Always"})}}
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        [JSONPatch{op: "add", path: "/metadata/annotations",
          value: {"containers": string(size(object.spec.containers)), "owner": string(object.metadata.labels.owner)}}]
`

func mpolApply(t *testing.T, eng *engine.Engine, p *engine.Policy, req *engine.Request) (engine.RuleResponse, map[string]any, bool) {
	t.Helper()
	resps, patched := eng.Apply(t.Context(), req, &engine.Set{Policies: []*engine.Policy{p}})
	for _, r := range resps {
		if len(r.Rules) > 0 {
			return r.Rules[0], patched, true
		}
	}
	return engine.RuleResponse{}, patched, false
}

func TestMutatingPolicy(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, mpolYAML)
	pod := `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {team: blue}}, spec: {containers: [{name: c, image: nginx}, {name: d, image: redis, imagePullPolicy: Never}]}}`
	in := obj(t, pod)
	rr, patched, ok := mpolApply(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: in})
	if !ok || rr.Status != engine.StatusPass || rr.Message != "success" || rr.Type != engine.TypeMutation {
		t.Fatalf("%v %s %s %q", ok, rr.Type, rr.Status, rr.Message)
	}
	// The apply configuration merged the label and each container by
	// name; the JSON patch, applied next, read its result.
	want := obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {team: blue, owner: blue},
	  annotations: {containers: "2", owner: blue}},
	  spec: {containers: [{name: c, image: nginx, imagePullPolicy: Always}, {name: d, image: redis, imagePullPolicy: Always}]}}`)
	if !document.Equal(patched, want) {
		t.Fatalf("patched:\n%v\nwant\n%v", patched, want)
	}
	if !document.Equal(in, obj(t, pod)) {
		t.Fatal("the request's object was modified")
	}

	// A false match condition skips; an error is an error and leaves
	// the resource as it was.
	system := obj(t, strings.Replace(pod, "namespace: x", "namespace: kube-system", 1))
	if rr, patched, _ := mpolApply(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: system}); rr.Status != engine.StatusSkip || !document.Equal(patched, system) {
		t.Fatalf("kube-system: %s %q", rr.Status, rr.Message)
	}
	// The JSON patch adds under a path whose parent does not exist.
	bad := compile(t, eng, strings.Replace(mpolYAML, `path: "/metadata/annotations"`, `path: "/metadata/annotations/x"`, 1))
	rr, patched, _ = mpolApply(t, eng, bad, &engine.Request{Operation: engine.OpCreate, Object: obj(t, pod)})
	if rr.Status != engine.StatusError || rr.Name != "evaluation" || !strings.HasPrefix(rr.Message, "failed to evaluate policy: JSON Patch: ") || !document.Equal(patched, obj(t, pod)) {
		t.Fatalf("bad patch: %q %s %q", rr.Name, rr.Status, rr.Message)
	}
	// Not selected: another operation.
	if _, _, ok := mpolApply(t, eng, p, &engine.Request{Operation: engine.OpUpdate, Object: obj(t, pod), OldObject: obj(t, pod)}); ok {
		t.Fatal("UPDATE is not selected, but the policy applied")
	}
}

// An apply configuration may not set an atomic list (as the API server
// refuses in a MutatingAdmissionPolicy), unless the policy asks for
// server-side apply, which replaces it.
func TestMutatingPolicyAtomic(t *testing.T) {
	eng := newEngine(t)
	y := `apiVersion: policies.kyverno.io/v1alpha1
kind: MutatingPolicy
metadata: {name: tolerate}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{spec: Object.spec{tolerations: [Object.spec.tolerations{key: "a", operator: "Exists"}]}}'
`
	pod := obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x}, spec: {containers: [{name: c, image: nginx}], tolerations: [{key: b, operator: Exists}]}}`)
	rr, _, _ := mpolApply(t, eng, compile(t, eng, y), &engine.Request{Operation: engine.OpCreate, Object: pod})
	if rr.Status != engine.StatusError || !strings.Contains(rr.Message, "may not mutate atomic arrays, maps or structs: .spec.tolerations") {
		t.Fatalf("%s %q", rr.Status, rr.Message)
	}
	ssa := compile(t, eng, strings.Replace(y, "spec:\n  matchConstraints", "spec:\n  evaluation: {useServerSideApply: true}\n  matchConstraints", 1))
	rr, patched, _ := mpolApply(t, eng, ssa, &engine.Request{Operation: engine.OpCreate, Object: pod})
	if rr.Status != engine.StatusPass {
		t.Fatalf("useServerSideApply: %s %q", rr.Status, rr.Message)
	}
	tol, _ := document.Get(patched, "spec", "tolerations")
	if !document.Equal(tol, []any{map[string]any{"key": "a", "operator": "Exists"}}) {
		t.Fatalf("tolerations %v, want the configuration's", tol)
	}
}

// A policy on Pods applies to the pod templates of controllers: its
// apply configuration is wrapped into the template's, its conditions'
// object.spec read the template's, as Kyverno's autogen does.
func TestMutatingPolicyAutogen(t *testing.T) {
	eng := newEngine(t)
	y := `apiVersion: policies.kyverno.io/v1alpha1
kind: MutatingPolicy
metadata: {name: pull}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  matchConditions:
  - name: has-containers
    expression: "object.spec.containers.exists(c, c.image.startsWith('nginx'))"
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{spec: Object.spec{containers: object.spec.containers.map(c,
          Object.spec.containers{name: c.name, imagePullPolicy: "Always"})}}
`
	p := compile(t, eng, y)
	if len(p.Rules) != 3 {
		t.Fatalf("%d rules, want the policy and two autogen variants", len(p.Rules))
	}
	deploy := `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: x}, spec: {selector: {matchLabels: {a: b}}, template: {metadata: {labels: {a: b}}, spec: {containers: [{name: c, image: nginx}]}}}}`
	rr, patched, _ := mpolApply(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: obj(t, deploy)})
	if rr.Status != engine.StatusPass {
		t.Fatalf("deployment: %s %q", rr.Status, rr.Message)
	}
	c, _ := document.Get(patched, "spec", "template", "spec", "containers")
	if !document.Equal(c, []any{map[string]any{"name": "c", "image": "nginx", "imagePullPolicy": "Always"}}) {
		t.Fatalf("template containers %v", c)
	}
	// JSONPatch mutations name the Pod's paths: they stay out of the
	// variants, and a policy with nothing else has none.
	mixed := compile(t, eng, mpolYAML)
	if len(mixed.Rules) != 3 {
		t.Fatalf("ApplyConfiguration and JSONPatch: %d rules, want 3", len(mixed.Rules))
	}
	rr, patched, _ = mpolApply(t, eng, mixed, &engine.Request{Operation: engine.OpCreate, Object: obj(t, deploy)})
	if rr.Status != engine.StatusPass || document.Map(patched, "metadata", "annotations") != nil {
		t.Fatalf("deployment: %s %q, annotations %v (the JSONPatch is the Pod's)", rr.Status, rr.Message, document.Map(patched, "metadata", "annotations"))
	}
	jsonOnly := compile(t, eng, strings.Replace(mpolYAML, "  - patchType: ApplyConfiguration\n    applyConfiguration:\n      expression: >\n        Object{metadata: Object.metadata{labels: {\"owner\": variables.team}},\n          spec: Object.spec{containers: object.spec.containers.map(c,\n            Object.spec.containers{name: c.name, imagePullPolicy: \"Always\"})}}\n", "", 1))
	if len(jsonOnly.Rules) != 1 {
		t.Fatalf("JSONPatch only: %d rules, want 1 (no autogen variant)", len(jsonOnly.Rules))
	}
	cron := `{apiVersion: batch/v1, kind: CronJob, metadata: {name: c, namespace: x}, spec: {schedule: "* * * * *", jobTemplate: {spec: {template: {spec: {containers: [{name: c, image: redis}]}}}}}}`
	if rr, _, _ := mpolApply(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: obj(t, cron)}); rr.Status != engine.StatusSkip {
		t.Fatalf("cronjob without nginx: %s %q", rr.Status, rr.Message)
	}
}

// An expression that would run for ever is stopped by the cost limit:
// an error result, quickly, never a stalled request.
func TestMutatingPolicyCostLimit(t *testing.T) {
	eng := newEngine(t)
	y := strings.Replace(mpolYAML, `value: {"containers"`, `value: {"n": string(size([1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, [1,2,3,4,5,6,7,8,9,10].map(d, [1,2,3,4,5,6,7,8,9,10].map(e, [1,2,3,4,5,6,7,8,9,10].map(f, a+b+c+d+e+f)))))))), "containers"`, 1)
	p := compile(t, eng, y)
	pod := obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x}, spec: {containers: [{name: c, image: nginx}]}}`)
	start := time.Now()
	rr, patched, _ := mpolApply(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: pod})
	if rr.Status != engine.StatusError || !strings.Contains(rr.Message, "cost") || !document.Equal(patched, pod) {
		t.Fatalf("%s %q", rr.Status, rr.Message)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
}

// A PolicyException of policies.kyverno.io naming the policy exempts
// the requests its conditions select: nothing is patched.
func TestMutatingPolicyExceptions(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, mpolYAML)
	docs, err := policy.Parse([]byte(`apiVersion: policies.kyverno.io/v1beta1
kind: PolicyException
metadata: {name: blue, namespace: x}
spec:
  policyRefs: [{name: mp, kind: MutatingPolicy}]
  matchConditions: [{name: blue, expression: "object.metadata.labels.team == 'blue'"}]
`), "e.yaml")
	if err != nil {
		t.Fatal(err)
	}
	pe, err := eng.WithCELExceptions(p, docs.CELExceptions)
	if err != nil {
		t.Fatal(err)
	}
	pod := obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {team: blue}}, spec: {containers: [{name: c, image: nginx}]}}`)
	rr, patched, _ := mpolApply(t, eng, pe, &engine.Request{Operation: engine.OpCreate, Object: pod})
	if rr.Status != engine.StatusSkip || rr.Exception != "x/blue" || !document.Equal(patched, pod) {
		t.Fatalf("%s %q exception %q", rr.Status, rr.Message, rr.Exception)
	}
}

// A compile error names the expression's path.
func TestMutatingPolicyCompileError(t *testing.T) {
	eng := newEngine(t)
	docs, err := policy.Parse([]byte(strings.Replace(mpolYAML, `[JSONPatch{op: "add"`, `[JSONPatch{op: 1`, 1)), "m.yaml")
	if err != nil {
		t.Fatal(err)
	}
	_, err = eng.Compile(docs.Policies[0])
	if err == nil || !strings.Contains(err.Error(), "spec.mutations[1].jsonPatch.expression") {
		t.Fatalf("err = %v", err)
	}
}

// BenchmarkPodAgainstMPol: the marginal cost of one Pod of the benchmark
// workload against two MutatingPolicies (mpolYAML: an apply
// configuration of labels and containers, then a JSON patch).
func BenchmarkPodAgainstMPol(b *testing.B) {
	eng, _, pods := loadWorkload(b, "pss-vpol")
	set := &engine.Set{Policies: []*engine.Policy{compile(b, eng, mpolYAML)}}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		eng.Apply(b.Context(), &engine.Request{Operation: engine.OpCreate, Object: pods[i%len(pods)]}, set)
	}
}

// resolving is a ResourceLister that also resolves resources to kinds
// (resource.List, and a MutatingPolicy's targets, name resources).
type resolving struct{ objects }

func (resolving) KindFor(_ context.Context, apiVersion, resource string) (string, error) {
	switch resource {
	case "secrets":
		return "Secret", nil
	case "configmaps":
		return "ConfigMap", nil
	case "pods":
		return "Pod", nil
	}
	return "", engine.ErrNotFound
}

// A MutatingPolicy with mutateExisting: admission only says a request
// triggers it; MutateExisting finds the targets targetMatchConstraints
// select (selector included), skips those a target condition does not
// hold for, and patches the others (object is the target); the trigger
// is not changed.
func TestMutatingPolicyMutateExisting(t *testing.T) {
	secrets := resolving{objects{
		obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: a, namespace: x, labels: {sync: "yes"}}}`),
		obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: frozen, namespace: x, labels: {sync: "yes", frozen: "yes"}}}`),
		obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: other, namespace: x}}`),
	}}
	eng := newEngine(t, engine.WithResourceLister(secrets))
	p := compile(t, eng, `apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: stamp}
spec:
  evaluation: {mutateExisting: {enabled: true}}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  matchConditions: [{name: trigger, expression: "object.metadata.name == 'dictionary'"}]
  targetMatchConstraints:
    objectSelector: {matchLabels: {sync: "yes"}}
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [secrets]}]
  targetMatchConditions: [{name: not-frozen, expression: "!has(object.metadata.labels.frozen)"}]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{metadata: Object.metadata{annotations: {'stamped-by': request.name}}}"
`)
	trigger := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: dictionary, namespace: x}}`)
	req := &engine.Request{Operation: engine.OpCreate, Object: trigger}
	adm := eng.Mutate(t.Context(), req, p, nil)
	if len(adm.Rules) != 1 || !adm.Rules[0].Background || !document.Equal(adm.Patched, trigger) {
		t.Fatalf("admission: %+v", adm.Rules)
	}
	resp := eng.MutateExisting(t.Context(), req, p, nil)
	if len(resp.Rules) != 1 || resp.Rules[0].Status != engine.StatusPass {
		t.Fatalf("mutate existing: %+v", resp.Rules)
	}
	got := map[string]engine.Status{}
	for _, tr := range resp.Rules[0].Targets {
		name := document.String(tr.Resource, "metadata", "name")
		got[name] = tr.Status
		if tr.Status == engine.StatusPass && document.String(tr.Patched, "metadata", "annotations", "stamped-by") != "dictionary" {
			t.Errorf("target %s patched as %v", name, tr.Patched)
		}
	}
	if len(got) != 2 || got["a"] != engine.StatusPass || got["frozen"] != engine.StatusSkip {
		t.Fatalf("targets %v: want a patched, frozen skipped, other not selected", got)
	}
	other := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: other, namespace: x}}`)
	if r := eng.MutateExisting(t.Context(), &engine.Request{Operation: engine.OpCreate, Object: other}, p, nil); len(r.Rules) != 1 || r.Rules[0].Status != engine.StatusSkip || len(r.Rules[0].Targets) != 0 {
		t.Fatalf("a trigger the match condition leaves out: %+v", r.Rules)
	}
}

// A target named as a subresource ("pods/status") is listed as its
// resource and its patched form is written through the subresource; the
// same route is found for a target an expression gives.
func TestMutatingPolicySubresourceTargets(t *testing.T) {
	pods := resolving{objects{
		obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: web, namespace: x, labels: {stamp: "yes"}}, spec: {containers: [{name: c, image: nginx}]}}`),
	}}
	eng := newEngine(t, engine.WithResourceLister(pods))
	policyWith := func(targets string) *engine.Policy {
		return compile(t, eng, `apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: stamp}
spec:
  evaluation: {mutateExisting: {enabled: true}}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  targetMatchConstraints:`+targets+`
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [pods/status]}]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{status: Object.status{message: 'stamped'}}"
`)
	}
	req := &engine.Request{Operation: engine.OpCreate, Object: obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: trigger, namespace: x}}`)}
	for name, p := range map[string]*engine.Policy{
		"listed": policyWith(""),
		"by expression": policyWith(`
    expression: "resource.Get('v1', 'pods', 'x', 'web')"`),
	} {
		resp := eng.MutateExisting(t.Context(), req, p, nil)
		if len(resp.Rules) != 1 || len(resp.Rules[0].Targets) != 1 {
			t.Fatalf("%s: %+v", name, resp.Rules)
		}
		tr := resp.Rules[0].Targets[0]
		if tr.Status != engine.StatusPass || tr.Subresource != "status" || document.String(tr.Patched, "status", "message") != "stamped" {
			t.Fatalf("%s: target %s via %q: %v", name, tr.Status, tr.Subresource, tr.Patched)
		}
	}
}
