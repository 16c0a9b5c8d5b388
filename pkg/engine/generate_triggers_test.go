package engine_test

import (
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// TestGenerateTriggers: the generate rules a request triggers (match and
// preconditions), without evaluating what they generate: a rule whose
// data could not be evaluated for a deleted trigger still counts.
func TestGenerateTriggers(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: settings
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: settings
      namespace: "{{ request.object.metadata.name }}"
      synchronize: true
      data: {data: {owner: "{{ request.object.metadata.labels.owner }}"}}
  - name: only-teams
    match: {any: [{resources: {kinds: [Namespace]}}]}
    preconditions: {all: [{key: "{{ request.oldObject.metadata.labels.team || '' }}", operator: NotEquals, value: ""}]}
    generate: {apiVersion: v1, kind: ConfigMap, name: team, namespace: x, data: {}}
  - name: pods
    match: {any: [{resources: {kinds: [Pod]}}]}
    generate: {apiVersion: v1, kind: ConfigMap, name: pod, namespace: x, data: {}}
`)
	ns := obj(t, `{apiVersion: v1, kind: Namespace, metadata: {name: shop}}`)
	got := eng.GenerateTriggers(t.Context(), &engine.Request{Operation: engine.OpDelete, OldObject: ns}, p, nil).Rules
	if len(got) != 2 {
		t.Fatalf("rules %+v, want settings and only-teams (skipped by its precondition)", got)
	}
	for _, rr := range got {
		switch rr.Name {
		case "settings":
			if !rr.Background || rr.Status != engine.StatusSkip || len(rr.Generated) != 0 {
				t.Errorf("settings: %+v", rr)
			}
		case "only-teams":
			if rr.Background {
				t.Errorf("only-teams triggered although its precondition fails: %+v", rr)
			}
		default:
			t.Errorf("unexpected rule %+v", rr)
		}
	}
}
