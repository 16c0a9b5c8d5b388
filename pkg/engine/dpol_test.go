package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

const dpolYAML = `
apiVersion: policies.kyverno.io/v1beta1
kind: DeletingPolicy
metadata: {name: old-pods}
spec:
  schedule: "*/5 * * * *"
  deletionPropagationPolicy: Background
  matchConstraints:
    resourceRules:
    # The operations do not matter: there is no request.
    - {apiGroups: [""], apiVersions: [v1], operations: [DELETE], resources: [pods]}
    excludeResourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods], resourceNames: [keep]}
    namespaceSelector: {matchLabels: {env: dev}}
    objectSelector: {matchExpressions: [{key: pinned, operator: DoesNotExist}]}
  variables:
  - {name: phase, expression: "object.status.phase"}
  conditions:
  - {name: finished, expression: "variables.phase == 'Succeeded'"}
  - {name: dev-namespace, expression: "namespaceObject.metadata.labels.env == 'dev'"}
`

// A DeletingPolicy compiles into a cleanup policy the cleaner runs as it
// runs the others: the resources matchConstraints select (whatever the
// operations of their resource rules) are deleted when every condition
// holds, with the variables and namespaceObject as Kyverno gives them;
// the others are kept, with the reason.
func TestDeletingPolicyDecide(t *testing.T) {
	eng := newEngine(t)
	p := compileCleanup(t, eng, dpolYAML)
	if p.Raw.Spec.Schedule != "*/5 * * * *" || p.Raw.Spec.DeletionPropagationPolicy == nil || *p.Raw.Spec.DeletionPropagationPolicy != policy.PropagationBackground {
		t.Fatalf("the cleaner reads schedule %q and propagation %v", p.Raw.Spec.Schedule, p.Raw.Spec.DeletionPropagationPolicy)
	}
	run, err := eng.StartCleanup(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	dev := map[string]string{"env": "dev"}
	tests := map[string]struct {
		obj      string
		nsLabels map[string]string
		delete   bool
		reason   string
		message  string
		err      string
	}{
		"finished pod":     {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: dev}, status: {phase: Succeeded}}`, nsLabels: dev, delete: true},
		"running pod":      {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: dev}, status: {phase: Running}}`, nsLabels: dev, reason: engine.CleanupConditionsNotMet, message: `condition "finished" is false`},
		"other namespace":  {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: prod}, status: {phase: Succeeded}}`, nsLabels: map[string]string{"env": "prod"}, reason: engine.CleanupNotMatched},
		"pinned":           {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: dev, labels: {pinned: "yes"}}, status: {phase: Succeeded}}`, nsLabels: dev, reason: engine.CleanupNotMatched},
		"excluded by name": {obj: `{apiVersion: v1, kind: Pod, metadata: {name: keep, namespace: dev}, status: {phase: Succeeded}}`, nsLabels: dev, reason: engine.CleanupNotMatched},
		"another kind":     {obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: dev}, status: {phase: Succeeded}}`, nsLabels: dev, reason: engine.CleanupNotMatched},
		"another group":    {obj: `{apiVersion: example.com/v1, kind: Pod, metadata: {name: a, namespace: dev}, status: {phase: Succeeded}}`, nsLabels: dev, reason: engine.CleanupNotMatched},
		"no status":        {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: dev}}`, nsLabels: dev, err: `spec.conditions[0] "finished"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, err := run.Decide(t.Context(), obj(t, tc.obj), tc.nsLabels)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || d.Delete {
					t.Fatalf("decision %+v, error %v; want an error about %q", d, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d.Delete != tc.delete || d.Reason != tc.reason || d.Message != tc.message {
				t.Fatalf("decision %+v, want delete %v reason %q message %q", d, tc.delete, tc.reason, tc.message)
			}
		})
	}
}

// A condition that is false keeps the resource, whatever errors the
// others end in (as Kyverno evaluates them); without conditions every
// selected resource is deleted.
func TestDeletingPolicyConditions(t *testing.T) {
	eng := newEngine(t)
	p := compileCleanup(t, eng, `
apiVersion: policies.kyverno.io/v1
kind: DeletingPolicy
metadata: {name: p}
spec:
  schedule: "@hourly"
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]}
  conditions:
  - {name: broken, expression: "object.data.missing == 'x'"}
  - {name: temporary, expression: "object.metadata.name.startsWith('tmp-')"}
`)
	run, err := eng.StartCleanup(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	d, err := run.Decide(t.Context(), obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: keep, namespace: a}, data: {}}`), nil)
	if err != nil || d.Delete || d.Reason != engine.CleanupConditionsNotMet || d.Message != `condition "temporary" is false` {
		t.Fatalf("decision %+v, error %v; want kept by condition temporary", d, err)
	}
	if d, err := run.Decide(t.Context(), obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: tmp-1, namespace: a}, data: {}}`), nil); err == nil || d.Delete {
		t.Fatalf("decision %+v, error %v; want the broken condition's error", d, err)
	}

	all := compileCleanup(t, eng, `
apiVersion: policies.kyverno.io/v1alpha1
kind: DeletingPolicy
metadata: {name: all}
spec:
  schedule: "0 1 * * *"
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]}
`)
	run, err = eng.StartCleanup(t.Context(), all)
	if err != nil {
		t.Fatal(err)
	}
	if d, err := run.Decide(t.Context(), obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: x, namespace: a}}`), nil); err != nil || !d.Delete {
		t.Fatalf("decision %+v, error %v; want deleted", d, err)
	}
}

// Kinds gives the cleaner what the resource rules select, by resource:
// the kinds whose plural the rules name, in their groups and versions;
// subresources are left out.
func TestDeletingPolicyKinds(t *testing.T) {
	eng := newEngine(t)
	p := compileCleanup(t, eng, `
apiVersion: policies.kyverno.io/v1beta1
kind: DeletingPolicy
metadata: {name: p}
spec:
  schedule: "@daily"
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [pods, pods/status, endpoints]}
    - {apiGroups: [apps], apiVersions: ["*"], resources: [deployments, "*/scale"]}
`)
	want := []engine.KindSelector{
		{Group: "", Version: "v1", Kind: "*", Resource: "pods"},
		{Group: "", Version: "v1", Kind: "*", Resource: "endpoints"},
		{Group: "apps", Version: "*", Kind: "*", Resource: "deployments"},
	}
	got := p.Kinds()
	if len(got) != len(want) {
		t.Fatalf("kinds %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("kinds %+v, want %+v", got, want)
		}
	}
	selected := func(g engine.GroupVersionKind) bool {
		for _, k := range got {
			if k.Selects(g) {
				return true
			}
		}
		return false
	}
	for _, tc := range []struct {
		gvk  engine.GroupVersionKind
		want bool
	}{
		{engine.GroupVersionKind{Version: "v1", Kind: "Pod"}, true},
		{engine.GroupVersionKind{Version: "v1", Kind: "Endpoints"}, true},
		{engine.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, true},
		{engine.GroupVersionKind{Group: "apps", Version: "v1beta2", Kind: "Deployment"}, true},
		{engine.GroupVersionKind{Group: "extensions", Version: "v1beta1", Kind: "Deployment"}, false},
		{engine.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, false},
		{engine.GroupVersionKind{Group: "apps", Version: "v1", Kind: "StatefulSet"}, false},
	} {
		if got := selected(tc.gvk); got != tc.want {
			t.Errorf("%+v selected: %v, want %v", tc.gvk, got, tc.want)
		}
	}
}

// A NamespacedDeletingPolicy deletes in its own namespace only.
func TestNamespacedDeletingPolicy(t *testing.T) {
	eng := newEngine(t)
	p := compileCleanup(t, eng, `
apiVersion: policies.kyverno.io/v1beta1
kind: NamespacedDeletingPolicy
metadata: {name: tmp, namespace: team}
spec:
  schedule: "@hourly"
  matchConstraints: {resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], resources: ["*"]}]}
  conditions: [{name: tmp, expression: "object.metadata.name.startsWith('tmp')"}]
`)
	if !p.Raw.Namespaced() || p.Raw.Key() != "team/tmp" {
		t.Fatalf("namespaced %v, key %q", p.Raw.Namespaced(), p.Raw.Key())
	}
	run, err := eng.StartCleanup(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		obj    string
		delete bool
		reason string
	}{
		{obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: tmp-a, namespace: team}}`, delete: true},
		{obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: tmp-a, namespace: other}}`, reason: engine.CleanupOtherNamespace},
		{obj: `{apiVersion: v1, kind: Namespace, metadata: {name: tmp-ns}}`, reason: engine.CleanupOtherNamespace},
		{obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: keep, namespace: team}}`, reason: engine.CleanupConditionsNotMet},
	} {
		d, err := run.Decide(t.Context(), obj(t, tc.obj), nil)
		if err != nil || d.Delete != tc.delete || d.Reason != tc.reason {
			t.Errorf("%s: decision %+v, error %v; want delete %v reason %q", tc.obj, d, err, tc.delete, tc.reason)
		}
	}
}

// A compile error names the expression's path; every expression is
// compiled, so that each error is reported at once.
func TestDeletingPolicyCompileError(t *testing.T) {
	raw, err := policy.CleanupPolicyFromObject(obj(t, strings.NewReplacer(
		`"object.status.phase"`, `"object.status.("`,
		`"namespaceObject.metadata.labels.env == 'dev'"`, `"namespaceObject.metadata.labels.env =="`,
	).Replace(dpolYAML)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = newEngine(t).CompileCleanup(raw)
	if err == nil {
		t.Fatal("compiled")
	}
	for _, want := range []string{"DeletingPolicy old-pods", "spec.variables[0].expression:", "spec.conditions[1].expression:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "spec.conditions[0]") {
		t.Errorf("error %q names a condition that compiles", err)
	}
}

// An invalid DeletingPolicy is refused with every problem named; one
// without matchConstraints is refused for the cluster (as Kyverno's
// admission refuses it) but read from files, where it judges JSON
// payloads only, as Kyverno's CLI does.
func TestDeletingPolicyInvalid(t *testing.T) {
	_, err := policy.CleanupPolicyFromObject(obj(t, `
apiVersion: policies.kyverno.io/v1beta1
kind: NamespacedDeletingPolicy
metadata: {name: bad}
spec:
  schedule: "61 * * * *"
  deletionPropagationPolicy: Sometimes
  matchConstraints: {objectSelector: {matchLabels: {a: b}}}
  conditions: [{expression: "true"}]
  typo: 1
`))
	if err == nil {
		t.Fatal("accepted")
	}
	for _, want := range []string{"metadata.namespace", "spec.schedule", "above the maximum", "spec.deletionPropagationPolicy", "spec.matchConstraints.resourceRules", "spec.conditions[0].name", "spec.typo"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %q", err, want)
		}
	}
	noSchedule := `
apiVersion: policies.kyverno.io/v1beta1
kind: DeletingPolicy
metadata: {name: payloads}
spec:
  conditions: [{name: c, expression: "object.key == 'v'"}]
`
	if _, err := policy.DeletingPolicyFromObject(obj(t, noSchedule)); err == nil || !strings.Contains(err.Error(), "spec.schedule") || !strings.Contains(err.Error(), "spec.matchConstraints.resourceRules") {
		t.Fatalf("error %v; want the schedule and the resource rules named", err)
	}
	payloads := strings.Replace(noSchedule, "spec:\n", "spec:\n  schedule: \"@hourly\"\n", 1)
	if _, err := policy.DeletingPolicyFromObject(obj(t, payloads)); err == nil || !strings.Contains(err.Error(), "spec.matchConstraints.resourceRules") {
		t.Fatalf("error %v; want the resource rules named", err)
	}
	docs, err := policy.Parse([]byte(payloads), "test")
	if err != nil || len(docs.DeletingPolicies) != 1 {
		t.Fatalf("files: %+v, %v; want the policy read", docs, err)
	}
	eng := newEngine(t)
	p, err := eng.CompileCleanup(docs.DeletingPolicies[0])
	if err != nil {
		t.Fatal(err)
	}
	if len(p.Kinds()) != 0 {
		t.Fatalf("kinds %+v; want none (no object is selected)", p.Kinds())
	}
	run, err := eng.StartCleanup(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		obj    string
		delete bool
		reason string
	}{
		{obj: `{key: v}`, delete: true},
		{obj: `{key: w}`, reason: engine.CleanupConditionsNotMet},
		{obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: b}, key: v}`, reason: engine.CleanupNotMatched},
	} {
		d, err := run.Decide(t.Context(), obj(t, tc.obj), nil)
		if err != nil || d.Delete != tc.delete || d.Reason != tc.reason {
			t.Errorf("%s: decision %+v, error %v; want delete %v reason %q", tc.obj, d, err, tc.delete, tc.reason)
		}
	}
}

// A condition that would run for ever is stopped by the cost limit: an
// error, quickly, and the resource is not deleted.
func TestDeletingPolicyCostLimit(t *testing.T) {
	eng := newEngine(t)
	p := compileCleanup(t, eng, `
apiVersion: policies.kyverno.io/v1beta1
kind: DeletingPolicy
metadata: {name: slow}
spec:
  schedule: "@hourly"
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], resources: [configmaps]}]}
  conditions:
  - name: slow
    expression: "size([1,2,3,4,5,6,7,8,9,10].map(a, [1,2,3,4,5,6,7,8,9,10].map(b, [1,2,3,4,5,6,7,8,9,10].map(c, [1,2,3,4,5,6,7,8,9,10].map(d, [1,2,3,4,5,6,7,8,9,10].map(e, [1,2,3,4,5,6,7,8,9,10].map(f, a+b+c+d+e+f))))))) > 0"
`)
	run, err := eng.StartCleanup(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	d, err := run.Decide(t.Context(), obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: b}}`), nil)
	if err == nil || !strings.Contains(err.Error(), "cost") || d.Delete {
		t.Fatalf("decision %+v, error %v; want a cost error", d, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("took %s", took)
	}
}
