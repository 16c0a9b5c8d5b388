package engine_test

import (
	"maps"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// A CEL policy's audit annotations become its result's properties, as
// Kyverno reports them: a ValidatingPolicy's on a pass and on a failure
// (which also names the validation that failed),
// a MutatingPolicy's seeing the object as its mutations left it, a
// GeneratingPolicy's; a null or empty value is left out; one that fails
// to evaluate makes the result an error (and a MutatingPolicy's leaves
// the resource as it was).
func TestAuditAnnotations(t *testing.T) {
	eng := newEngine(t)
	const match = `
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]`
	audit := func(value string) string {
		return `
  auditAnnotations:
  - {key: team, valueExpression: "object.metadata.?labels['team'].orValue('none')"}
  - {key: gone, valueExpression: "null"}
  - {key: empty, valueExpression: "''"}
  - {key: extra, valueExpression: "` + value + `"}`
	}
	vpol := func(value string) string {
		return `apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: vp}
spec:` + match + `
  validations: [{expression: "has(object.metadata.labels)", message: labels needed}]` + audit(value)
	}
	mpol := func(value string) string {
		return `apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: mp}
spec:` + match + `
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: "Object{metadata: Object.metadata{labels: {'team': 'platform'}}}"}` + audit(value)
	}
	gpol := func(value string) string {
		return `apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata: {name: gp}
spec:` + match + `
  generate: [{expression: "generator.Apply('default', [])"}]` + audit(value)
	}
	labelled := `{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: default, labels: {team: web}}, spec: {containers: [{name: c, image: nginx}]}}`
	bare := `{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: default}, spec: {containers: [{name: c, image: nginx}]}}`
	run := func(kind, y, pod string) engine.Response {
		p := compile(t, eng, y)
		req := &engine.Request{Operation: engine.OpCreate, Object: obj(t, pod)}
		switch kind {
		case "mutate":
			return eng.Mutate(t.Context(), req, p, nil)
		case "generate":
			return eng.Generate(t.Context(), req, p, nil)
		}
		return eng.Validate(t.Context(), req, p, nil)
	}
	for _, tc := range []struct {
		name, kind, policy, pod string
		status                  engine.Status
		props                   map[string]string
	}{
		{"a ValidatingPolicy that passes", "validate", vpol("'x'"), labelled, engine.StatusPass, map[string]string{"team": "web", "extra": "x"}},
		{"a ValidatingPolicy that fails", "validate", vpol("'x'"), bare, engine.StatusFail, map[string]string{"team": "none", "extra": "x", engine.PropertyValidationIndex: "0"}},
		{"a MutatingPolicy, after its mutations", "mutate", mpol("'x'"), bare, engine.StatusPass, map[string]string{"team": "platform", "extra": "x"}},
		{"a GeneratingPolicy", "generate", gpol("'x'"), labelled, engine.StatusPass, map[string]string{"team": "web", "extra": "x"}},
		{"an annotation that errs: ValidatingPolicy", "validate", vpol("string(object.spec.nodeName)"), labelled, engine.StatusError, nil},
		{"an annotation that errs: MutatingPolicy", "mutate", mpol("string(object.spec.nodeName)"), bare, engine.StatusError, nil},
		{"an annotation that errs: GeneratingPolicy", "generate", gpol("string(object.spec.nodeName)"), labelled, engine.StatusError, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp := run(tc.kind, tc.policy, tc.pod)
			if len(resp.Rules) != 1 {
				t.Fatalf("rules %+v", resp.Rules)
			}
			rr := resp.Rules[0]
			if rr.Status != tc.status || !maps.Equal(rr.Properties, tc.props) {
				t.Fatalf("status %s (%s), properties %v; want %s, %v", rr.Status, rr.Message, rr.Properties, tc.status, tc.props)
			}
			if tc.status == engine.StatusError {
				if !strings.Contains(rr.Message, `failed to evaluate auditAnnotation "extra"`) {
					t.Fatalf("message %q", rr.Message)
				}
				if tc.kind == "mutate" && resp.Patched != nil && resp.Patched["metadata"].(map[string]any)["labels"] != nil {
					t.Fatalf("the mutation was kept: %v", resp.Patched)
				}
			}
		})
	}
}
