package imageverify

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	_ "github.com/notaryproject/notation-core-go/signature/cose" // COSE envelopes
	_ "github.com/notaryproject/notation-core-go/signature/jws"  // JWS envelopes
	"github.com/notaryproject/notation-go"
	notaryregistry "github.com/notaryproject/notation-go/registry"
	"github.com/notaryproject/notation-go/verifier"
	"github.com/notaryproject/notation-go/verifier/trustpolicy"
	"github.com/notaryproject/notation-go/verifier/truststore"
	"github.com/opencontainers/go-digest"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
	"github.com/sigstore/sigstore/pkg/cryptoutils"

	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// Bounds of what a Notary verification reads from a registry: the
// signatures listed for one image (Kyverno's limit: more is taken for a
// compromised image), the signature envelopes tried, and one envelope's
// size.
const (
	maxNotaryReferrers  = 50
	maxNotaryAttempts   = 10
	maxNotaryBlobBytes  = 10 << 20
	notaryTrustStoreRef = "verdict"
)

// verifyNotary verifies the image's Notary signatures (notation's JWS or
// COSE envelopes, found as OCI 1.1 referrers or under the referrers tag
// schema) against the attestor's certificates, as Kyverno does: the
// certificate and chain given are one CA trust store, the trust policy
// strict, any identity trusted. It returns the digest notation verified.
func (v *Verifier) verifyNotary(ctx context.Context, tg target, a *policy.Attestor) (string, error) {
	if a.Certificates == nil {
		return "", errors.New("a Notary attestor needs certificates")
	}
	pemCerts := a.Certificates.Certificate
	if c := a.Certificates.CertificateChain; c != "" {
		if pemCerts != "" {
			pemCerts += "\n"
		}
		pemCerts += c
	}
	certs, err := cryptoutils.LoadCertificatesFromPEM(strings.NewReader(pemCerts))
	if err != nil {
		return "", fmt.Errorf("failed to parse certificates: %w", err)
	}
	if len(certs) == 0 {
		return "", errors.New("failed to parse certificates: none found")
	}
	if len(certs) > maxChain {
		return "", fmt.Errorf("certificate chain too long (%d), maximum allowed is %d", len(certs), maxChain)
	}
	doc := &trustpolicy.Document{
		Version: "1.0",
		TrustPolicies: []trustpolicy.TrustPolicy{{
			Name:                  notaryTrustStoreRef,
			RegistryScopes:        []string{"*"},
			SignatureVerification: trustpolicy.SignatureVerification{VerificationLevel: trustpolicy.LevelStrict.Name},
			TrustStores:           []string{"ca:" + notaryTrustStoreRef},
			TrustedIdentities:     []string{"*"},
		}},
	}
	nv, err := verifier.New(doc, trustStore(certs), nil)
	if err != nil {
		return "", fmt.Errorf("failed to create the Notary verifier: %w", err)
	}
	repo := &notaryRepo{repo: tg.ref.Context(), opts: tg.opts}
	// notation verifies a reference by digest: the tag is resolved once,
	// here, and the signatures are those of that digest.
	target, err := repo.Resolve(ctx, tg.ref.Identifier())
	if err != nil {
		if netErr := repo.networkError(); netErr != nil {
			return "", netErr
		}
		return "", fmt.Errorf("failed to resolve %s: %w", tg.ref.Name(), err)
	}
	desc, outcomes, err := notation.Verify(ctx, nv, repo, notation.VerifyOptions{
		ArtifactReference:    tg.ref.Context().Digest(target.Digest.String()).Name(),
		MaxSignatureAttempts: maxNotaryAttempts,
	})
	if netErr := repo.networkError(); netErr != nil {
		// notation words registry errors as text: the network error the
		// repository met is what decides that no verdict was reached.
		return "", netErr
	}
	if err != nil {
		return "", fmt.Errorf("failed to verify %s: %w", tg.ref.Name(), err)
	}
	var errs []error
	for _, o := range outcomes {
		if o.Error != nil {
			errs = append(errs, o.Error)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return "", err
	}
	return desc.Digest.String(), nil
}

// trustStore is a CA trust store of certificates, under the one name the
// trust policy gives.
type trustStore []*x509.Certificate

func (s trustStore) GetCertificates(_ context.Context, t truststore.Type, name string) ([]*x509.Certificate, error) {
	if t != truststore.TypeCA || name != notaryTrustStoreRef {
		return nil, fmt.Errorf("no trust store %s:%s", t, name)
	}
	return s, nil
}

// notaryRepo is notation's view of a repository (notaryregistry.
// Repository), read through go-containerregistry with the verifier's
// options, so that Notary signatures are fetched through the same
// transport, blocklist and credentials as cosign's. It is read-only.
type notaryRepo struct {
	repo name.Repository
	opts []remote.Option

	mu     sync.Mutex
	netErr error
}

var _ notaryregistry.Repository = (*notaryRepo)(nil)

// seen keeps the first network error met, and returns err.
func (r *notaryRepo) seen(err error) error {
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		r.mu.Lock()
		if r.netErr == nil {
			r.netErr = err
		}
		r.mu.Unlock()
	}
	return err
}

func (r *notaryRepo) networkError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.netErr
}

func (r *notaryRepo) Resolve(_ context.Context, reference string) (ocispec.Descriptor, error) {
	var ref name.Reference = r.repo.Tag(reference)
	if strings.Contains(reference, ":") {
		ref = r.repo.Digest(reference)
	}
	desc, err := remote.Head(ref, r.opts...)
	if err != nil {
		return ocispec.Descriptor{}, r.seen(err)
	}
	return ociDescriptor(*desc), nil
}

func (r *notaryRepo) ListSignatures(_ context.Context, desc ocispec.Descriptor, fn func([]ocispec.Descriptor) error) error {
	idx, err := remote.Referrers(r.repo.Digest(desc.Digest.String()), append(r.opts, remote.WithFilter("artifactType", notaryregistry.ArtifactTypeNotation))...)
	if err != nil {
		return r.seen(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return r.seen(err)
	}
	if len(m.Manifests) > maxNotaryReferrers {
		return fmt.Errorf("too many signatures (%d), maximum allowed is %d", len(m.Manifests), maxNotaryReferrers)
	}
	out := make([]ocispec.Descriptor, 0, len(m.Manifests))
	for _, d := range m.Manifests {
		if d.ArtifactType == notaryregistry.ArtifactTypeNotation {
			out = append(out, ociDescriptor(d))
		}
	}
	return fn(out)
}

func (r *notaryRepo) FetchSignatureBlob(_ context.Context, desc ocispec.Descriptor) ([]byte, ocispec.Descriptor, error) {
	img, err := remote.Image(r.repo.Digest(desc.Digest.String()), r.opts...)
	if err != nil {
		return nil, ocispec.Descriptor{}, r.seen(err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, ocispec.Descriptor{}, r.seen(err)
	}
	if len(m.Layers) != 1 {
		return nil, ocispec.Descriptor{}, fmt.Errorf("signature manifest %s has %d layers, want 1", desc.Digest, len(m.Layers))
	}
	layer := m.Layers[0]
	if layer.Size > maxNotaryBlobBytes {
		return nil, ocispec.Descriptor{}, fmt.Errorf("signature envelope of %d bytes, maximum allowed is %d", layer.Size, maxNotaryBlobBytes)
	}
	l, err := remote.Layer(r.repo.Digest(layer.Digest.String()), r.opts...)
	if err != nil {
		return nil, ocispec.Descriptor{}, r.seen(err)
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, ocispec.Descriptor{}, r.seen(err)
	}
	defer func() { _ = rc.Close() }()
	var buf bytes.Buffer
	// The reader checks the digest and size as it reads.
	if _, err := io.Copy(&buf, io.LimitReader(rc, layer.Size+1)); err != nil {
		return nil, ocispec.Descriptor{}, r.seen(err)
	}
	if int64(buf.Len()) != layer.Size {
		return nil, ocispec.Descriptor{}, fmt.Errorf("signature envelope %s: %d bytes, its descriptor says %d", layer.Digest, buf.Len(), layer.Size)
	}
	return buf.Bytes(), ociDescriptor(layer), nil
}

func (r *notaryRepo) PushSignature(context.Context, string, []byte, ocispec.Descriptor, map[string]string) (ocispec.Descriptor, ocispec.Descriptor, error) {
	return ocispec.Descriptor{}, ocispec.Descriptor{}, errors.New("imageverify: the Notary repository is read-only")
}

func ociDescriptor(d v1.Descriptor) ocispec.Descriptor {
	return ocispec.Descriptor{
		MediaType:    string(d.MediaType),
		Digest:       digest.Digest(d.Digest.String()),
		Size:         d.Size,
		Annotations:  d.Annotations,
		ArtifactType: d.ArtifactType,
	}
}
