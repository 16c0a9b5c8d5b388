package policy

import (
	"strings"
	"testing"
)

// TestTenancyAtAdmission: a namespaced Policy that names another
// namespace, a cluster-wide path or a global context entry in a literal
// is refused when it is admitted, with the field's path; values with
// variables wait for the engine's check at evaluation; a ClusterPolicy
// may name any namespace but POST only reviews.
func TestTenancyAtAdmission(t *testing.T) {
	tests := map[string]struct {
		kind, rule string
		// errs are substrings of the refusal, nil for none.
		errs []string
	}{
		"configMap in another namespace": {kind: "Policy", rule: `
    context:
    - {name: c, configMap: {name: db, namespace: team-b}}
    validate: {pattern: {a: b}}`, errs: []string{"spec.rules[0].context[0].configMap.namespace: is team-b: a namespaced policy reads and writes only its own namespace, team-a"}},
		"configMap in its namespace": {kind: "Policy", rule: `
    context:
    - {name: c, configMap: {name: db, namespace: team-a}}
    - {name: d, configMap: {name: db}}
    - {name: e, configMap: {name: db, namespace: "{{ request.namespace }}"}}
    validate: {pattern: {a: b}}`},
		"apiCall to the CA's Secret": {kind: "Policy", rule: `
    context:
    - {name: c, apiCall: {urlPath: /api/v1/namespaces/verdict/secrets/verdict-webhook-ca}}
    validate: {pattern: {a: b}}`, errs: []string{"spec.rules[0].context[0].apiCall.urlPath: urlPath /api/v1/namespaces/verdict/secrets/verdict-webhook-ca names namespace verdict"}},
		"apiCall with variables waits for the rule": {kind: "Policy", rule: `
    context:
    - {name: c, apiCall: {urlPath: "/api/v1/namespaces/{{ request.namespace }}/pods"}}
    validate: {pattern: {a: b}}`},
		"apiCall in a foreach": {kind: "Policy", rule: `
    validate:
      foreach:
      - list: request.object.spec.containers
        context:
        - {name: c, apiCall: {urlPath: /api/v1/secrets}}
        pattern: {a: b}`, errs: []string{"spec.rules[0].validate.foreach[0].context[0].apiCall.urlPath: urlPath /api/v1/secrets does not name namespace team-a"}},
		"globalReference": {kind: "Policy", rule: `
    context:
    - {name: c, globalReference: {name: everything}}
    validate: {pattern: {a: b}}`, errs: []string{"spec.rules[0].context[0].globalReference: a namespaced policy may not read global context entries"}},
		"clone from another namespace": {kind: "Policy", rule: `
    generate: {apiVersion: v1, kind: Secret, name: s, namespace: team-a, clone: {namespace: default, name: regcred}}`,
			errs: []string{"spec.rules[0].generate.clone.namespace: is default"}},
		"cloneList from another namespace": {kind: "Policy", rule: `
    generate: {namespace: team-a, cloneList: {namespace: default, kinds: [v1/Secret]}}`,
			errs: []string{"spec.rules[0].generate.cloneList.namespace: is default"}},
		"generate into another namespace": {kind: "Policy", rule: `
    generate: {apiVersion: v1, kind: ResourceQuota, name: q, namespace: kube-system, data: {spec: {hard: {pods: "0"}}}}`,
			errs: []string{"spec.rules[0].generate.namespace: is kube-system"}},
		"generate foreach into another namespace": {kind: "Policy", rule: `
    generate:
      foreach:
      - list: request.object.data
        apiVersion: v1
        kind: ConfigMap
        name: x
        namespace: team-b
        data: {}`, errs: []string{"spec.rules[0].generate.foreach[0].namespace: is team-b"}},
		"mutate targets in another namespace": {kind: "Policy", rule: `
    mutate:
      targets: [{apiVersion: v1, kind: ConfigMap, name: x, namespace: team-b}]
      patchStrategicMerge: {data: {a: b}}`, errs: []string{"spec.rules[0].mutate.targets[0].namespace: is team-b"}},
		"params in another namespace": {kind: "Policy", rule: `
    validate:
      cel:
        paramKind: {apiVersion: v1, kind: ConfigMap}
        paramRef: {name: limits, namespace: team-b}
        expressions: [{expression: "true"}]`, errs: []string{"spec.rules[0].validate.cel.paramRef.namespace: is team-b"}},
		"POST creating an object": {kind: "Policy", rule: `
    context:
    - name: c
      apiCall: {method: POST, urlPath: /api/v1/namespaces/team-a/resourcequotas, data: [{key: spec, value: {}}]}
    validate: {pattern: {a: b}}`, errs: []string{"spec.rules[0].context[0].apiCall.urlPath: POST /api/v1/namespaces/team-a/resourcequotas: an apiCall may POST only a review"}},
		"ClusterPolicy reads any namespace": {kind: "ClusterPolicy", rule: `
    context:
    - {name: c, configMap: {name: db, namespace: team-b}}
    - {name: d, apiCall: {urlPath: /api/v1/namespaces/team-b/configmaps}}
    - {name: e, globalReference: {name: everything}}
    generate: {apiVersion: v1, kind: Secret, name: s, namespace: team-a, clone: {namespace: default, name: regcred}}`},
		"ClusterPolicy POST creating an object": {kind: "ClusterPolicy", rule: `
    context:
    - name: c
      apiCall: {method: POST, urlPath: /api/v1/namespaces/kube-system/resourcequotas, data: [{key: spec, value: {}}]}
    validate: {pattern: {a: b}}`, errs: []string{"an apiCall may POST only a review"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			doc := "apiVersion: kyverno.io/v1\nkind: " + tc.kind + "\nmetadata: {name: p, namespace: team-a}\nspec:\n  rules:\n  - name: r\n    match: {any: [{resources: {kinds: [ConfigMap]}}]}" + tc.rule + "\n"
			_, err := Parse([]byte(doc), "test.yaml")
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("want a refusal")
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not mention %q", err, want)
				}
			}
		})
	}
}

// TestCleanupTenancyAtAdmission: a CleanupPolicy's context entries are
// held to its namespace as a Policy's are.
func TestCleanupTenancyAtAdmission(t *testing.T) {
	doc := `apiVersion: kyverno.io/v2
kind: CleanupPolicy
metadata: {name: c, namespace: team-a}
spec:
  schedule: "*/5 * * * *"
  match: {any: [{resources: {kinds: [Pod]}}]}
  context:
  - {name: s, apiCall: {urlPath: /api/v1/namespaces/team-b/secrets}}
`
	docs, err := Parse([]byte(doc), "test.yaml")
	if err != nil || len(docs.Others) != 1 {
		t.Fatalf("parse: %v", err)
	}
	_, err = CleanupPolicyFromObject(docs.Others[0])
	if err == nil || !strings.Contains(err.Error(), "spec.context[0].apiCall.urlPath: urlPath /api/v1/namespaces/team-b/secrets names namespace team-b") {
		t.Fatalf("got %v, want the context entry refused", err)
	}
}
