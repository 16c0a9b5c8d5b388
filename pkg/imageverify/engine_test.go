package imageverify_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// imagePolicy is a ClusterPolicy with one verifyImages rule on Pods (and,
// through autogen, their controllers), entries given as JSON.
func imagePolicy(t *testing.T, eng *engine.Engine, action, key string, entries ...string) *engine.Policy {
	t.Helper()
	doc := fmt.Sprintf(`{"apiVersion":"kyverno.io/v1","kind":"ClusterPolicy","metadata":{"name":"images"},
"spec":{"validationFailureAction":%q,"webhookTimeoutSeconds":30,"rules":[{"name":"signed",
"match":{"any":[{"resources":{"kinds":["Pod"]}}]},
"context":[{"name":"key","variable":{"value":%s}}],
"verifyImages":[%s]}]}}`, action, quote(key), strings.Join(entries, ","))
	docs, err := policy.Parse([]byte(doc), "test")
	if err != nil {
		t.Fatalf("policy: %v", err)
	}
	p, err := eng.Compile(docs.Policies[0])
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return p
}

func pod(images ...string) map[string]any {
	var cs []any
	for i, img := range images {
		cs = append(cs, map[string]any{"name": fmt.Sprintf("c%d", i), "image": img})
	}
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "team"}, "spec": map[string]any{"containers": cs}}
}

// verifyPod runs the policy on obj and returns its one rule response and
// the resource as the rule left it.
func verifyPod(t *testing.T, eng *engine.Engine, p *engine.Policy, obj map[string]any) (engine.RuleResponse, map[string]any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	resp := eng.VerifyImages(ctx, &engine.Request{Operation: engine.OpCreate, Object: obj}, p, nil)
	if len(resp.Rules) != 1 {
		t.Fatalf("%d rule responses, want 1: %+v", len(resp.Rules), resp.Rules)
	}
	return resp.Rules[0], resp.Patched
}

func containerImage(obj map[string]any, path ...string) string {
	v, _ := document.Get(obj, path...)
	cs, _ := v.([]any)
	if len(cs) == 0 {
		return ""
	}
	return document.String(cs[0].(map[string]any), "image")
}

// TestEngineVerifiesImages evaluates verifyImages rules through the
// engine with the real verifier and a registry in the test: a signed
// image by tag passes and is pinned to its digest (mutateDigest), the
// validation half (verifyDigest, required) passing on the pinned image;
// an unsigned one fails with the verifier's message, enforced; an image
// skipImageReferences names is skipped and still pinned; a Deployment is
// checked through autogen; a registry that cannot be reached is an error.
func TestEngineVerifiesImages(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	key := ocitest.NewKey(t)
	signed := reg.PushImage(t, "trusted/app", "v1")
	reg.Sign(t, signed.Ref, key)
	unsigned := reg.PushImage(t, "trusted/unsigned", "v1")
	other := reg.PushImage(t, "other/tool", "v1")
	eng := registryEngine(t, reg)
	// The key from the rule's context: variables are substituted in the
	// entry.
	keys := `{"imageReferences":["` + reg.Host() + `/trusted/*"],"skipImageReferences":["*/trusted/skipped*"],"attestors":[{"entries":[{"keys":{"publicKeys":"{{ key }}",` +
		`"rekor":{"url":"https://rekor.example","ignoreTlog":true},"ctlog":{"ignoreSCT":true}}}]}]}`
	p := imagePolicy(t, eng, "Enforce", key.PublicKeyPEM(), keys)

	rr, patched := verifyPod(t, eng, p, pod(signed.Tag))
	if rr.Status != engine.StatusPass || rr.Message != "verified image signatures for "+signed.Tag {
		t.Fatalf("signed image: %s %q", rr.Status, rr.Message)
	}
	if got, want := containerImage(patched, "spec", "containers"), signed.Tag+"@"+signed.Digest; got != want {
		t.Errorf("signed image pinned to %q, want %q", got, want)
	}

	rr, patched = verifyPod(t, eng, p, pod(unsigned.Tag))
	if rr.Status != engine.StatusFail || !rr.Enforce || !strings.HasPrefix(rr.Message, "failed to verify image "+unsigned.Tag+": .attestors[0].entries[0].keys: ") {
		t.Fatalf("unsigned image: %s enforce=%v %q", rr.Status, rr.Enforce, rr.Message)
	}
	if got := containerImage(patched, "spec", "containers"); got != unsigned.Tag {
		t.Errorf("an image that failed was changed to %q", got)
	}

	// Images no entry names are not the rule's: no response at all.
	resp := eng.VerifyImages(t.Context(), &engine.Request{Operation: engine.OpCreate, Object: pod(other.Tag)}, p, nil)
	if len(resp.Rules) != 0 {
		t.Errorf("an image no entry names: %+v, want no response", resp.Rules)
	}

	skipped := reg.PushImage(t, "trusted/skipped", "v1")
	rr, patched = verifyPod(t, eng, p, pod(skipped.Tag))
	if want := engine.ImageSkipMessage(skipped.Tag, "images", "signed"); rr.Status != engine.StatusSkip || rr.Message != want {
		t.Errorf("skipped image: %s %q, want skip %q", rr.Status, rr.Message, want)
	}
	if got, want := containerImage(patched, "spec", "containers"), skipped.Tag+"@"+skipped.Digest; got != want {
		t.Errorf("skipped image pinned to %q, want %q (Kyverno pins skipped images)", got, want)
	}

	// A signed image next to an unsigned one: the rule fails.
	if rr, _ := verifyPod(t, eng, p, pod(signed.Tag, unsigned.Tag)); rr.Status != engine.StatusFail {
		t.Errorf("signed and unsigned images: %s %q, want fail", rr.Status, rr.Message)
	}

	deploy := map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "d", "namespace": "team"},
		"spec": map[string]any{"template": map[string]any{"spec": pod(signed.Tag)["spec"]}}}
	rr, patched = verifyPod(t, eng, p, deploy)
	if rr.Status != engine.StatusPass {
		t.Fatalf("Deployment (autogen): %s %q", rr.Status, rr.Message)
	}
	if got, want := containerImage(patched, "spec", "template", "spec", "containers"), signed.Tag+"@"+signed.Digest; got != want {
		t.Errorf("Deployment's image pinned to %q, want %q", got, want)
	}

	reg.Close()
	rr, _ = verifyPod(t, eng, p, pod(signed.Tag))
	if rr.Status != engine.StatusError || !strings.HasPrefix(rr.Message, "failed to verify image "+signed.Tag) {
		t.Errorf("unreachable registry: %s %q, want an error", rr.Status, rr.Message)
	}
}

// TestEngineImageChecksWithoutRegistry: verifyDigest and required need
// no registry (Kyverno's CLI suite, test/cli/test/images/digest and
// secure-images): an image without a digest fails verifyDigest; an image
// no entry verified fails required, whatever annotation the resource
// carries; a rule that needs a registry, without a verifier, is an error
// marked unsupported, never a pass.
func TestEngineImageChecksWithoutRegistry(t *testing.T) {
	eng, err := engine.New()
	if err != nil {
		t.Fatal(err)
	}
	digest := imagePolicy(t, eng, "Audit", "", `{"imageReferences":["*"],"mutateDigest":false,"verifyDigest":true,"required":false}`)
	rr, _ := verifyPod(t, eng, digest, pod("nginx:latest"))
	if rr.Status != engine.StatusFail || rr.Enforce || rr.Message != "missing digest for docker.io/nginx:latest" {
		t.Errorf("no digest: %s enforce=%v %q", rr.Status, rr.Enforce, rr.Message)
	}
	const pinned = "nginx:latest@sha256:859ab6768a6f26a79bc42b231664111317d095a4f04e4b6fe79ce37b3d199097"
	if rr, _ := verifyPod(t, eng, digest, pod(pinned)); rr.Status != engine.StatusPass || rr.Message != "image verified" {
		t.Errorf("digest: %s %q", rr.Status, rr.Message)
	}

	required := imagePolicy(t, eng, "Enforce", "", `{"imageReferences":["*"],"mutateDigest":false,"verifyDigest":false,"required":true}`)
	forged := pod("tomcat")
	forged["metadata"].(map[string]any)["annotations"] = map[string]any{
		"kyverno.io/verify-images":        `{"docker.io/tomcat:latest":"pass"}`,
		"kyverno.io/verify-images-scoped": `{"version":1,"policies":{"/images":{"signed":{"docker.io/tomcat:latest":"pass"}}}}`,
	}
	for name, obj := range map[string]map[string]any{"plain": pod("tomcat"), "with a forged annotation": forged} {
		if rr, _ := verifyPod(t, eng, required, obj); rr.Status != engine.StatusFail || !rr.Enforce || rr.Message != "unverified image docker.io/tomcat:latest" {
			t.Errorf("required, %s: %s enforce=%v %q", name, rr.Status, rr.Enforce, rr.Message)
		}
	}

	needsRegistry := imagePolicy(t, eng, "Enforce", "", `{"imageReferences":["*"],"attestors":[{"entries":[{"keys":{"publicKeys":"k"}}]}]}`)
	if rr, _ := verifyPod(t, eng, needsRegistry, pod("tomcat")); rr.Status != engine.StatusError || !rr.Unsupported {
		t.Errorf("attestors without a verifier: %s unsupported=%v %q", rr.Status, rr.Unsupported, rr.Message)
	}
}

// TestEngineVerifiesAttestations evaluates attestations through the
// engine against in-toto statements attested in the test registry: the
// conditions see the statement's predicate (at the root and under the
// attestation's name) and the request; a predicate that fails them, an
// attestation missing or signed by another key fail with Kyverno's
// messages; validate.deny reads the named predicate after the
// attestations verified; a tampered attestation (another image's, under
// this image's tag) does not verify.
func TestEngineVerifiesAttestations(t *testing.T) {
	const provenance = "https://slsa.dev/provenance/v0.2"
	reg := ocitest.NewRegistry(t)
	key, other := ocitest.NewKey(t), ocitest.NewKey(t)
	eng := registryEngine(t, reg)
	attested := func(repo, builder string, signer ocitest.Signer) ocitest.Image {
		img := reg.PushImage(t, repo, "v1")
		reg.Sign(t, img.Ref, key)
		if builder != "" {
			reg.Attest(t, img.Ref, signer, provenance, map[string]any{"builder": map[string]any{"id": builder}, "buildType": "verdict/test"})
		}
		return img
	}
	trusted := attested("team/trusted", "https://builder.example/trusted", key)
	rogue := attested("team/rogue", "https://builder.example/rogue", key)
	bare := attested("team/bare", "", nil)
	foreign := attested("team/foreign", "https://builder.example/trusted", other)

	keys := `{"entries":[{"keys":{"publicKeys":"{{ key }}","rekor":{"ignoreTlog":true},"ctlog":{"ignoreSCT":true}}}]}`
	entry := `{"imageReferences":["` + reg.Host() + `/team/*"],"attestors":[` + keys + `],
"attestations":[{"type":"` + provenance + `","name":"prov","attestors":[` + keys + `],
 "conditions":[{"all":[
  {"key":"{{ builder.id }}","operator":"Equals","value":"https://builder.example/trusted","message":"built by {{ builder.id }}"},
  {"key":"{{ prov.buildType }}","operator":"Equals","value":"verdict/test"},
  {"key":"{{ request.object.metadata.namespace }}","operator":"Equals","value":"team"}]}]}]}`
	p := imagePolicy(t, eng, "Enforce", key.PublicKeyPEM(), entry)

	rr, patched := verifyPod(t, eng, p, pod(trusted.Tag))
	if rr.Status != engine.StatusPass || rr.Message != "verified image attestations for "+trusted.Tag {
		t.Fatalf("attested image: %s %q", rr.Status, rr.Message)
	}
	if got, want := containerImage(patched, "spec", "containers"), trusted.Tag+"@"+trusted.Digest; got != want {
		t.Errorf("attested image pinned to %q, want %q", got, want)
	}

	for name, tc := range map[string]struct {
		img  ocitest.Image
		want string
	}{
		"a predicate failing the conditions": {rogue, "image attestations verification failed, verifiedCount: 0, requiredCount: 1, error: .attestations[0].attestors[0].entries[0].keys: " +
			"attestation checks failed for " + rogue.Tag + " and predicate " + provenance + ": built by https://builder.example/rogue"},
		"no attestation":                {bare, "image attestations verification failed, verifiedCount: 0, requiredCount: 1, error: .attestations[0].attestors[0].entries[0].keys: no matching attestations"},
		"an attestation by another key": {foreign, "image attestations verification failed, verifiedCount: 0, requiredCount: 1, error: .attestations[0].attestors[0].entries[0].keys: no matching attestations"},
	} {
		rr, patched := verifyPod(t, eng, p, pod(tc.img.Tag))
		if rr.Status != engine.StatusFail || !rr.Enforce || !strings.HasPrefix(rr.Message, tc.want) {
			t.Errorf("%s: %s enforce=%v %q, want fail %q", name, rr.Status, rr.Enforce, rr.Message, tc.want)

		}
		if got := containerImage(patched, "spec", "containers"); got != tc.img.Tag {
			t.Errorf("%s: the image was changed to %q", name, got)
		}
	}

	// Another image's attestation copied under this image's .att tag: the
	// statement's subject names the other digest.
	copied := reg.PushImage(t, "team/copied", "v1")
	reg.Sign(t, copied.Ref, key)
	reg.Retag(t, reg.Repo("team/trusted")+":"+strings.Replace(trusted.Digest, ":", "-", 1)+".att", "team/copied", strings.Replace(copied.Digest, ":", "-", 1)+".att")
	if rr, _ := verifyPod(t, eng, p, pod(copied.Tag)); rr.Status != engine.StatusFail {
		t.Errorf("an attestation of another image: %s %q, want fail", rr.Status, rr.Message)
	}

	// The conditions read the request: another namespace fails them.
	elsewhere := pod(trusted.Tag)
	elsewhere["metadata"].(map[string]any)["namespace"] = "ops"
	if rr, _ := verifyPod(t, eng, p, elsewhere); rr.Status != engine.StatusFail {
		t.Errorf("conditions on the request: %s %q, want fail", rr.Status, rr.Message)
	}

	// validate.deny, after the attestations, on the named predicate.
	deny := `{"imageReferences":["` + reg.Host() + `/team/*"],
"attestations":[{"type":"` + provenance + `","name":"prov","attestors":[` + keys + `]}],
"validate":{"message":"untrusted builder {{ prov.builder.id }}","deny":{"conditions":{"any":[
  {"key":"{{ prov.builder.id }}","operator":"NotEquals","value":"https://builder.example/trusted"}]}}}}`
	pd := imagePolicy(t, eng, "Enforce", key.PublicKeyPEM(), deny)
	if rr, _ := verifyPod(t, eng, pd, pod(trusted.Tag)); rr.Status != engine.StatusPass || rr.Message != "verifyImages validation is passed in signed rule" {
		t.Errorf("validate.deny, trusted builder: %s %q", rr.Status, rr.Message)
	}
	if rr, _ := verifyPod(t, eng, pd, pod(rogue.Tag)); rr.Status != engine.StatusFail || rr.Message != "validation in verifyImages failed: untrusted builder https://builder.example/rogue" {
		t.Errorf("validate.deny, rogue builder: %s %q", rr.Status, rr.Message)
	}

	// An attestation without attestors asks for the public Sigstore
	// roots: unsupported, never a pass.
	anyone := imagePolicy(t, eng, "Enforce", "", `{"imageReferences":["`+reg.Host()+`/team/*"],"attestations":[{"type":"`+provenance+`"}]}`)
	if rr, _ := verifyPod(t, eng, anyone, pod(trusted.Tag)); rr.Status != engine.StatusError || !rr.Unsupported {
		t.Errorf("attestation without attestors: %s unsupported=%v %q", rr.Status, rr.Unsupported, rr.Message)
	}
}

// TestEngineImageChecksCharged: the images a rule checks are charged to
// the evaluation's work budget: a Pod of more images than the budget
// allows is a rule error, never a verification of each.
func TestEngineImageChecksCharged(t *testing.T) {
	eng, err := engine.New(engine.WithWorkBudget(100))
	if err != nil {
		t.Fatal(err)
	}
	p := imagePolicy(t, eng, "Enforce", "", `{"imageReferences":["*"],"mutateDigest":false,"verifyDigest":true,"required":false}`)
	var images []string
	for i := range 200 {
		images = append(images, fmt.Sprintf("registry.example/app%d@sha256:%064d", i, i))
	}
	if rr, _ := verifyPod(t, eng, p, pod(images...)); rr.Status != engine.StatusError || !strings.Contains(rr.Message, "work budget") {
		t.Errorf("200 images on a budget of 100 steps: %s %q, want an error", rr.Status, rr.Message)
	}
	if rr, _ := verifyPod(t, eng, p, pod(images[:10]...)); rr.Status != engine.StatusPass {
		t.Errorf("10 images: %s %q, want a pass", rr.Status, rr.Message)
	}
}
