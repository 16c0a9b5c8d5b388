package imageverify_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/imageverify"
)

// TestVerifyBundles: images signed and attested as cosign v3 does by
// default (Sigstore bundles attached as OCI 1.1 referrers, through the
// referrers API and the referrers tag schema) verify with the signing
// key, the signature naming the image's digest and the attestation's
// statement given to the conditions; another key, an image with only an
// attestation bundle (not a signature) and an image with no bundle fail
// with Kyverno's message; an image with both forms verifies by either.
func TestVerifyBundles(t *testing.T) {
	const provenance = "https://slsa.dev/provenance/v1"
	for name, opts := range map[string][]ocitest.RegistryOption{
		"referrers API":        nil,
		"referrers tag schema": {ocitest.WithoutReferrers()},
	} {
		t.Run(name, func(t *testing.T) {
			reg := ocitest.NewRegistry(t, opts...)
			key, other := ocitest.NewKey(t), ocitest.NewKey(t)
			signed := reg.PushImage(t, "team/app", "v1")
			reg.SignBundle(t, signed.Ref, key)
			reg.AttestBundle(t, signed.Ref, key, provenance, map[string]any{"buildDefinition": map[string]any{"buildType": "verdict/test"}})
			attestedOnly := reg.PushImage(t, "team/attested", "v1")
			reg.AttestBundle(t, attestedOnly.Ref, key, provenance, map[string]any{})
			classic := reg.PushImage(t, "team/classic", "v1")
			reg.Sign(t, classic.Ref, key)
			reg.SignBundle(t, classic.Ref, other)
			unsigned := reg.PushImage(t, "team/unsigned", "v1")
			v, err := imageverify.New(imageverify.WithRemoteOptions(append(reg.RemoteOptions(), remote.WithRetryBackoff(remote.Backoff{Steps: 1}))...))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()

			res, err := v.Verify(ctx, request(t, signed.Tag, entry(t, keysEntry(key.PublicKeyPEM()))))
			if err != nil || !res.Verified || res.Digest != signed.Digest || res.Message != "verified image signatures for "+signed.Tag {
				t.Fatalf("bundle-signed image: %+v, %v", res, err)
			}
			for name, tc := range map[string]struct{ image, key string }{
				"another key":                {signed.Tag, other.PublicKeyPEM()},
				"an attestation, no signing": {attestedOnly.Tag, key.PublicKeyPEM()},
				"no bundle, no signature":    {unsigned.Tag, key.PublicKeyPEM()},
			} {
				res, err := v.Verify(ctx, request(t, tc.image, entry(t, keysEntry(tc.key))))
				if err != nil || res.Verified || !strings.HasPrefix(res.Message, "failed to verify image "+tc.image+": .attestors[0].entries[0].keys: ") {
					t.Errorf("%s: %+v, %v; want a failure", name, res, err)
				}
			}
			// Signed both ways, by two keys: each key verifies.
			for _, k := range []*ocitest.Key{key, other} {
				if res, err := v.Verify(ctx, request(t, classic.Tag, entry(t, keysEntry(k.PublicKeyPEM())))); err != nil || !res.Verified || res.Digest != classic.Digest {
					t.Errorf("classic and bundle signatures: %+v, %v", res, err)
				}
			}

			att := entry(t, `{"imageReferences":["*"],"attestations":[{"type":"`+provenance+`","attestors":[`+
				strings.TrimSuffix(strings.TrimPrefix(keysEntry(key.PublicKeyPEM()), `{"imageReferences":["*"],"attestors":[`), `]}`)+`]}]}`)
			res, err = v.Verify(ctx, request(t, signed.Tag, att))
			if err != nil || !res.Verified || len(res.Statements) != 1 || len(res.Statements[0]) != 1 {
				t.Fatalf("bundle attestation: %+v, %v", res, err)
			}
			if bt, _ := res.Statements[0][0]["predicate"].(map[string]any)["buildDefinition"].(map[string]any)["buildType"].(string); bt != "verdict/test" {
				t.Errorf("statement %v", res.Statements[0][0])
			}
			// type SigstoreBundle reads bundles only: the classic
			// signature of an image signed both ways is not enough.
			sb := entry(t, strings.Replace(keysEntry(key.PublicKeyPEM()), `{"imageReferences"`, `{"type":"SigstoreBundle","imageReferences"`, 1))
			if res, err := v.Verify(ctx, request(t, signed.Tag, sb)); err != nil || !res.Verified {
				t.Errorf("SigstoreBundle, bundle-signed: %+v, %v", res, err)
			}
			if res, err := v.Verify(ctx, request(t, classic.Tag, sb)); err != nil || res.Verified ||
				res.Message != "failed to verify image "+classic.Tag+": .attestors[0].entries[0].keys: sigstore bundle verification failed: no matching signatures found" {
				t.Errorf("SigstoreBundle, classic signature by the key: %+v, %v", res, err)
			}
			res, err = v.Verify(ctx, request(t, unsigned.Tag, att))
			if err != nil || res.Verified || !strings.HasPrefix(res.Message, "image attestations verification failed, verifiedCount: 0, requiredCount: 1, error: .attestations[0].attestors[0].entries[0].keys: no matching attestations") {
				t.Errorf("no attestation: %+v, %v", res, err)
			}
		})
	}
}

// TestVerifyBundlesUnsupported: what the verifier cannot check in a
// bundle yet (a keyless identity or a certificate chain, the
// transparency log) is an unsupported error, never a pass and never a
// crash; the image's classic signature still verifies beside such a
// bundle.
func TestVerifyBundlesUnsupported(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	ca := ocitest.NewCA(t)
	key := ocitest.NewKey(t)
	img := reg.PushImage(t, "team/app", "v1")
	reg.SignBundle(t, img.Ref, key)
	both := reg.PushImage(t, "team/both", "v1")
	reg.SignBundle(t, both.Ref, key)
	leaf := ca.Issue(t, ocitest.Identity{Email: "dev@example.com", Issuer: "https://issuer.example"})
	reg.Sign(t, both.Ref, leaf)
	v, err := imageverify.New(imageverify.WithRemoteOptions(append(reg.RemoteOptions(), remote.WithRetryBackoff(remote.Backoff{Steps: 1}))...))
	if err != nil {
		t.Fatal(err)
	}
	keyless := entry(t, `{"imageReferences":["*"],"attestors":[{"entries":[{"keyless":{"roots":`+quote(ca.RootsPEM())+`,
"subject":"dev@example.com","issuer":"https://issuer.example","rekor":{"ignoreTlog":true},"ctlog":{"ignoreSCT":true}}}]}]}`)
	_, err = v.Verify(t.Context(), request(t, img.Tag, keyless))
	if !errors.Is(err, imageverify.ErrUnsupported) || !errors.Is(err, engine.ErrImageVerificationUnsupported) {
		t.Errorf("keyless on a bundle: %v, want an unsupported error", err)
	}
	if res, err := v.Verify(t.Context(), request(t, both.Tag, keyless)); err != nil || !res.Verified {
		t.Errorf("keyless on a classic signature beside a bundle: %+v, %v", res, err)
	}
	tlog := entry(t, strings.Replace(keysEntry(key.PublicKeyPEM()), `"ignoreTlog":true`, `"ignoreTlog":false`, 1))
	if _, err := v.Verify(t.Context(), request(t, img.Tag, tlog)); !errors.Is(err, imageverify.ErrUnsupported) {
		t.Errorf("a bundle with the transparency log required: %v, want an unsupported error", err)
	}
}
