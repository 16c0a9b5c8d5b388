package engine

import (
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine/celeval"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

func compileIVPolDoc(t *testing.T, e *Engine, doc string) (*Policy, error) {
	t.Helper()
	docs, err := policy.Parse([]byte(doc), "test")
	if err != nil {
		return nil, err
	}
	if len(docs.Policies) != 1 {
		t.Fatalf("%d policies", len(docs.Policies))
	}
	return e.Compile(docs.Policies[0])
}

// TestIVPolJSONPayloads: an ImageValidatingPolicy in JSON mode reads its
// images from the payload (spec.images), selects them by a CEL
// matchImageReferences expression and fails verifyDigest on the first
// selected image without a digest; no registry is needed for that, and
// none is called.
func TestIVPolJSONPayloads(t *testing.T) {
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	p, err := compileIVPolDoc(t, e, `apiVersion: policies.kyverno.io/v1
kind: ImageValidatingPolicy
metadata: {name: payload}
spec:
  evaluation: {mode: JSON}
  validationConfigurations: {required: false}
  matchImageReferences:
  - expression: "imageRef.startsWith('ghcr.io/')"
  images:
  - {name: bar, expression: "object.images"}
  validations:
  - expression: "size(images.bar) > 0"
    message: no image selected
`)
	if err != nil {
		t.Fatal(err)
	}
	digest := "ghcr.io/org/app@sha256:" + strings.Repeat("a", 64)
	for name, tc := range map[string]struct {
		images []any
		status Status
		msg    string
	}{
		"pinned":               {[]any{digest, "docker.io/other:v1"}, StatusPass, "success"},
		"by tag":               {[]any{digest, "ghcr.io/org/app:v1"}, StatusFail, "image ghcr.io/org/app:v1 does not have a digest"},
		"none selected":        {[]any{"docker.io/other:v1"}, StatusFail, "no image selected"},
		"not a list of images": {[]any{1.0}, StatusError, "error: images bar: the expression gave a float64 in its list, not a string"},
	} {
		req := &Request{JSON: true, Object: map[string]any{"images": tc.images}}
		resp := e.Check(t.Context(), req, p, nil)
		if len(resp.Rules) != 1 || resp.Rules[0].Status != tc.status || resp.Rules[0].Message != tc.msg {
			t.Errorf("%s: %+v, want %s %q", name, resp.Rules, tc.status, tc.msg)
		}
	}
}

// TestIVPolCompileErrors: an ImageValidatingPolicy whose expressions do
// not compile is refused with every problem named by its path; the
// verification functions exist only in its environment.
func TestIVPolCompileErrors(t *testing.T) {
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	_, err = compileIVPolDoc(t, e, `apiVersion: policies.kyverno.io/v1
kind: ImageValidatingPolicy
metadata: {name: broken}
spec:
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  matchImageReferences:
  - expression: "imageRef + 1"
  attestors:
  - {name: a, notary: {certs: {expression: "42"}}}
  validations:
  - expression: "verifyImageSignatures('x')"
`)
	if err == nil {
		t.Fatal("compiled")
	}
	for _, want := range []string{"spec.matchImageReferences[0].expression", "spec.attestors[0].notary.certs.expression", "spec.validations[0].expression"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := celeval.Compile("verifyImageSignatures('x', [])", celeval.Any); err == nil {
		t.Error("verifyImageSignatures compiles outside an ImageValidatingPolicy")
	}
	_, err = compileIVPolDoc(t, e, `apiVersion: policies.kyverno.io/v1
kind: ImageValidatingPolicy
metadata: {name: invalid}
spec:
  validationActions: [Block]
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  matchImageReferences: [{}]
  attestors:
  - {name: a}
  - {name: a, cosign: {key: {data: x, kms: y}}}
  attestations: [{name: s}]
  validations: [{expression: "true"}]
`)
	for _, want := range []string{"spec.validationActions[0]", "spec.matchImageReferences[0]", "spec.attestors[0]: ", "attestor \"a\" is declared twice", "spec.attestors[1].cosign.key", "spec.attestations[0]"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not name %s", err, want)
		}
	}
}
