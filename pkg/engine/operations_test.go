package engine_test

import (
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// TestDeleteSkipsPatterns: on a DELETE, pattern, anyPattern and
// podSecurity rules give no result at all (Kyverno's validation handlers
// return none: there is no new state to check), while deny rules decide,
// with the deleted object as request.oldObject.
func TestDeleteSkipsPatterns(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  validationFailureAction: Enforce
  rules:
  - name: labelled
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {message: needs a label, pattern: {metadata: {labels: {team: "?*"}}}}
  - name: any-labelled
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {message: needs a label, anyPattern: [{metadata: {labels: {team: "?*"}}}]}
  - name: keep-prod
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate:
      message: "{{ request.oldObject.metadata.name }} is production"
      deny:
        conditions:
          all:
          - {key: "{{ request.operation }}", operator: Equals, value: DELETE}
          - {key: "{{ request.oldObject.metadata.labels.env || '' }}", operator: Equals, value: prod}
`)
	cm := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: settings, namespace: default, labels: {env: prod}}}`)
	got := statuses(t, eng, p, &engine.Request{Operation: engine.OpDelete, OldObject: cm})
	if len(got) != 1 || got["keep-prod"].Status != engine.StatusFail || got["keep-prod"].Message != "settings is production" {
		t.Fatalf("DELETE: %+v, want only keep-prod failing", got)
	}
	got = statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: cm})
	if got["labelled"].Status != engine.StatusFail || got["any-labelled"].Status != engine.StatusFail || got["keep-prod"].Status != engine.StatusPass {
		t.Fatalf("CREATE: %+v", got)
	}
	// A policy whose every rule gives no result on the DELETE has no rules
	// in its response.
	resps, _ := eng.Apply(t.Context(), &engine.Request{Operation: engine.OpDelete, OldObject: cm}, &engine.Set{Policies: []*engine.Policy{compile(t, eng, `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: q}
spec:
  rules:
  - name: labelled
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {pattern: {metadata: {labels: {team: "?*"}}}}
`)}})
	for _, r := range resps {
		if r.Rules != nil {
			t.Fatalf("DELETE of a pattern-only policy: %+v", r.Rules)
		}
	}
}
