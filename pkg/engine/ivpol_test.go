package engine

import (
	"context"
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

// recordingVerifier records the requests of the verification functions
// and verifies every image.
type recordingVerifier struct{ reqs []ImageVerifyRequest }

func (v *recordingVerifier) Verify(_ context.Context, req ImageVerifyRequest) (ImageVerifyResult, error) {
	v.reqs = append(v.reqs, req)
	return ImageVerifyResult{Verified: true}, nil
}

func (v *recordingVerifier) ResolveDigest(context.Context, ImageVerifyRequest) (string, error) {
	return "sha256:" + strings.Repeat("a", 64), nil
}

// TestIVPolTenantCredentials: a NamespacedImageValidatingPolicy's
// verifications carry its namespace as the policy's, so that the
// credentials it names (credentials.secrets) are read in its own
// namespace only (the Credentials of internal/platform confine them so,
// as for a namespaced Policy); a cluster policy's carry none.
func TestIVPolTenantCredentials(t *testing.T) {
	v := &recordingVerifier{}
	e, err := New(WithImageVerifier(v))
	if err != nil {
		t.Fatal(err)
	}
	doc := func(kind, ns string) string {
		return `apiVersion: policies.kyverno.io/v1beta1
kind: ` + kind + `
metadata: {name: signed, namespace: ` + ns + `}
spec:
  validationConfigurations: {verifyDigest: false}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  credentials: {secrets: [regcred]}
  attestors: [{name: k, cosign: {key: {data: PEM}, ctlog: {insecureIgnoreTlog: true}}}]
  validations:
  - expression: "images.containers.all(i, verifyImageSignatures(i, [attestors.k]) > 0)"
`
	}
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "team-a"},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "registry.example/app:v1"}}}}
	for kind, want := range map[string]string{"NamespacedImageValidatingPolicy": "team-a", "ImageValidatingPolicy": ""} {
		v.reqs = nil
		p, err := compileIVPolDoc(t, e, doc(kind, want))
		if err != nil {
			t.Fatal(err)
		}
		resp := e.Check(t.Context(), &Request{Operation: OpCreate, Object: pod}, p, nil)
		if len(resp.Rules) != 1 || resp.Rules[0].Status != StatusPass {
			t.Fatalf("%s: %+v", kind, resp.Rules)
		}
		if len(v.reqs) != 1 {
			t.Fatalf("%s: %d verifications", kind, len(v.reqs))
		}
		r := v.reqs[0]
		if r.PolicyNamespace != want || r.Namespace != "team-a" || r.Verification.ImageRegistryCredentials == nil ||
			strings.Join(r.Verification.ImageRegistryCredentials.Secrets, ",") != "regcred" {
			t.Errorf("%s: policy namespace %q, namespace %q, credentials %+v", kind, r.PolicyNamespace, r.Namespace, r.Verification.ImageRegistryCredentials)
		}
	}
}
