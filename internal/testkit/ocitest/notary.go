package ocitest

import (
	"context"
	"net/http"
	"testing"

	"github.com/notaryproject/notation-core-go/signature/jws"
	"github.com/notaryproject/notation-go"
	notaryregistry "github.com/notaryproject/notation-go/registry"
	"github.com/notaryproject/notation-go/signer"
	orasremote "oras.land/oras-go/v2/registry/remote"
)

// NotaryRepository is the registry's repository of ref as notation-go
// reaches it (through oras-go, over this registry's transport), for
// notation.Sign and notation.Verify.
func (r *Registry) NotaryRepository(t testing.TB, ref string) notaryregistry.Repository {
	t.Helper()
	repo, err := orasremote.NewRepository(ref)
	if err != nil {
		t.Fatalf("ocitest: notary repository %q: %v", ref, err)
	}
	repo.PlainHTTP = r.ca == nil
	repo.Client = &http.Client{Transport: r.trans}
	return notaryregistry.NewRepository(repo)
}

// SignNotary signs the image ref (a tag or a digest reference into this
// registry) as `notation sign` does: a JWS envelope signed by c's key,
// with c's chain (leaf to root), pushed as an OCI 1.1 referrer artifact
// of the image (artifactType application/vnd.cncf.notary.signature).
// A policy's Notary attestor trusts it with the CA's RootsPEM as its
// certs. It returns the image's reference by digest and fails t on
// error.
func (r *Registry) SignNotary(t testing.TB, ref string, c *Certificate) string {
	t.Helper()
	s, err := signer.NewGenericSigner(c.key.priv, c.Chain())
	if err != nil {
		t.Fatalf("ocitest: notary signer: %v", err)
	}
	desc, err := notation.Sign(context.Background(), s, r.NotaryRepository(t, ref), notation.SignOptions{
		SignerSignOptions: notation.SignerSignOptions{SignatureMediaType: jws.MediaTypeEnvelope},
		ArtifactReference: ref,
	})
	if err != nil {
		t.Fatalf("ocitest: notary sign %s: %v", ref, err)
	}
	return r.ref(t, ref).Context().Digest(desc.Digest.String()).String()
}
