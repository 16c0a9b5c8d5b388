package ocitest_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"testing"
	"time"

	"github.com/sigstore/cosign/v3/pkg/cosign"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
)

const (
	testIssuer = "https://token.actions.githubusercontent.com"
	testEmail  = "signer@example.com"
	testURI    = "https://github.com/org/repo/.github/workflows/release.yaml@refs/heads/main"
)

// verifyKeyless checks the image's signatures as cosign verify does with
// --certificate-identity, --certificate-oidc-issuer, roots and
// intermediates from PEM (as a policy gives them), the SCT and the
// transparency log checks off.
func verifyKeyless(t *testing.T, reg *ocitest.Registry, ref, rootsPEM, intermediatesPEM string, id cosign.Identity) error {
	t.Helper()
	co := &cosign.CheckOpts{
		RootCerts:          pool(t, rootsPEM),
		Identities:         []cosign.Identity{id},
		IgnoreSCT:          true,
		IgnoreTlog:         true,
		ClaimVerifier:      cosign.SimpleClaimVerifier,
		RegistryClientOpts: reg.ClientOptions(),
	}
	if intermediatesPEM != "" {
		co.IntermediateCerts = pool(t, intermediatesPEM)
	}
	_, _, err := cosign.VerifyImageSignatures(context.Background(), parse(t, ref), co)
	return err
}

func pool(t *testing.T, pemCerts string) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM([]byte(pemCerts)) {
		t.Fatalf("no certificates in %q", pemCerts)
	}
	return p
}

func TestSignKeyless(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	img := reg.PushImage(t, "app", "v1")
	ca := ocitest.NewCA(t, ocitest.WithIntermediate())
	cert := ca.Issue(t, ocitest.Identity{Email: testEmail, Issuer: testIssuer})
	reg.Sign(t, img.Tag, cert)

	id := cosign.Identity{Subject: testEmail, Issuer: testIssuer}
	if err := verifyKeyless(t, reg, img.Ref, ca.RootsPEM(), ca.IntermediatesPEM(), id); err != nil {
		t.Fatalf("verify: %v", err)
	}
	t.Run("chain from the signature", func(t *testing.T) {
		// cosign takes the intermediates from the chain annotation when
		// the verifier is given none, as a policy with roots only.
		if err := verifyKeyless(t, reg, img.Ref, ca.RootsPEM(), "", id); err != nil {
			t.Fatalf("verify with roots only: %v", err)
		}
	})

	failures := map[string]struct {
		roots string
		id    cosign.Identity
	}{
		"another CA":      {roots: ocitest.NewCA(t).RootsPEM(), id: id},
		"another subject": {roots: ca.RootsPEM(), id: cosign.Identity{Subject: "other@example.com", Issuer: testIssuer}},
		"another issuer":  {roots: ca.RootsPEM(), id: cosign.Identity{Subject: testEmail, Issuer: "https://accounts.google.com"}},
	}
	for name, tc := range failures {
		t.Run(name, func(t *testing.T) {
			if err := verifyKeyless(t, reg, img.Ref, tc.roots, "", tc.id); err == nil {
				t.Fatal("verify: no error")
			}
		})
	}
}

func TestIssue(t *testing.T) {
	ca := ocitest.NewCA(t)
	cert := ca.Issue(t, ocitest.Identity{URI: testURI, Issuer: testIssuer, Lifetime: 10 * time.Minute})
	leaf := cert.Cert()
	if len(leaf.URIs) != 1 || leaf.URIs[0].String() != testURI {
		t.Errorf("URI SANs = %v", leaf.URIs)
	}
	if got := leaf.NotAfter.Sub(leaf.NotBefore); got < 10*time.Minute || got > 12*time.Minute {
		t.Errorf("validity = %v, want about 10m", got)
	}
	if ext := (cosign.CertExtensions{Cert: leaf}); ext.GetIssuer() != testIssuer {
		t.Errorf("issuer extension = %q", ext.GetIssuer())
	}
	if _, err := leaf.Verify(x509.VerifyOptions{
		Roots:     pool(t, ca.RootsPEM()),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}); err != nil {
		t.Errorf("verify the leaf against the root: %v", err)
	}
	if block, _ := pem.Decode([]byte(cert.ChainPEM())); block == nil {
		t.Error("chain PEM has no certificate")
	}
}

func TestSignKeylessExpired(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	img := reg.PushImage(t, "app", "v1")
	ca := ocitest.NewCA(t)
	reg.Sign(t, img.Tag, ca.Issue(t, ocitest.Identity{Email: testEmail, Issuer: testIssuer, Lifetime: -time.Minute}))
	err := verifyKeyless(t, reg, img.Ref, ca.RootsPEM(), "", cosign.Identity{Subject: testEmail, Issuer: testIssuer})
	if err == nil {
		t.Fatal("verify an expired certificate without a transparency log: no error")
	}
}

func TestAttestKeyless(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	img := reg.PushImage(t, "app", "v1")
	ca := ocitest.NewCA(t, ocitest.WithIntermediate())
	cert := ca.Issue(t, ocitest.Identity{URI: testURI, Issuer: testIssuer})
	reg.Attest(t, img.Tag, cert, "https://slsa.dev/provenance/v0.2", map[string]any{"buildType": "test"})

	verify := func(roots string) error {
		co := &cosign.CheckOpts{
			RootCerts:          pool(t, roots),
			IntermediateCerts:  pool(t, ca.IntermediatesPEM()),
			Identities:         []cosign.Identity{{Subject: testURI, Issuer: testIssuer}},
			IgnoreSCT:          true,
			IgnoreTlog:         true,
			ClaimVerifier:      cosign.IntotoSubjectClaimVerifier,
			RegistryClientOpts: reg.ClientOptions(),
		}
		_, _, err := cosign.VerifyImageAttestations(context.Background(), parse(t, img.Ref), co)
		return err
	}
	if err := verify(ca.RootsPEM()); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if err := verify(ocitest.NewCA(t).RootsPEM()); err == nil {
		t.Fatal("verify against another CA: no error")
	}
}
