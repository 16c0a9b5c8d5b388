package ocitest_test

import (
	"context"
	"crypto"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/cosign/v3/pkg/cosign"
	"github.com/sigstore/cosign/v3/pkg/oci"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
)

// verifyKey checks the image's signatures as cosign verify --key
// --insecure-ignore-tlog does, the key read back from its PEM.
func verifyKey(t *testing.T, reg *ocitest.Registry, ref string, key *ocitest.Key, opts ...func(*cosign.CheckOpts)) ([]oci.Signature, error) {
	t.Helper()
	pub, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(key.PublicKeyPEM()))
	if err != nil {
		t.Fatalf("public key PEM: %v", err)
	}
	v, err := signature.LoadVerifier(pub, crypto.SHA256)
	if err != nil {
		t.Fatalf("verifier: %v", err)
	}
	co := &cosign.CheckOpts{
		SigVerifier:        v,
		IgnoreTlog:         true,
		ClaimVerifier:      cosign.SimpleClaimVerifier,
		RegistryClientOpts: reg.ClientOptions(),
	}
	for _, o := range opts {
		o(co)
	}
	sigs, _, err := cosign.VerifyImageSignatures(context.Background(), parse(t, ref), co)
	return sigs, err
}

func parse(t *testing.T, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s)
	if err != nil {
		t.Fatalf("reference %q: %v", s, err)
	}
	return ref
}

func TestSignKey(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	img := reg.PushImage(t, "team/app", "v1")
	key := ocitest.NewKey(t)
	sigTag := reg.Sign(t, img.Tag, key, ocitest.WithAnnotations(map[string]any{"env": "prod"}))

	wantTag := reg.Repo("team/app") + ":" + strings.Replace(img.Digest, ":", "-", 1) + ".sig"
	if sigTag != wantTag {
		t.Errorf("signature tag = %q, want %q", sigTag, wantTag)
	}
	reg.ResetLog()
	sigs, err := verifyKey(t, reg, img.Tag, key, func(co *cosign.CheckOpts) {
		co.Annotations = map[string]any{"env": "prod"}
	})
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if len(sigs) != 1 {
		t.Fatalf("verified %d signatures, want 1", len(sigs))
	}
	ann, err := sigs[0].Annotations()
	if err != nil || ann["dev.cosignproject.cosign/signature"] == "" {
		t.Errorf("annotations = %v, %v: want the cosign signature annotation", ann, err)
	}
	if n := reg.ManifestFetches("team/app", strings.TrimPrefix(sigTag, reg.Repo("team/app")+":")); n != 1 {
		t.Errorf("signature manifest fetched %d times, want 1 (log %v)", n, reg.Requests())
	}

	t.Run("another key fails", func(t *testing.T) {
		_, err := verifyKey(t, reg, img.Ref, ocitest.NewKey(t))
		var noMatch *cosign.ErrNoMatchingSignatures
		if !errors.As(err, &noMatch) {
			t.Fatalf("verify with another key: %v, want ErrNoMatchingSignatures", err)
		}
	})
	t.Run("other annotations fail", func(t *testing.T) {
		_, err := verifyKey(t, reg, img.Ref, key, func(co *cosign.CheckOpts) {
			co.Annotations = map[string]any{"env": "dev"}
		})
		if err == nil {
			t.Fatal("verify with env=dev: no error")
		}
	})
	t.Run("unsigned image fails", func(t *testing.T) {
		other := reg.PushImage(t, "team/app", "v2")
		_, err := verifyKey(t, reg, other.Tag, key)
		var noSigs *cosign.ErrNoSignaturesFound
		if !errors.As(err, &noSigs) {
			t.Fatalf("verify unsigned: %v, want ErrNoSignaturesFound", err)
		}
	})
	t.Run("two signers", func(t *testing.T) {
		second := ocitest.NewKey(t)
		reg.Sign(t, img.Ref, second)
		for i, k := range []*ocitest.Key{key, second} {
			if _, err := verifyKey(t, reg, img.Ref, k); err != nil {
				t.Errorf("key %d: %v", i, err)
			}
		}
	})
}

func TestSignInRepository(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	img := reg.PushImage(t, "app", "v1")
	key := ocitest.NewKey(t)
	sigTag := reg.Sign(t, img.Tag, key, ocitest.InRepository("signatures"))
	if !strings.HasPrefix(sigTag, reg.Repo("signatures")+":") {
		t.Errorf("signature tag %q is not in the signatures repository", sigTag)
	}
	target, err := name.NewRepository(reg.Repo("signatures"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = verifyKey(t, reg, img.Ref, key, func(co *cosign.CheckOpts) {
		co.RegistryClientOpts = append(co.RegistryClientOpts, ociremote.WithTargetRepository(target))
	})
	if err != nil {
		t.Fatalf("verify in the signatures repository: %v", err)
	}
	if _, err := verifyKey(t, reg, img.Ref, key); err == nil {
		t.Fatal("verify beside the image: no error, want no signatures")
	}
}

func TestSignIndex(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	idx := reg.PushIndex(t, "multi", "v1")
	if len(idx.Children) != 2 {
		t.Fatalf("index has %d children, want 2", len(idx.Children))
	}
	key := ocitest.NewKey(t)
	reg.Sign(t, idx.Tag, key)
	if _, err := verifyKey(t, reg, idx.Ref, key); err != nil {
		t.Fatalf("verify index: %v", err)
	}
	if _, err := verifyKey(t, reg, idx.Children[0].Ref, key); err == nil {
		t.Fatal("verify a child: no error, want no signatures (only the index is signed)")
	}
}

func TestAttest(t *testing.T) {
	const slsa = "https://slsa.dev/provenance/v0.2"
	reg := ocitest.NewRegistry(t)
	img := reg.PushImage(t, "app", "v1")
	key := ocitest.NewKey(t)
	predicate := map[string]any{
		"builder":   map[string]any{"id": "https://github.com/actions/runner"},
		"buildType": "https://example.com/build",
	}
	attTag := reg.Attest(t, img.Tag, key, slsa, predicate)
	if !strings.HasSuffix(attTag, ".att") {
		t.Errorf("attestation tag = %q, want a .att tag", attTag)
	}

	atts, err := verifyAttestations(t, reg, img.Ref, key)
	if err != nil {
		t.Fatalf("verify attestations: %v", err)
	}
	if len(atts) != 1 {
		t.Fatalf("verified %d attestations, want 1", len(atts))
	}
	st := statement(t, atts[0])
	if st.Type != ocitest.StatementType || st.PredicateType != slsa {
		t.Errorf("statement type %q, predicate type %q", st.Type, st.PredicateType)
	}
	if len(st.Subject) != 1 || "sha256:"+st.Subject[0].Digest["sha256"] != img.Digest {
		t.Errorf("statement subject = %+v, want %s", st.Subject, img.Digest)
	}
	if st.Predicate["builder"].(map[string]any)["id"] != "https://github.com/actions/runner" {
		t.Errorf("predicate = %v", st.Predicate)
	}

	t.Run("another key fails", func(t *testing.T) {
		if _, err := verifyAttestations(t, reg, img.Ref, ocitest.NewKey(t)); err == nil {
			t.Fatal("verify with another key: no error")
		}
	})
	t.Run("second predicate", func(t *testing.T) {
		const vuln = "https://cosign.sigstore.dev/attestation/vuln/v1"
		reg.Attest(t, img.Ref, key, vuln, json.RawMessage(`{"scanner":{"result":{"summary":{"critical":0}}}}`))
		atts, err := verifyAttestations(t, reg, img.Ref, key)
		if err != nil {
			t.Fatalf("verify: %v", err)
		}
		var types []string
		for _, a := range atts {
			types = append(types, statement(t, a).PredicateType)
		}
		if len(types) != 2 {
			t.Fatalf("predicate types %v, want 2", types)
		}
	})
}

func verifyAttestations(t *testing.T, reg *ocitest.Registry, ref string, key *ocitest.Key) ([]oci.Signature, error) {
	t.Helper()
	co := &cosign.CheckOpts{
		SigVerifier:        key.Verifier(),
		IgnoreTlog:         true,
		ClaimVerifier:      cosign.IntotoSubjectClaimVerifier,
		RegistryClientOpts: reg.ClientOptions(),
	}
	atts, _, err := cosign.VerifyImageAttestations(context.Background(), parse(t, ref), co)
	return atts, err
}

type inTotoStatement struct {
	Type          string `json:"_type"`
	PredicateType string `json:"predicateType"`
	Subject       []struct {
		Name   string            `json:"name"`
		Digest map[string]string `json:"digest"`
	} `json:"subject"`
	Predicate map[string]any `json:"predicate"`
}

// statement decodes the in-toto statement in an attestation's DSSE
// envelope, as Kyverno does before it checks conditions.
func statement(t *testing.T, att oci.Signature) inTotoStatement {
	t.Helper()
	payload, err := att.Payload()
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		PayloadType string `json:"payloadType"`
		Payload     string `json:"payload"`
	}
	if err := json.Unmarshal(payload, &env); err != nil {
		t.Fatalf("envelope: %v", err)
	}
	if env.PayloadType != "application/vnd.in-toto+json" {
		t.Errorf("payload type %q", env.PayloadType)
	}
	raw, err := base64.StdEncoding.DecodeString(env.Payload)
	if err != nil {
		t.Fatalf("envelope payload: %v", err)
	}
	var st inTotoStatement
	if err := json.Unmarshal(raw, &st); err != nil {
		t.Fatalf("statement: %v", err)
	}
	return st
}
