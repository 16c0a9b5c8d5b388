package policystatus

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/internal/webhook/registrar"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

func compiled(t *testing.T, y string) *engine.Policy {
	t.Helper()
	eng, err := engine.New()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := policy.Parse([]byte(y), "test")
	if err != nil {
		t.Fatal(err)
	}
	p, err := eng.Compile(docs.Policies[0])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const pods = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: pods}
spec:
  rules:
  - name: named
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
  - name: label
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    mutate: {patchStrategicMerge: {metadata: {labels: {+(a): b}}}}
`

const widgets = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: widgets}
spec:
  rules:
  - name: named
    match: {any: [{resources: {kinds: [Widget, Pod]}}]}
    validate: {deny: {}}
`

func TestDesired(t *testing.T) {
	resolver := registrar.StaticResolver{
		"Pod":                   {{Version: "v1", Resource: "pods", Namespaced: true}},
		"ConfigMap":             {{Version: "v1", Resource: "configmaps", Namespaced: true}},
		"Deployment":            {{Group: "apps", Version: "v1", Resource: "deployments", Namespaced: true}},
		"DaemonSet":             {{Group: "apps", Version: "v1", Resource: "daemonsets", Namespaced: true}},
		"StatefulSet":           {{Group: "apps", Version: "v1", Resource: "statefulsets", Namespaced: true}},
		"ReplicaSet":            {{Group: "apps", Version: "v1", Resource: "replicasets", Namespaced: true}},
		"Job":                   {{Group: "batch", Version: "v1", Resource: "jobs", Namespaced: true}},
		"CronJob":               {{Group: "batch", Version: "v1", Resource: "cronjobs", Namespaced: true}},
		"ReplicationController": {{Version: "v1", Resource: "replicationcontrollers", Namespaced: true}},
	}
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	w := &Writer{resolver: resolver, now: func() time.Time { return now }}
	obj := func(status map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "p", "generation": int64(4)}}}
		if status != nil {
			u.Object["status"] = status
		}
		return u
	}

	st, ok := w.desired(obj(nil), compiled(t, pods), false, nil, nil)
	if !ok || !st.Ready || len(st.Conditions) != 1 {
		t.Fatalf("pods: %+v", st)
	}
	c := st.Conditions[0]
	if c.Type != "Ready" || c.Status != "True" || c.Reason != "Succeeded" || c.Message != "Ready" || c.ObservedGeneration != 4 || c.LastTransitionTime != "2026-11-22T12:00:00Z" {
		t.Errorf("condition %+v", c)
	}
	// One validate rule on Pods and its two autogen rules; one mutation.
	if st.RuleCount != (policy.RuleCount{Validate: 3, Mutate: 1}) || len(st.Autogen.Rules) != 2 {
		t.Errorf("counts %+v, autogen %d", st.RuleCount, len(st.Autogen.Rules))
	}

	st, _ = w.desired(obj(nil), compiled(t, widgets), false, nil, nil)
	if c := st.Conditions[0]; st.Ready || c.Status != "False" || c.Reason != "Failed" || !strings.Contains(c.Message, "Widget") || strings.Contains(c.Message, "Pod") {
		t.Errorf("widgets: %+v", st)
	}

	st, _ = w.desired(obj(nil), compiled(t, pods), false, nil, errors.New("forbidden"))
	if c := st.Conditions[0]; st.Ready || !strings.Contains(c.Message, "forbidden") {
		t.Errorf("reconcile failed: %+v", st)
	}

	st, ok = w.desired(obj(nil), nil, false, errors.New("spec.rules[0]: bad anchor"), nil)
	if c := st.Conditions[0]; !ok || st.Ready || !strings.Contains(c.Message, "bad anchor") {
		t.Errorf("not compiled: %+v", st)
	}
	if _, ok := w.desired(obj(nil), nil, false, nil, nil); ok {
		t.Error("a policy the cache has not seen got a status")
	}
	// A candidate compiles and is not enforced: not Ready, said why,
	// its rules counted.
	st, ok = w.desired(obj(nil), compiled(t, pods), true, nil, nil)
	if c := st.Conditions[0]; !ok || st.Ready || c.Status != "False" || c.Reason != "Candidate" || !strings.Contains(c.Message, "never enforced") ||
		st.RuleCount.Validate != 3 {
		t.Errorf("candidate: %+v", st)
	}

	// A condition that holds keeps its transition time.
	earlier := map[string]any{"conditions": []any{map[string]any{
		"type": "Ready", "status": "True", "reason": "Succeeded", "message": "Ready", "lastTransitionTime": "2026-01-01T00:00:00Z",
	}}}
	st, _ = w.desired(obj(earlier), compiled(t, pods), false, nil, nil)
	if got := st.Conditions[0].LastTransitionTime; got != "2026-01-01T00:00:00Z" {
		t.Errorf("transition time %s, want the earlier one kept", got)
	}
	st, _ = w.desired(obj(earlier), compiled(t, widgets), false, nil, nil)
	if got := st.Conditions[0].LastTransitionTime; got != "2026-11-22T12:00:00Z" {
		t.Errorf("transition time %s after a change, want now", got)
	}
}
