package imageverify_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/imageverify"
)

// ivpol parses and compiles an ImageValidatingPolicy given as YAML.
func ivpol(t *testing.T, eng *engine.Engine, doc string) *engine.Policy {
	t.Helper()
	docs, err := policy.Parse([]byte(doc), "test")
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	if len(docs.Policies) != 1 {
		t.Fatalf("%d policies, want 1", len(docs.Policies))
	}
	p, err := eng.Compile(docs.Policies[0])
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return p
}

// registryEngine is an engine whose verifier reads reg (one try per
// request: a failure shows at once).
func registryEngine(t *testing.T, reg *ocitest.Registry) *engine.Engine {
	t.Helper()
	v, err := imageverify.New(imageverify.WithRemoteOptions(append(reg.RemoteOptions(), remote.WithRetryBackoff(remote.Backoff{Steps: 1}))...))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.WithImageVerifier(v))
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

func indent(s string, n int) string {
	pad := strings.Repeat(" ", n)
	return pad + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+pad)
}

// check runs the validating half (Check) on a Pod and returns the
// policy's one result.
func check(t *testing.T, eng *engine.Engine, p *engine.Policy, req *engine.Request) engine.RuleResponse {
	t.Helper()
	resp := eng.Check(t.Context(), req, p, nil)
	if len(resp.Rules) != 1 {
		t.Fatalf("%d results, want 1: %+v", len(resp.Rules), resp.Rules)
	}
	return resp.Rules[0]
}

// TestImageValidatingPolicy evaluates ImageValidatingPolicies through the
// engine with the real verifier and a registry in the test process:
// cosign signatures by key and in-toto attestations read with
// extractPayload, Notary signatures and a signed referrer, the digest
// mutation, verifyDigest, required, matchImageReferences, autogen, and
// Kyverno's messages.
func TestImageValidatingPolicy(t *testing.T) {
	const provenance = "https://slsa.dev/provenance/v0.2"
	reg := ocitest.NewRegistry(t)
	key := ocitest.NewKey(t)
	eng := registryEngine(t, reg)
	signed := reg.PushImage(t, "trusted/app", "v1")
	reg.Sign(t, signed.Ref, key)
	reg.Attest(t, signed.Ref, key, provenance, map[string]any{"builder": map[string]any{"id": "https://builder.example/trusted"}})
	unsigned := reg.PushImage(t, "trusted/unsigned", "v1")
	other := reg.PushImage(t, "other/tool", "v1")

	p := ivpol(t, eng, fmt.Sprintf(`
apiVersion: policies.kyverno.io/v1
kind: ImageValidatingPolicy
metadata: {name: signed}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  matchImageReferences:
  - glob: "%s/trusted/*"
  attestors:
  - name: ours
    cosign:
      key:
        data: |
%s
      ctlog: {insecureIgnoreTlog: true, insecureIgnoreSCT: true}
  attestations:
  - name: prov
    intoto: {type: %s}
  validations:
  - expression: images.containers.map(i, verifyImageSignatures(i, [attestors.ours])).all(n, n > 0)
    message: not signed by our key
  - expression: >-
      images.containers.all(i, verifyAttestationSignatures(i, attestations.prov, [attestors.ours]) > 0 &&
      extractPayload(i, attestations.prov).predicate.builder.id == 'https://builder.example/trusted')
    messageExpression: "'not built by our builder: ' + images.containers.join(', ')"
`, reg.Host(), indent(key.PublicKeyPEM(), 10), provenance))

	pinned := signed.Tag + "@" + signed.Digest
	// The mutating webhook's half: the image pinned to its digest.
	resp := eng.VerifyImages(t.Context(), &engine.Request{Operation: engine.OpCreate, Object: pod(signed.Tag)}, p, nil)
	if len(resp.Rules) != 0 {
		t.Errorf("the digest mutation reported %+v, want nothing", resp.Rules)
	}
	if got := containerImage(resp.Patched, "spec", "containers"); got != pinned {
		t.Fatalf("mutateDigest: %q, want %q", got, pinned)
	}
	// The validating webhook's half, on the pinned image.
	if rr := check(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: pod(pinned)}); rr.Status != engine.StatusPass || !rr.Enforce || rr.Message != "success" {
		t.Errorf("signed, pinned: %s enforce=%v %q", rr.Status, rr.Enforce, rr.Message)
	}
	for name, tc := range map[string]struct {
		obj    map[string]any
		status engine.Status
		want   string
	}{
		"by tag (verifyDigest)": {pod(signed.Tag), engine.StatusFail, "image " + signed.Tag + " does not have a digest"},
		"unsigned":              {pod(unsigned.Tag + "@" + unsigned.Digest), engine.StatusFail, "not signed by our key"},
	} {
		if rr := check(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: tc.obj}); rr.Status != tc.status || rr.Message != tc.want {
			t.Errorf("%s: %s %q, want %s %q", name, rr.Status, rr.Message, tc.status, tc.want)
		}
	}
	// Signed and attested as cosign v3 does by default: Sigstore bundles.
	v3 := reg.PushImage(t, "trusted/v3", "v1")
	reg.SignBundle(t, v3.Ref, key)
	reg.AttestBundle(t, v3.Ref, key, provenance, map[string]any{"builder": map[string]any{"id": "https://builder.example/trusted"}})
	if rr := check(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: pod(v3.Tag + "@" + v3.Digest)}); rr.Status != engine.StatusPass {
		t.Errorf("signed and attested in bundles: %s %q", rr.Status, rr.Message)
	}
	// Images matchImageReferences does not select are not checked: no
	// verification, no digest required, no required failure.
	if rr := check(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: pod(other.Tag)}); rr.Status != engine.StatusPass {
		t.Errorf("an image the policy does not select: %s %q", rr.Status, rr.Message)
	}
	resp = eng.VerifyImages(t.Context(), &engine.Request{Operation: engine.OpCreate, Object: pod(other.Tag)}, p, nil)
	if got := containerImage(resp.Patched, "spec", "containers"); got != other.Tag {
		t.Errorf("an image the policy does not select was pinned: %q", got)
	}
	// Autogen: a Deployment's template.
	deploy := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "d", "namespace": "team"},
		"spec": map[string]any{"template": map[string]any{"spec": pod(unsigned.Tag + "@" + unsigned.Digest)["spec"]}}}
	if rr := check(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: deploy}); rr.Status != engine.StatusFail || rr.Message != "not signed by our key" || !rr.Enforce {
		t.Errorf("a Deployment of an unsigned image: %s %q", rr.Status, rr.Message)
	}
}

// TestImageValidatingPolicyRequired: an image the policy selects but no
// verification of the request passed fails required, with Kyverno's
// messages; a policy with required false, or one of the request's
// policies verifying the image first, lets it through.
func TestImageValidatingPolicyRequired(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	key := ocitest.NewKey(t)
	eng := registryEngine(t, reg)
	signed := reg.PushImage(t, "trusted/app", "v1")
	reg.Sign(t, signed.Ref, key)
	pinned := signed.Tag + "@" + signed.Digest
	unsigned := reg.PushImage(t, "trusted/unsigned", "v1")
	unpinned := unsigned.Tag + "@" + unsigned.Digest

	policyDoc := func(name, required, validation string) string {
		return fmt.Sprintf(`
apiVersion: policies.kyverno.io/v1beta1
kind: ImageValidatingPolicy
metadata: {name: %s}
spec:
  validationConfigurations: {required: %s, mutateDigest: false}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  attestors:
  - name: ours
    cosign:
      key:
        data: |
%s
      ctlog: {insecureIgnoreTlog: true}
  validations:
  - expression: "%s"
`, name, required, indent(key.PublicKeyPEM(), 10), validation)
	}
	catchAll := ivpol(t, eng, policyDoc("catch-all", "true", "'true' == 'true'"))
	verifier := ivpol(t, eng, policyDoc("verifier", "false", "images.containers.all(i, verifyImageSignatures(i, [attestors.ours]) >= 0)"))
	lenient := ivpol(t, eng, policyDoc("lenient", "false", "'true' == 'true'"))

	if rr := check(t, eng, catchAll, &engine.Request{Operation: engine.OpCreate, Object: pod(pinned)}); rr.Status != engine.StatusFail ||
		rr.Message != "image "+pinned+" is not verified: no policy performed a signature or attestation check on it" {
		t.Errorf("no verification: %s %q", rr.Status, rr.Message)
	}
	if rr := check(t, eng, lenient, &engine.Request{Operation: engine.OpCreate, Object: pod(pinned)}); rr.Status != engine.StatusPass {
		t.Errorf("required false: %s %q", rr.Status, rr.Message)
	}
	// The catch-all goes after the policies that verify, whatever their
	// names.
	order := []*engine.Policy{catchAll, lenient, verifier}
	engine.OrderForImageEvidence(order)
	if order[0] != lenient || order[1] != verifier || order[2] != catchAll {
		t.Errorf("order %s, %s, %s; want lenient, verifier, catch-all", order[0].Name(), order[1].Name(), order[2].Name())
	}
	// One request, two policies: the verifier's verification is the
	// catch-all's evidence.
	for img, want := range map[string]string{
		pinned:   "",
		unpinned: "image " + unpinned + " failed signature or attestation verification",
	} {
		req := &engine.Request{Operation: engine.OpCreate, Object: pod(img)}
		if rr := check(t, eng, verifier, req); rr.Status != engine.StatusPass {
			t.Errorf("%s, verifier: %s %q", img, rr.Status, rr.Message)
		}
		rr := check(t, eng, catchAll, req)
		if want == "" && rr.Status != engine.StatusPass || want != "" && (rr.Status != engine.StatusFail || rr.Message != want) {
			t.Errorf("%s, catch-all after the verifier: %s %q, want %q", img, rr.Status, rr.Message, want)
		}
	}
}

// TestImageValidatingPolicyNotary verifies Notary signatures and a
// signed referrer (an SBOM) read with extractPayload; an unsigned
// referrer beside it is never the payload.
func TestImageValidatingPolicyNotary(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	ca := ocitest.NewCA(t, ocitest.WithIntermediate())
	eng := registryEngine(t, reg)
	img := reg.PushImage(t, "team/app", "v1")
	reg.SignNotary(t, img.Tag, ca.Issue(t, ocitest.Identity{Email: "dev@example.com"}))
	reg.PushReferrer(t, img.Ref, "sbom/cyclone-dx", []byte(`{"bomFormat":"forged"}`))
	sbom := reg.PushReferrer(t, img.Ref, "sbom/cyclone-dx", []byte(`{"bomFormat":"CycloneDX","specVersion":"1.5"}`))
	reg.SignNotary(t, sbom, ca.Issue(t, ocitest.Identity{Email: "dev@example.com"}))
	bare := reg.PushImage(t, "team/bare", "v1")
	reg.SignNotary(t, bare.Tag, ca.Issue(t, ocitest.Identity{Email: "dev@example.com"}))

	p := ivpol(t, eng, fmt.Sprintf(`
apiVersion: policies.kyverno.io/v1alpha1
kind: ImageValidatingPolicy
metadata: {name: notary}
spec:
  validationConfigurations: {verifyDigest: false}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  matchImageReferences:
  - expression: imageRef.startsWith('%s/team/')
  attestors:
  - name: notary
    notary:
      certs:
        value: |
%s
  attestations:
  - name: sbom
    referrer: {type: sbom/cyclone-dx}
  validations:
  - expression: images.containers.map(i, verifyImageSignatures(i, [attestors.notary])).all(n, n > 0)
    message: failed to verify image with notary cert
  - expression: images.containers.map(i, verifyAttestationSignatures(i, attestations.sbom, [attestors.notary])).all(n, n > 0)
    message: failed to verify attestation with notary cert
  - expression: images.containers.map(i, extractPayload(i, attestations.sbom).bomFormat == 'CycloneDX').all(e, e)
    message: sbom is not a cyclone-dx sbom
`, reg.Host(), indent(ca.RootsPEM(), 10)))
	if rr := check(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: pod(img.Tag)}); rr.Status != engine.StatusPass {
		t.Errorf("signed with a signed SBOM: %s %q", rr.Status, rr.Message)
	}
	if rr := check(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: pod(bare.Tag)}); rr.Status != engine.StatusFail || rr.Message != "failed to verify attestation with notary cert" {
		t.Errorf("signed, no SBOM: %s %q", rr.Status, rr.Message)
	}
}
