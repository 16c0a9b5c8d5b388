package policy

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParseAndValidate(t *testing.T) {
	tests := map[string]struct {
		spec string
		// errs lists substrings, each expected in some "path: message".
		errs []string
	}{
		"valid": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {metadata: {labels: {app: "?*"}}}}`},
		"unknown field": {spec: `
  rulez: []
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {a: b}, mesage: x}`,
			errs: []string{`spec.rulez: unknown field "rulez"`, `spec.rules[0].validate.mesage: unknown field "mesage"`}},
		"two rule types": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {a: b}}
    mutate: {patchStrategicMerge: {a: b}}`,
			errs: []string{"spec.rules[0]: a rule must have exactly one of validate, mutate, generate or verifyImages, found 2"}},
		"bad anchor": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {spec: {"(name": x}}}`,
			errs: []string{`spec.rules[0].validate.pattern.spec.(name: invalid anchor`}},
		"add anchor in validate": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {spec: {"+(name)": x}}}`,
			errs: []string{"only allowed in mutate rules"}},
		"bad jmespath": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "{{ request.object.metadata.name[ }}"
      pattern: {a: b}`,
			errs: []string{"spec.rules[0].validate.message: invalid JMESPath"}},
		"bad operator": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      deny: {conditions: {any: [{key: a, operator: Equalz, value: b}]}}`,
			errs: []string{`spec.rules[0].validate.deny.conditions.any[0].operator: unknown operator "Equalz"`}},
		"wildcard kind in generate": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: ["*"]}}]}
    generate: {kind: ConfigMap, name: x, data: {}}`,
			errs: []string{`wildcard kind "*" is not allowed in a generate rule`}},
		"generate without data or clone": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Deployment]}}]}
    generate: {apiVersion: foo/v1, kind: Foo, name: "foo-{{request.object.metadata.name}}", namespace: default}`},
		"generate with an empty clone and data": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate: {apiVersion: v1, kind: ConfigMap, name: x, namespace: a, clone: {}, data: {}}`},
		"generate with data and clone": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate: {apiVersion: v1, kind: ConfigMap, name: x, namespace: a, clone: {name: y, namespace: b}, data: {}}`,
			errs: []string{"spec.rules[0].generate: only one of data, clone, cloneList and foreach can be specified"}},
		"generate with data and foreach": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate:
      data: {}
      foreach: [{list: "request.object.spec.x", apiVersion: v1, kind: ConfigMap, name: x, namespace: a}]`,
			errs: []string{"spec.rules[0].generate: only one of data, clone, cloneList and foreach"}},
		"generate target without name or apiVersion": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate: {kind: ConfigMap, namespace: a}`,
			errs: []string{"spec.rules[0].generate.name: is required", "spec.rules[0].generate.apiVersion: is required"}},
		"generate foreach element without kind": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate:
      foreach: [{list: "request.object.spec.x", apiVersion: v1, name: x, namespace: a}]`,
			errs: []string{"spec.rules[0].generate.foreach[0].kind: is required"}},
		"generate cloneList needs no target": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate: {namespace: a, cloneList: {namespace: b, kinds: [v1/Secret]}}`},
		"empty match": {spec: `
  rules:
  - name: r
    match: {}
    validate: {pattern: {a: b}}`,
			errs: []string{"spec.rules[0].match: must select something"}},
		"bad failure action": {spec: `
  validationFailureAction: Block
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {a: b}}`,
			errs: []string{`spec.validationFailureAction: must be Audit or Enforce, not "Block"`}},
		"duplicate rule": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {a: b}}
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {a: b}}`,
			errs: []string{`spec.rules[1].name: duplicate rule name "r"`}},
		"bad foreach list": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {foreach: [{list: "request.object.spec.containers[", pattern: {a: b}}]}`,
			errs: []string{"spec.rules[0].validate.foreach[0].list: invalid JMESPath"}},
		"bad pod security level": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {podSecurity: {level: strict}}`,
			errs: []string{`spec.rules[0].validate.podSecurity.level: must be privileged, baseline or restricted`}},
		"string pattern": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: "foo"}`,
			errs: []string{`spec.rules[0].validate.pattern: must be an object (the fields to check), not the string "foo"`}},
		"anyPattern entries that are not objects": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {anyPattern: [{a: b}, [x], 3, true, null]}`,
			errs: []string{
				`spec.rules[0].validate.anyPattern[1]: must be an object (the fields to check), not a list`,
				`spec.rules[0].validate.anyPattern[2]: must be an object (the fields to check), not the number 3`,
				`spec.rules[0].validate.anyPattern[3]: must be an object (the fields to check), not the boolean true`,
				`spec.rules[0].validate.anyPattern[4]: must be an object (the fields to check), not null`,
			}},
		"pattern from a variable is kept": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    context: [{name: shape, variable: {value: {metadata: {name: "?*"}}}}]
    validate: {pattern: "{{ shape }}"}`},
		"scalar foreach pattern is kept": {spec: `
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {foreach: [{list: "request.object.spec.containers[].image", pattern: "!*:latest"}]}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			assertParse(t, "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: p}\nspec:"+tc.spec+"\n", tc.errs)
		})
	}
}

// assertParse parses doc, one policy, and checks that it is valid when errs
// is empty and otherwise that the error mentions each of errs.
func assertParse(t *testing.T, doc string, errs []string) {
	t.Helper()
	docs, err := Parse([]byte(doc), "test.yaml")
	if len(errs) == 0 {
		if err != nil {
			t.Fatalf("unexpected error: %v", err)
		}
		if len(docs.Policies) != 1 {
			t.Fatalf("got %d policies", len(docs.Policies))
		}
		return
	}
	if err == nil {
		t.Fatal("want an error")
	}
	for _, want := range errs {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %q", err, want)
		}
	}
}

// TestValidateWith checks that every expression goes through the given
// check, whose errors are the policy's, and that Validate's check is the
// parser's.
func TestValidateWith(t *testing.T) {
	docs, err := Parse([]byte(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    context: [{name: n, variable: {jmesPath: "request.object.metadata.name"}}]
    preconditions: {all: [{key: "{{ request.operation }}", operator: Equals, value: CREATE}]}
    validate:
      message: "{{ n }} is refused"
      deny: {}
`), "test.yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := docs.Policies[0]
	var seen []string
	refuse := func(expr string) error {
		seen = append(seen, expr)
		return errors.New("refused")
	}
	errs := ValidateWith(p, refuse)
	want := []string{"request.object.metadata.name", "request.operation", "n"}
	if !slices.Equal(seen, want) {
		t.Errorf("checked %q, want %q", seen, want)
	}
	if len(errs) != len(want) {
		t.Errorf("errors %v, want one per expression", errs)
	}
	for _, fe := range errs {
		if !strings.Contains(fe.Msg, "refused") {
			t.Errorf("error %v does not carry the check's", fe)
		}
	}
	if errs := ValidateWith(p, nil); len(errs) != 0 {
		t.Errorf("ValidateWith(nil) = %v, want the parser's check", errs)
	}
}

func TestParseSortsDocuments(t *testing.T) {
	docs, err := Parse([]byte(`apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {a: b}}
---
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: e}
spec:
  exceptions: [{policyName: p, ruleNames: [r]}]
  match: {any: [{resources: {kinds: [Pod]}}]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: g}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "true"}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: g-binding}
spec: {policyName: g, validationActions: [Audit]}
---
apiVersion: policies.kyverno.io/v1beta1
kind: DeletingPolicy
metadata: {name: d}
spec:
  schedule: "@hourly"
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], resources: [pods]}]}
---
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: v}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "true"}]
---
apiVersion: v1
kind: Pod
metadata: {name: x}
`), "mixed.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs.Policies) != 3 || len(docs.Exceptions) != 1 || len(docs.Bindings) != 1 || len(docs.Others) != 1 || len(docs.DeletingPolicies) != 1 {
		t.Fatalf("got %d policies, %d exceptions, %d bindings, %d others, %d deleting policies",
			len(docs.Policies), len(docs.Exceptions), len(docs.Bindings), len(docs.Others), len(docs.DeletingPolicies))
	}
	docs.Bind()
	if g := docs.Policies[1]; g.Native == nil || g.Native.VAP == nil || len(g.Native.VAPBindings) != 1 || g.Native.VAPBindings[0].Name != "g-binding" {
		t.Fatalf("ValidatingAdmissionPolicy: %+v", g)
	}
	if docs.Policies[0].APIVersion != "verdict.dev/v1" {
		t.Fatalf("apiVersion %s", docs.Policies[0].APIVersion)
	}
	if v := docs.Policies[2]; v.Kind != KindValidatingPolicy || v.VPol == nil || len(v.VPol.Validations) != 1 {
		t.Fatalf("ValidatingPolicy: %+v", v)
	}
}

// A MutatingPolicy without what it cannot do without is refused with
// every problem named.
func TestMutatingPolicyInvalid(t *testing.T) {
	_, err := Parse([]byte(`apiVersion: policies.kyverno.io/v1beta1
kind: NamespacedMutatingPolicy
metadata: {name: m}
spec:
  failurePolicy: Maybe
  reinvocationPolicy: Always
  mutations:
  - patchType: StrategicMerge
  - patchType: JSONPatch
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: " "}
`), "m.yaml")
	for _, want := range []string{
		"metadata.namespace", "spec.matchConstraints.resourceRules",
		`spec.mutations[0].patchType: "StrategicMerge" is not ApplyConfiguration or JSONPatch`,
		"spec.mutations[1].jsonPatch.expression", "spec.mutations[2].applyConfiguration.expression",
		`"Maybe" is not Fail or Ignore`, `"Always" is not Never or IfNeeded`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}

// A ValidatingPolicy without what it cannot do without is refused with
// every problem named.
func TestValidatingPolicyInvalid(t *testing.T) {
	_, err := Parse([]byte(`apiVersion: policies.kyverno.io/v1alpha1
kind: NamespacedValidatingPolicy
metadata: {name: v}
spec:
  validationActions: [Block]
  failurePolicy: Maybe
`), "v.yaml")
	for _, want := range []string{"metadata.namespace", "spec.matchConstraints.resourceRules", "spec.validations", `"Block" is not Deny, Audit or Warn`, `"Maybe" is not Fail or Ignore`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

func TestLegacyPreconditionsList(t *testing.T) {
	docs, err := Parse([]byte(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: r
    match: {resources: {kinds: [Pod]}}
    preconditions:
    - key: "{{ request.operation }}"
      operator: Equals
      value: CREATE
    validate: {pattern: {a: b}}
`), "legacy.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if c := docs.Policies[0].Spec.Rules[0].RawAnyAllConditions; c == nil || len(c.All) != 1 {
		t.Fatalf("legacy preconditions not read as all: %+v", c)
	}
}

// FuzzParse loads arbitrary documents as policies: it must never panic.
func FuzzParse(f *testing.F) {
	f.Add([]byte("apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: p}\nspec: {rules: [{name: r, match: {any: [{resources: {kinds: [Pod]}}]}, validate: {pattern: {a: \"{{ x }}\"}}}]}\n"))
	f.Add([]byte("apiVersion: kyverno.io/v2\nkind: PolicyException\nmetadata: {name: e}\nspec: {exceptions: []}\n"))
	f.Add([]byte("kind: ClusterPolicy\napiVersion: kyverno.io/v1\nspec: {rules: [{preconditions: 3}]}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := Parse(data, "fuzz")
		if err == nil && docs == nil {
			t.Fatal("nil documents without an error")
		}
	})
}

// TestAnchorProblem pins which pattern keys are refused: the engine reads
// anchors with pattern.ParseAnchor, and the check agrees with it.
func TestAnchorProblem(t *testing.T) {
	tests := []struct {
		key    string
		mutate bool
		want   string
	}{
		{key: "name"},
		{key: "(name)"},
		{key: "=(name)"},
		{key: "X(name)"},
		{key: "^(name)"},
		{key: "<(name)"},
		{key: "+(name)", mutate: true},
		{key: " (name) "},
		{key: "a(b)c"},
		{key: "{{ request.object.x }}(y)"},
		{key: "+(name)", want: "only allowed in mutate rules"},
		{key: "(name", want: "invalid anchor"},
		{key: "name)", want: "invalid anchor"},
		{key: "()", want: "invalid anchor"},
		{key: "=()", want: "invalid anchor"},
		{key: "Y(name)", want: "invalid anchor"},
		{key: "( )", want: "has an empty key"},
	}
	for _, tc := range tests {
		got := anchorProblem(tc.key, tc.mutate)
		if (tc.want == "") != (got == "") || !strings.Contains(got, tc.want) {
			t.Errorf("anchorProblem(%q, mutate %v) = %q, want %q", tc.key, tc.mutate, got, tc.want)
		}
	}
}
