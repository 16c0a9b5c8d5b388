package imageverify_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/imageref"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/imageverify"
)

// entry reads a verifyImages entry as a policy writes it.
func entry(t *testing.T, js string) *policy.ImageVerification {
	t.Helper()
	var iv policy.ImageVerification
	if err := json.Unmarshal([]byte(js), &iv); err != nil {
		t.Fatalf("entry %s: %v", js, err)
	}
	return iv.Converted()
}

func request(t *testing.T, image string, iv *policy.ImageVerification) engine.ImageVerifyRequest {
	t.Helper()
	ref, err := imageref.Parse(image, "docker.io", true)
	if err != nil {
		t.Fatalf("image %q: %v", image, err)
	}
	return engine.ImageVerifyRequest{Image: engine.Image{Image: image, Ref: ref}, Verification: iv, Policy: "p", Rule: "r"}
}

func keysEntry(pems ...string) string {
	b, _ := json.Marshal(strings.Join(pems, ""))
	return `{"imageReferences":["*"],"attestors":[{"entries":[{"keys":{"publicKeys":` + string(b) + `,"rekor":{"url":"https://rekor.example","ignoreTlog":true},"ctlog":{"ignoreSCT":true}}}]}]}`
}

// TestVerifyCosignKeys: a cosign signature made in the test with a key
// verifies with that key and names the image's digest; another key, an
// unsigned image, and a signature copied from another image fail with
// Kyverno's message; a registry that cannot be reached is an error (the
// engine's rule error), never a pass.
func TestVerifyCosignKeys(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	key, other := ocitest.NewKey(t), ocitest.NewKey(t)
	signed := reg.PushImage(t, "team/app", "v1")
	reg.Sign(t, signed.Ref, key)
	unsigned := reg.PushImage(t, "team/unsigned", "v1")
	v, err := imageverify.New(imageverify.WithRemoteOptions(append(reg.RemoteOptions(), remote.WithRetryBackoff(remote.Backoff{Steps: 1}))...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	res, err := v.Verify(ctx, request(t, signed.Ref, entry(t, keysEntry(key.PublicKeyPEM()))))
	if err != nil || !res.Verified || res.Digest != signed.Digest {
		t.Fatalf("signed image: %+v, %v; want verified with digest %s", res, err, signed.Digest)
	}
	if want := "verified image signatures for " + signed.Ref; res.Message != want {
		t.Errorf("message %q, want %q", res.Message, want)
	}

	fails := map[string]struct {
		image string
		entry string
	}{
		"another key": {signed.Ref, keysEntry(other.PublicKeyPEM())},
		"unsigned":    {unsigned.Ref, keysEntry(key.PublicKeyPEM())},
	}
	for name, tc := range fails {
		t.Run(name, func(t *testing.T) {
			res, err := v.Verify(ctx, request(t, tc.image, entry(t, tc.entry)))
			if err != nil || res.Verified {
				t.Fatalf("%+v, %v; want a failure", res, err)
			}
			if want := "failed to verify image " + tc.image + ": .attestors[0].entries[0].keys: "; !strings.HasPrefix(res.Message, want) {
				t.Fatalf("message %q, want it to start with %q", res.Message, want)
			}
		})
	}

	// A signature of one image does not vouch for another: the copy
	// names the first image's digest.
	tampered := reg.PushImage(t, "team/app", "v2")
	reg.Retag(t, reg.Repo("team/app")+":"+sigTag(signed.Digest), "team/app", sigTag(tampered.Digest))
	if res, err := v.Verify(ctx, request(t, tampered.Ref, entry(t, keysEntry(key.PublicKeyPEM())))); err != nil || res.Verified {
		t.Fatalf("a signature copied from another image: %+v, %v; want a failure", res, err)
	}

	// Two keys, count 1: one is enough; count absent: both are needed.
	one := `{"imageReferences":["*"],"attestors":[{"count":1,"entries":[{"keys":{"publicKeys":` + quote(other.PublicKeyPEM()+key.PublicKeyPEM()) + `,"rekor":{"url":"u","ignoreTlog":true},"ctlog":{"ignoreSCT":true}}}]}]}`
	if res, err := v.Verify(ctx, request(t, signed.Ref, entry(t, one))); err != nil || !res.Verified {
		t.Fatalf("one of two keys with count 1: %+v, %v", res, err)
	}
	if res, err := v.Verify(ctx, request(t, signed.Ref, entry(t, keysEntry(other.PublicKeyPEM(), key.PublicKeyPEM())))); err != nil || res.Verified ||
		!strings.Contains(res.Message, ".attestors[0].entries[0].keys: ") {
		t.Fatalf("two keys, both required, one signed: %+v, %v", res, err)
	}

	// The transparency log cannot be checked here: asked for, it is an
	// error, never a silent pass.
	tlog := `{"imageReferences":["*"],"attestors":[{"entries":[{"keys":{"publicKeys":` + quote(key.PublicKeyPEM()) + `}}]}]}`
	if _, err := v.Verify(ctx, request(t, signed.Ref, entry(t, tlog))); !errors.Is(err, imageverify.ErrUnsupported) {
		t.Fatalf("a key with the transparency log required: %v, want ErrUnsupported", err)
	}

	reg.Close()
	if res, err := v.Verify(ctx, request(t, signed.Ref, entry(t, keysEntry(key.PublicKeyPEM())))); err == nil {
		t.Fatalf("unreachable registry: %+v, want an error", res)
	}
}

// TestVerifyKeyless: a keyless signature whose certificate chains to the
// policy's roots and names the subject and issuer verifies; another
// subject, or roots of another CA, fail.
func TestVerifyKeyless(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	ca, otherCA := ocitest.NewCA(t), ocitest.NewCA(t)
	cert := ca.Issue(t, ocitest.Identity{Email: "dev@example.com", Issuer: "https://issuer.example"})
	img := reg.PushImage(t, "team/app", "v1")
	reg.Sign(t, img.Ref, cert)
	v, err := imageverify.New(imageverify.WithRemoteOptions(reg.RemoteOptions()...))
	if err != nil {
		t.Fatal(err)
	}
	keyless := func(roots, subject string) string {
		return `{"imageReferences":["*"],"attestors":[{"entries":[{"keyless":{"subject":` + quote(subject) + `,"issuer":"https://issuer.example","roots":` + quote(roots) +
			`,"rekor":{"url":"u","ignoreTlog":true},"ctlog":{"ignoreSCT":true}}}]}]}`
	}
	ctx := t.Context()
	if res, err := v.Verify(ctx, request(t, img.Ref, entry(t, keyless(ca.RootsPEM(), "dev@example.com")))); err != nil || !res.Verified || res.Digest != img.Digest {
		t.Fatalf("keyless: %+v, %v", res, err)
	}
	for name, e := range map[string]string{
		"another subject": keyless(ca.RootsPEM(), "eve@example.com"),
		"another CA":      keyless(otherCA.RootsPEM(), "dev@example.com"),
	} {
		if res, err := v.Verify(ctx, request(t, img.Ref, entry(t, e))); err != nil || res.Verified ||
			!strings.Contains(res.Message, ".attestors[0].entries[0].keyless: ") {
			t.Errorf("%s: %+v, %v; want a failure", name, res, err)
		}
	}
}

// TestVerifyNotary: a Notary signature made in the test with notation-go
// (a certificate chain to a test CA, as a referrer and under the
// referrers tag schema) verifies against the CA given as the attestor's
// certificates and names the image's digest; another CA, an unsigned
// image and a tag moved to another image fail; a registry that cannot be
// reached is an error. A Notary attestation (an SBOM referrer) signed
// by the CA verifies, its predicate the referrer's JSON; an unsigned one
// beside it is not the attestor's; another type or another CA fail.
func TestVerifyNotary(t *testing.T) {
	for name, opts := range map[string][]ocitest.RegistryOption{
		"referrers API":        nil,
		"referrers tag schema": {ocitest.WithoutReferrers()},
	} {
		t.Run(name, func(t *testing.T) {
			reg := ocitest.NewRegistry(t, opts...)
			ca := ocitest.NewCA(t, ocitest.WithIntermediate())
			img := reg.PushImage(t, "team/app", "v1")
			reg.SignNotary(t, img.Tag, ca.Issue(t, ocitest.Identity{Email: "dev@example.com"}))
			unsigned := reg.PushImage(t, "team/unsigned", "v1")
			v, err := imageverify.New(imageverify.WithRemoteOptions(append(reg.RemoteOptions(), remote.WithRetryBackoff(remote.Backoff{Steps: 1}))...))
			if err != nil {
				t.Fatal(err)
			}
			notary := func(certs string) *policy.ImageVerification {
				return entry(t, `{"type":"Notary","imageReferences":["*"],"attestors":[{"entries":[{"certificates":{"cert":`+quote(certs)+`}}]}]}`)
			}
			ctx := t.Context()
			res, err := v.Verify(ctx, request(t, img.Tag, notary(ca.RootsPEM())))
			if err != nil || !res.Verified || res.Digest != img.Digest || res.Message != "verified image signatures for "+img.Tag {
				t.Fatalf("signed: %+v, %v", res, err)
			}
			for name, req := range map[string]engine.ImageVerifyRequest{
				"another CA":     request(t, img.Tag, notary(ocitest.NewCA(t).RootsPEM())),
				"unsigned image": request(t, unsigned.Tag, notary(ca.RootsPEM())),
			} {
				res, err := v.Verify(ctx, req)
				if err != nil || res.Verified || !strings.HasPrefix(res.Message, "failed to verify image "+req.Image.Image+": .attestors[0].entries[0]: ") {
					t.Errorf("%s: %+v, %v; want a failure", name, res, err)
				}
			}
			reg.Retag(t, unsigned.Ref, "team/app", "v1")
			if res, err := v.Verify(ctx, request(t, img.Tag, notary(ca.RootsPEM()))); err != nil || res.Verified {
				t.Errorf("tag moved to an unsigned image: %+v, %v; want a failure", res, err)
			}
			// Notary attestations: an SBOM attached as a referrer, signed.
			sbom := reg.PushReferrer(t, img.Ref, "sbom/cyclone-dx", []byte(`{"bomFormat":"CycloneDX","specVersion":"1.5"}`))
			reg.SignNotary(t, sbom, ca.Issue(t, ocitest.Identity{Email: "dev@example.com"}))
			reg.PushReferrer(t, img.Ref, "sbom/cyclone-dx", []byte(`{"bomFormat":"forged"}`)) // unsigned: not the attestor's
			attest := func(typ, certs string) *policy.ImageVerification {
				return entry(t, `{"type":"Notary","imageReferences":["*"],"attestations":[{"type":"`+typ+`","attestors":[{"entries":[{"certificates":{"cert":`+quote(certs)+`}}]}]}]}`)
			}
			req := request(t, img.Ref, attest("sbom/cyclone-dx", ca.RootsPEM()))
			var checked []any
			req.CheckStatement = func(_ int, st map[string]any) (bool, string, error) {
				checked = append(checked, st["predicate"].(map[string]any)["bomFormat"])
				return true, "", nil
			}
			res, err = v.Verify(ctx, req)
			if err != nil || !res.Verified || res.Message != "verified image attestations for "+img.Ref {
				t.Fatalf("signed SBOM: %+v, %v", res, err)
			}
			if len(checked) != 1 || checked[0] != "CycloneDX" || res.Statements[0][0]["type"] != "sbom/cyclone-dx" {
				t.Errorf("statements checked %v, returned %v: want the signed SBOM's alone", checked, res.Statements)
			}
			for name, e := range map[string]*policy.ImageVerification{
				"another type": attest("sbom/spdx", ca.RootsPEM()),
				"another CA":   attest("sbom/cyclone-dx", ocitest.NewCA(t).RootsPEM()),
			} {
				res, err := v.Verify(ctx, request(t, img.Ref, e))
				if err != nil || res.Verified || !strings.HasPrefix(res.Message, "image attestations verification failed, verifiedCount: 0, requiredCount: 1, error: .attestations[0].attestors[0].entries[0]: ") {
					t.Errorf("%s: %+v, %v; want a failure", name, res, err)
				}
			}
			reg.Close()
			if res, err := v.Verify(ctx, request(t, img.Ref, notary(ca.RootsPEM()))); err == nil {
				t.Errorf("unreachable registry: %+v, want an error", res)
			}
		})
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// sigTag is cosign's tag of an image's signature.
func sigTag(digest string) string { return strings.Replace(digest, ":", "-", 1) + ".sig" }
