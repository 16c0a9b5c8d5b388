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

// kindLister is a memLister that also tells kinds from resource names,
// as resource.Get and resource.List need.
type kindLister struct{ memLister }

func (kindLister) KindFor(_ context.Context, _, resource string) (string, error) {
	switch resource {
	case "secrets":
		return "Secret", nil
	case "configmaps":
		return "ConfigMap", nil
	}
	return "", engine.ErrNotFound
}

// gpolYAML generates a ConfigMap, and a copy of the default
// namespace's regcred Secret, into every Namespace not labelled
// skip: "true".
const gpolYAML = `apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata: {name: gp}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [namespaces]
  matchConditions:
  - name: not-skipped
    expression: "object.metadata.?labels[?'skip'].orValue('') != 'true'"
  variables:
  - name: ns
    expression: object.metadata.name
  - name: source
    expression: resource.Get("v1", "secrets", "default", "regcred")
  generate:
  - expression: >
      generator.Apply(variables.ns, [{"apiVersion": dyn("v1"), "kind": dyn("ConfigMap"),
        "metadata": dyn({"name": dyn("settings"), "labels": dyn({"team": variables.ns})}), "data": dyn({"a": "b"})}])
  - expression: generator.apply(variables.ns, [variables.source])
`

func gpolRun(t *testing.T, eng *engine.Engine, p *engine.Policy, o map[string]any) (engine.RuleResponse, bool) {
	t.Helper()
	resps, _ := eng.Apply(t.Context(), &engine.Request{Operation: engine.OpCreate, Object: o}, &engine.Set{Policies: []*engine.Policy{p}})
	for _, r := range resps {
		if len(r.Rules) > 0 {
			return r.Rules[0], true
		}
	}
	return engine.RuleResponse{}, false
}

func gpolLister(t *testing.T) kindLister {
	return kindLister{memLister{
		obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: regcred, namespace: default, uid: u1, resourceVersion: "7",
		  creationTimestamp: "2024-01-01T00:00:00Z", ownerReferences: [{uid: o1}], annotations: {a: b}}, type: Opaque, data: {k: dg==}}`),
		obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: other, namespace: default}, data: {x: eQ==}}`),
	}}
}

// The data a generate entry builds and the resource it clones are
// generated in the namespace generator.Apply names, the clone without
// what the API server owns and the owner references of its namespace.
func TestGeneratingPolicy(t *testing.T) {
	lister := gpolLister(t)
	eng := newEngine(t, engine.WithResourceLister(lister))
	p := compile(t, eng, gpolYAML)
	rr, ok := gpolRun(t, eng, p, obj(t, `{apiVersion: v1, kind: Namespace, metadata: {name: team-a}}`))
	if !ok || rr.Status != engine.StatusPass || rr.Type != engine.TypeGeneration || rr.Name != "gp" || rr.Message != "policy evaluated successfully" {
		t.Fatalf("%v %s %s %s %q", ok, rr.Name, rr.Type, rr.Status, rr.Message)
	}
	want := []map[string]any{
		obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: settings, namespace: team-a, labels: {team: team-a}}, data: {a: b}}`),
		obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: regcred, namespace: team-a, annotations: {a: b}}, type: Opaque, data: {k: dg==}}`),
	}
	if len(rr.Generated) != len(want) {
		t.Fatalf("generated %v", rr.Generated)
	}
	for i := range want {
		if !document.Equal(rr.Generated[i], want[i]) {
			t.Errorf("generated[%d]:\n%v\nwant\n%v", i, rr.Generated[i], want[i])
		}
	}
	if document.String(lister.memLister[0], "metadata", "uid") != "u1" || document.String(lister.memLister[0], "metadata", "namespace") != "default" {
		t.Fatalf("the clone source was modified: %v", lister.memLister[0])
	}

	// A false match condition: no result, as Kyverno gives none, and
	// nothing generated.
	if rr, ok := gpolRun(t, eng, p, obj(t, `{apiVersion: v1, kind: Namespace, metadata: {name: b, labels: {skip: "true"}}}`)); ok {
		t.Fatalf("skipped namespace: %s %q, %d generated", rr.Status, rr.Message, len(rr.Generated))
	}
	// A resource the constraints do not select: no result either.
	if _, ok := gpolRun(t, eng, p, obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: x}}`)); ok {
		t.Fatal("a ConfigMap matched")
	}
}

// A List (resource.List's result) generates its items; a resource in its
// own namespace keeps its owner references.
func TestGeneratingPolicyList(t *testing.T) {
	eng := newEngine(t, engine.WithResourceLister(gpolLister(t)))
	p := compile(t, eng, strings.Replace(gpolYAML, `generator.apply(variables.ns, [variables.source])`,
		`generator.apply(variables.ns, [resource.List("v1", "secrets", "default"), resource.List("v1", "configmaps", "default")])`, 1))
	rr, _ := gpolRun(t, eng, p, obj(t, `{apiVersion: v1, kind: Namespace, metadata: {name: default}}`))
	if rr.Status != engine.StatusPass || len(rr.Generated) != 3 {
		t.Fatalf("%s %q: %v", rr.Status, rr.Message, rr.Generated)
	}
	got := []string{}
	for _, g := range rr.Generated[1:] {
		got = append(got, document.String(g, "metadata", "namespace")+"/"+document.String(g, "metadata", "name"))
	}
	if strings.Join(got, ",") != "default/regcred,default/other" {
		t.Fatalf("generated %v", got)
	}
	if refs, _ := document.Map(rr.Generated[1], "metadata")["ownerReferences"].([]any); len(refs) != 1 {
		t.Fatalf("owner references in the same namespace were dropped: %v", rr.Generated[1])
	}
}

// An expression that ends in an error makes the result an error, and
// nothing is generated, not even by the entries before it.
func TestGeneratingPolicyError(t *testing.T) {
	eng := newEngine(t, engine.WithResourceLister(gpolLister(t)))
	p := compile(t, eng, gpolYAML+"  - expression: 'generator.apply(variables.ns, [{\"kind\": object.metadata.uid}])'\n")
	rr, _ := gpolRun(t, eng, p, obj(t, `{apiVersion: v1, kind: Namespace, metadata: {name: team-a}}`))
	if rr.Status != engine.StatusError || rr.Message != "failed to evaluate policy: no such key: uid" || len(rr.Generated) != 0 {
		t.Fatalf("%s %q, %d generated", rr.Status, rr.Message, len(rr.Generated))
	}
	// Without the Secret to clone, resource.Get is null, which
	// generator.Apply does not take.
	eng = newEngine(t, engine.WithResourceLister(kindLister{}))
	p = compile(t, eng, gpolYAML)
	rr, _ = gpolRun(t, eng, p, obj(t, `{apiVersion: v1, kind: Namespace, metadata: {name: team-a}}`))
	if rr.Status != engine.StatusError || !strings.HasPrefix(rr.Message, "failed to evaluate policy: no such overload") || len(rr.Generated) != 0 {
		t.Fatalf("no source: %s %q, %d generated", rr.Status, rr.Message, len(rr.Generated))
	}
}

// A PolicyException naming the policy exempts what its conditions
// select: a skip naming it, nothing generated.
func TestGeneratingPolicyException(t *testing.T) {
	eng := newEngine(t, engine.WithResourceLister(gpolLister(t)))
	p := compile(t, eng, gpolYAML)
	docs, err := policy.Parse([]byte(`apiVersion: policies.kyverno.io/v1beta1
kind: PolicyException
metadata: {name: not-testing}
spec:
  policyRefs: [{name: gp, kind: GeneratingPolicy}]
  matchConditions: [{name: testing, expression: "object.metadata.name == 'testing'"}]
`), "exc")
	if err != nil {
		t.Fatal(err)
	}
	p, err = eng.WithCELExceptions(p, docs.CELExceptions)
	if err != nil {
		t.Fatal(err)
	}
	rr, _ := gpolRun(t, eng, p, obj(t, `{apiVersion: v1, kind: Namespace, metadata: {name: testing}}`))
	if rr.Status != engine.StatusSkip || rr.Exception != "not-testing" || rr.Message != "rule is skipped due to policy exception: not-testing" || len(rr.Generated) != 0 {
		t.Fatalf("exempted: %s %q %q, %d generated", rr.Status, rr.Message, rr.Exception, len(rr.Generated))
	}
	if rr, _ := gpolRun(t, eng, p, obj(t, `{apiVersion: v1, kind: Namespace, metadata: {name: prod}}`)); rr.Status != engine.StatusPass || len(rr.Generated) != 2 {
		t.Fatalf("not exempted: %s %q", rr.Status, rr.Message)
	}
}

// A NamespacedGeneratingPolicy applies in its namespace and generates
// there with generator.Apply(list); its templates cannot leave it.
func TestNamespacedGeneratingPolicy(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, `apiVersion: policies.kyverno.io/v1beta1
kind: NamespacedGeneratingPolicy
metadata: {name: np, namespace: apps}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  generate:
  - expression: >
      generator.Apply([{"apiVersion": dyn("v1"), "kind": dyn("ConfigMap"), "metadata": dyn({"name": object.metadata.name + "-cm"})}])
  - template:
      interpolate: cel
      value: |
        apiVersion: v1
        kind: ConfigMap
        metadata:
          name: (( object.metadata.name ))-t
          labels: '(( {"replicas": string(object.spec.replicas)} ))'
        data:
          text: 'n=(( object.spec.replicas )) \((x))'
`)
	rr, ok := gpolRun(t, eng, p, obj(t, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web, namespace: apps}, spec: {replicas: 2}}`))
	if !ok || rr.Status != engine.StatusPass || len(rr.Generated) != 2 {
		t.Fatalf("%v %s %q: %v", ok, rr.Status, rr.Message, rr.Generated)
	}
	want := []map[string]any{
		obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: web-cm, namespace: apps}}`),
		obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: web-t, namespace: apps, labels: {replicas: "2"}}, data: {text: "n=2 ((x))"}}`),
	}
	for i := range want {
		if !document.Equal(rr.Generated[i], want[i]) {
			t.Errorf("generated[%d]:\n%v\nwant\n%v", i, rr.Generated[i], want[i])
		}
	}
	if _, ok := gpolRun(t, eng, p, obj(t, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web, namespace: other}, spec: {replicas: 2}}`)); ok {
		t.Fatal("a policy of namespace apps applied in namespace other")
	}
	cross := compile(t, eng, `apiVersion: policies.kyverno.io/v1beta1
kind: NamespacedGeneratingPolicy
metadata: {name: np, namespace: apps}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}]
  generate:
  - template: {value: "{apiVersion: v1, kind: ConfigMap, metadata: {name: x, namespace: kube-system}}"}
`)
	if rr, _ := gpolRun(t, eng, cross, obj(t, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web, namespace: apps}}`)); rr.Status != engine.StatusError ||
		!strings.Contains(rr.Message, "cross-namespace generation denied") || len(rr.Generated) != 0 {
		t.Fatalf("cross-namespace: %s %q", rr.Status, rr.Message)
	}
}

// Compile errors name the expression's path; a cluster-wide policy
// cannot use the namespaced policy's generator.Apply(list).
func TestGeneratingPolicyCompileErrors(t *testing.T) {
	eng := newEngine(t)
	for _, c := range []struct{ from, to, path string }{
		{"expression: resource.Get(", "expression: resource.Nope(", "spec.variables[1].expression: "},
		{"expression: generator.apply(variables.ns, [variables.source])", "expression: generator.apply([variables.source])", "spec.generate[1].expression: "},
		{"expression: \"object.metadata", "expression: \"1 + object.metadata", "spec.matchConditions[0].expression: "},
		{"  - expression: generator.apply(variables.ns, [variables.source])\n", "  - template: {interpolate: cel, value: \"a: ((nope(1)))\"}\n", "spec.generate[1].template.value: line 1: placeholder \"nope(1)\": "},
	} {
		y := strings.Replace(gpolYAML, c.from, c.to, 1)
		if y == gpolYAML {
			t.Fatalf("%s: not replaced", c.path)
		}
		docs, err := policy.Parse([]byte(y), "test")
		if err != nil {
			t.Fatal(err)
		}
		_, err = eng.Compile(docs.Policies[0])
		if err == nil || !strings.Contains(err.Error(), c.path) {
			t.Errorf("want an error at %s, got %v", c.path, err)
		}
	}
}

// A generate expression that would run for ever is stopped by the cost
// limit: an error result, quickly, never a stalled request.
func TestGeneratingPolicyCostLimit(t *testing.T) {
	eng := newEngine(t, engine.WithResourceLister(gpolLister(t)))
	ten := "[1,2,3,4,5,6,7,8,9,10]"
	p := compile(t, eng, gpolYAML+"  - expression: size("+ten+".map(a, "+ten+".map(b, "+ten+".map(c, "+ten+".map(d, "+ten+".map(e, "+ten+".map(f, a+b+c+d+e+f))))))) > 0\n")
	start := time.Now()
	rr, _ := gpolRun(t, eng, p, obj(t, `{apiVersion: v1, kind: Namespace, metadata: {name: team-a}}`))
	if rr.Status != engine.StatusError || !strings.Contains(rr.Message, "cost") || len(rr.Generated) != 0 {
		t.Fatalf("%s %q", rr.Status, rr.Message)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %s", d)
	}
}
