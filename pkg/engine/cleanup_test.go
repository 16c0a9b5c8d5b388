package engine_test

import (
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

func compileCleanup(t *testing.T, eng *engine.Engine, y string) *engine.CleanupPolicy {
	t.Helper()
	raw, err := policy.CleanupPolicyFromObject(obj(t, y))
	if err != nil {
		t.Fatal(err)
	}
	p, err := eng.CompileCleanup(raw)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestCleanupDecide: a cleanup policy's match, exclude and conditions are
// judged as a rule's are, with the resource as `target` and the policy's
// context loaded once; a namespaced policy sees only its namespace.
func TestCleanupDecide(t *testing.T) {
	eng := newEngine(t)
	cluster := compileCleanup(t, eng, `
apiVersion: kyverno.io/v2
kind: ClusterCleanupPolicy
metadata: {name: done-pods}
spec:
  schedule: "*/5 * * * *"
  context:
  - name: phase
    variable: {value: Succeeded}
  match:
    any:
    - resources: {kinds: [Pod], namespaceSelector: {matchLabels: {env: dev}}}
  exclude:
    any:
    - resources: {names: [keep-*]}
  conditions:
    all:
    - key: "{{ target.status.phase }}"
      operator: Equals
      value: "{{ phase }}"
      message: "phase is {{ target.status.phase }}"
    - key: "{{ request.namespace }}"
      operator: NotEquals
      value: kube-system
`)
	if k := cluster.Kinds(); len(k) != 1 || k[0] != (engine.KindSelector{Group: "*", Version: "*", Kind: "Pod"}) {
		t.Fatalf("kinds %+v", k)
	}
	run, err := eng.StartCleanup(t.Context(), cluster)
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
		"done pod":              {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: dev}, status: {phase: Succeeded}}`, nsLabels: dev, delete: true},
		"running pod":           {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: dev}, status: {phase: Running}}`, nsLabels: dev, reason: engine.CleanupConditionsNotMet, message: "phase is Running"},
		"other namespace label": {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: prod}, status: {phase: Succeeded}}`, nsLabels: map[string]string{"env": "prod"}, reason: engine.CleanupNotMatched},
		"another kind":          {obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: dev}}`, nsLabels: dev, reason: engine.CleanupNotMatched},
		"excluded":              {obj: `{apiVersion: v1, kind: Pod, metadata: {name: keep-me, namespace: dev}, status: {phase: Succeeded}}`, nsLabels: dev, reason: engine.CleanupExcluded},
		"no status":             {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: dev}}`, nsLabels: dev, err: "failed to evaluate conditions"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			d, err := run.Decide(t.Context(), obj(t, tc.obj), tc.nsLabels)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
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

	team := compileCleanup(t, eng, `
apiVersion: verdict.dev/v1
kind: CleanupPolicy
metadata: {name: tmp, namespace: team}
spec:
  schedule: "@hourly"
  match: {any: [{resources: {kinds: [v1/ConfigMap], selector: {matchLabels: {tmp: "true"}}}}]}
`)
	run, err = eng.StartCleanup(t.Context(), team)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		obj    string
		delete bool
		reason string
	}{
		{obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: team, labels: {tmp: "true"}}}`, delete: true},
		{obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: other, labels: {tmp: "true"}}}`, reason: engine.CleanupOtherNamespace},
		{obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: team}}`, reason: engine.CleanupNotMatched},
	} {
		d, err := run.Decide(t.Context(), obj(t, tc.obj), nil)
		if err != nil || d.Delete != tc.delete || d.Reason != tc.reason {
			t.Errorf("%s: decision %+v, error %v; want delete %v reason %q", tc.obj, d, err, tc.delete, tc.reason)
		}
	}
}

func TestKindSelector(t *testing.T) {
	deploy := engine.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	pod := engine.GroupVersionKind{Version: "v1", Kind: "Pod"}
	tests := map[string]struct {
		sel  string
		gvk  engine.GroupVersionKind
		want bool
	}{
		"kind":               {sel: "Deployment", gvk: deploy, want: true},
		"version and kind":   {sel: "v1/Pod", gvk: pod, want: true},
		"group version kind": {sel: "apps/v1/Deployment", gvk: deploy, want: true},
		"other group":        {sel: "batch/v1/Deployment", gvk: deploy},
		"other kind":         {sel: "Pod", gvk: deploy},
		"subresource":        {sel: "Pod/status", gvk: pod},
	}
	for name, tc := range tests {
		if got := engine.ParseKindSelector(tc.sel).Selects(tc.gvk); got != tc.want {
			t.Errorf("%s: %s selects %+v: %v, want %v", name, tc.sel, tc.gvk, got, tc.want)
		}
	}
}
