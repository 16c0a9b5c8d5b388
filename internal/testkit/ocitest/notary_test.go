package ocitest_test

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"testing"

	"github.com/notaryproject/notation-go"
	"github.com/notaryproject/notation-go/verifier"
	"github.com/notaryproject/notation-go/verifier/trustpolicy"
	"github.com/notaryproject/notation-go/verifier/truststore"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
)

// certsStore is a notation trust store of the certificates of a
// policy's certs PEM, in the named "ca" store "verdict".
type certsStore []*x509.Certificate

func (s certsStore) GetCertificates(_ context.Context, _ truststore.Type, _ string) ([]*x509.Certificate, error) {
	return s, nil
}

func parseCerts(t *testing.T, pemCerts string) certsStore {
	t.Helper()
	var certs certsStore
	rest := []byte(pemCerts)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		certs = append(certs, c)
	}
	return certs
}

// verifyNotary checks the image's Notary signatures as notation verify
// does with a strict trust policy and the certs as its CA trust store.
func verifyNotary(t *testing.T, reg *ocitest.Registry, ref, certsPEM string) error {
	t.Helper()
	policy := &trustpolicy.Document{
		Version: "1.0",
		TrustPolicies: []trustpolicy.TrustPolicy{{
			Name:                  "verdict",
			RegistryScopes:        []string{"*"},
			SignatureVerification: trustpolicy.SignatureVerification{VerificationLevel: trustpolicy.LevelStrict.Name},
			TrustStores:           []string{"ca:verdict"},
			TrustedIdentities:     []string{"*"},
		}},
	}
	v, err := verifier.New(policy, parseCerts(t, certsPEM), nil)
	if err != nil {
		t.Fatalf("notation verifier: %v", err)
	}
	_, _, err = notation.Verify(context.Background(), v, reg.NotaryRepository(t, ref), notation.VerifyOptions{
		ArtifactReference:    ref,
		MaxSignatureAttempts: 10,
	})
	return err
}

func TestSignNotary(t *testing.T) {
	for name, tc := range map[string]struct {
		opts      []ocitest.RegistryOption
		referrers bool // whether the referrers API answers
	}{
		"referrers API":        {referrers: true},
		"referrers tag schema": {opts: []ocitest.RegistryOption{ocitest.WithoutReferrers()}},
	} {
		t.Run(name, func(t *testing.T) {
			reg := ocitest.NewRegistry(t, tc.opts...)
			img := reg.PushImage(t, "app", "v1")
			ca := ocitest.NewCA(t, ocitest.WithIntermediate())
			cert := ca.Issue(t, ocitest.Identity{Email: testEmail})
			if got := reg.SignNotary(t, img.Tag, cert); got != img.Ref {
				t.Errorf("SignNotary = %q, want %q", got, img.Ref)
			}
			reg.ResetLog()
			if err := verifyNotary(t, reg, img.Ref, ca.RootsPEM()); err != nil {
				t.Fatalf("verify: %v", err)
			}
			answered := reg.Count(func(r ocitest.Request) bool {
				return r.Kind == ocitest.KindReferrers && r.Status == http.StatusOK
			})
			if (answered > 0) != tc.referrers {
				t.Errorf("%d referrers calls answered, want them only with the referrers API: %v", answered, reg.Requests())
			}
			if err := verifyNotary(t, reg, img.Ref, ocitest.NewCA(t).RootsPEM()); err == nil {
				t.Fatal("verify with another CA: no error")
			}
			unsigned := reg.PushImage(t, "app", "v2")
			if err := verifyNotary(t, reg, unsigned.Ref, ca.RootsPEM()); err == nil {
				t.Fatal("verify an unsigned image: no error")
			}
		})
	}
}
