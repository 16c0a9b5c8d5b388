package engine_test

import (
	"context"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// FuzzCELPolicy loads arbitrary documents as CEL policies (every kind of
// policies.kyverno.io the engine evaluates, and the Kubernetes admission
// policies with their bindings; an ImageValidatingPolicy
// without an image verifier, so that its verifications are errors),
// compiles them and applies what compiles to a Pod and a Deployment: loading and compiling never
// panic, and an evaluation never outlives its bounds (the cost limits,
// and the context it is given).
func FuzzCELPolicy(f *testing.F) {
	for _, seed := range []string{vpolYAML, mpolYAML, `apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata: {name: g}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  variables: [{name: cm, expression: '[{"kind": dyn("ConfigMap"), "apiVersion": dyn("v1"), "metadata": dyn({"name": "x"})}]'}]
  generate: [{expression: 'generator.Apply(object.metadata.namespace, variables.cm)'}]
`, `apiVersion: policies.kyverno.io/v1
kind: DeletingPolicy
metadata: {name: d}
spec:
  schedule: "*/5 * * * *"
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], resources: [pods]}]}
  conditions: [{name: old, expression: "object.metadata.name.startsWith('a')"}]
`, `apiVersion: policies.kyverno.io/v1
kind: ImageValidatingPolicy
metadata: {name: iv}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  matchImageReferences: [{glob: "docker.io/*"}, {expression: "imageRef.contains('nginx')"}]
  images: [{name: extra, expression: "[object.metadata.name]"}]
  attestors: [{name: k, cosign: {key: {expression: "'pem'"}}}]
  attestations: [{name: s, intoto: {type: "https://slsa.dev/provenance/v0.2"}}]
  validations: [{expression: "images.containers.all(i, verifyImageSignatures(i, [attestors.k]) > 0)"}]
`, `apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: loop}
spec:
  matchConstraints: {resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*"]}]}
  validations: [{expression: "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, a+b+c+d > 0))))"}]
`, replicasVAP + `---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: b}
spec: {policyName: max-replicas, validationActions: [Deny], paramRef: {name: limits}, matchResources: {namespaceSelector: {matchLabels: {a: b}}}}
`, labelMAP} {
		f.Add([]byte(seed))
	}
	eng, err := engine.New()
	if err != nil {
		f.Fatal(err)
	}
	pod := obj(f, `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {team: a}}, spec: {containers: [{name: c, image: nginx}]}}`)
	deploy := obj(f, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: x}, spec: {template: {spec: {containers: [{name: c, image: nginx}]}}}}`)
	f.Fuzz(func(t *testing.T, data []byte) {
		docs, err := policy.Parse(data, "fuzz")
		if err != nil {
			return
		}
		docs.Bind()
		var set engine.Set
		for _, p := range docs.Policies {
			if !policy.IsCELPolicyKind(p.Kind) && p.Native == nil {
				continue
			}
			cp, err := eng.Compile(p)
			if err != nil {
				continue
			}
			set.Policies = append(set.Policies, cp)
		}
		for _, d := range docs.DeletingPolicies {
			if cp, err := eng.CompileCleanup(d); err == nil {
				_ = cp.Kinds()
			}
		}
		for _, o := range []map[string]any{pod, deploy} {
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			start := time.Now()
			eng.Apply(ctx, &engine.Request{Operation: engine.OpCreate, Object: o}, &set)
			cancel()
			if d := time.Since(start); d > 10*time.Second {
				t.Fatalf("an evaluation took %s", d)
			}
		}
	})
}
