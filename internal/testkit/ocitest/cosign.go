package ocitest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/in-toto/in-toto-golang/in_toto"
	"github.com/sigstore/cosign/v3/pkg/cosign/attestation"
	cremote "github.com/sigstore/cosign/v3/pkg/cosign/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/mutate"
	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	"github.com/sigstore/cosign/v3/pkg/oci/static"
	ctypes "github.com/sigstore/cosign/v3/pkg/types"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/dsse"
	sigpayload "github.com/sigstore/sigstore/pkg/signature/payload"
)

// Signer signs images: a *Key (cosign sign --key) or a *Certificate
// (cosign keyless: the certificate and its chain ride along).
type Signer interface {
	signer() signature.SignerVerifier
	certChain() (cert, chain []byte)
}

// SignOption changes how Sign and Attest store a signature.
type SignOption func(*signConfig)

type signConfig struct {
	annotations map[string]any
	repo        string
	rekor       *RekorLog
}

// WithAnnotations adds annotations to the signed payload (cosign sign
// -a key=value), which a policy's attestor may require.
func WithAnnotations(a map[string]any) SignOption {
	return func(c *signConfig) { c.annotations = a }
}

// InRepository stores the signature in repo of the same registry rather
// than beside the image (COSIGN_REPOSITORY; a policy's repository).
func InRepository(repo string) SignOption {
	return func(c *signConfig) { c.repo = repo }
}

// Sign signs the image ref (a tag or a digest reference into this
// registry) as `cosign sign --tlog-upload=false` does, in the classic
// form: a simple-signing payload for the image's digest, signed by s,
// pushed as a layer of the signature image at the tag
// sha256-<hex>.sig with the dev.cosignproject.cosign/signature
// annotation (and, from a *Certificate, the certificate and chain
// annotations). A second Sign adds a signature beside the first. It
// returns the signature image's tag reference and fails t on error.
func (r *Registry) Sign(t testing.TB, ref string, s Signer, opts ...SignOption) string {
	t.Helper()
	cfg := signOptions(opts)
	digest, ropts := r.resolve(t, ref, cfg)
	payload, err := (&sigpayload.Cosign{Image: digest, Annotations: cfg.annotations}).MarshalJSON()
	if err != nil {
		t.Fatalf("ocitest: payload: %v", err)
	}
	raw, err := s.signer().SignMessage(bytes.NewReader(payload))
	if err != nil {
		t.Fatalf("ocitest: sign: %v", err)
	}
	var sopts []static.Option
	cert, chain := s.certChain()
	if cert != nil {
		sopts = append(sopts, static.WithCertChain(cert, chain))
	}
	if cfg.rekor != nil {
		public := cert
		if public == nil {
			public = []byte(s.(*Key).pem)
		}
		sopts = append(sopts, static.WithBundle(cfg.rekor.entry(t, payload, base64.StdEncoding.EncodeToString(raw), public)))
	}
	sig, err := static.NewSignature(payload, base64.StdEncoding.EncodeToString(raw), sopts...)
	if err != nil {
		t.Fatalf("ocitest: signature: %v", err)
	}
	se, err := mutate.AttachSignatureToEntity(ociremote.SignedUnknown(digest, ropts...), sig,
		mutate.WithDupeDetector(cremote.NewDupeDetector(s.signer())))
	if err != nil {
		t.Fatalf("ocitest: attach signature: %v", err)
	}
	if err := ociremote.WriteSignatures(digest.Repository, se, ropts...); err != nil {
		t.Fatalf("ocitest: write signature of %s: %v", digest, err)
	}
	tag, err := ociremote.SignatureTag(digest, ropts...)
	if err != nil {
		t.Fatalf("ocitest: signature tag: %v", err)
	}
	return tag.String()
}

// Attest attaches an in-toto statement about the image ref, with
// predicateType (for example "https://slsa.dev/provenance/v0.2" or
// "https://cosign.sigstore.dev/attestation/vuln/v1") and predicate (a
// value that marshals to a JSON object, or json.RawMessage), as `cosign
// attest --type <predicateType> --tlog-upload=false` does: the statement
// in a DSSE envelope signed by s, pushed as a layer of the attestation
// image at the tag sha256-<hex>.att with the predicateType annotation.
// It returns the attestation image's tag reference and fails t on error.
func (r *Registry) Attest(t testing.TB, ref string, s Signer, predicateType string, predicate any, opts ...SignOption) string {
	t.Helper()
	cfg := signOptions(opts)
	digest, ropts := r.resolve(t, ref, cfg)
	raw, ok := predicate.(json.RawMessage)
	if !ok {
		var err error
		if raw, err = json.Marshal(predicate); err != nil {
			t.Fatalf("ocitest: predicate: %v", err)
		}
	}
	h := digest.Identifier()[len("sha256:"):]
	st, err := attestation.GenerateStatement(attestation.GenerateOpts{
		Predicate: bytes.NewReader(raw),
		Type:      predicateType,
		Digest:    h,
		Repo:      digest.Repository.String(),
	})
	if err != nil {
		t.Fatalf("ocitest: statement: %v", err)
	}
	statement, err := st.MarshalJSON()
	if err != nil {
		t.Fatalf("ocitest: statement: %v", err)
	}
	envelope, err := dsse.WrapSigner(s.signer(), ctypes.IntotoPayloadType).SignMessage(bytes.NewReader(statement))
	if err != nil {
		t.Fatalf("ocitest: sign statement: %v", err)
	}
	sopts := []static.Option{
		static.WithLayerMediaType(ctypes.DssePayloadType),
		static.WithAnnotations(map[string]string{"predicateType": predicateType}),
	}
	if cert, chain := s.certChain(); cert != nil {
		sopts = append(sopts, static.WithCertChain(cert, chain))
	}
	att, err := static.NewAttestation(envelope, sopts...)
	if err != nil {
		t.Fatalf("ocitest: attestation: %v", err)
	}
	se, err := mutate.AttachAttestationToEntity(ociremote.SignedUnknown(digest, ropts...), att,
		mutate.WithDupeDetector(cremote.NewDupeDetector(s.signer())))
	if err != nil {
		t.Fatalf("ocitest: attach attestation: %v", err)
	}
	if err := ociremote.WriteAttestations(digest.Repository, se, ropts...); err != nil {
		t.Fatalf("ocitest: write attestation of %s: %v", digest, err)
	}
	tag, err := ociremote.AttestationTag(digest, ropts...)
	if err != nil {
		t.Fatalf("ocitest: attestation tag: %v", err)
	}
	return tag.String()
}

// StatementType is the in-toto statement type Attest writes (cosign's).
const StatementType = in_toto.StatementInTotoV01

// ClientOptions are the options of cosign's OCI client that reach this
// registry, for cosign.CheckOpts.RegistryClientOpts.
func (r *Registry) ClientOptions() []ociremote.Option {
	return []ociremote.Option{ociremote.WithRemoteOptions(r.RemoteOptions()...)}
}

func signOptions(opts []SignOption) signConfig {
	var cfg signConfig
	for _, o := range opts {
		o(&cfg)
	}
	return cfg
}

// resolve turns ref into a digest reference, and gives the cosign client
// options for this registry and the signature repository.
func (r *Registry) resolve(t testing.TB, ref string, cfg signConfig) (name.Digest, []ociremote.Option) {
	t.Helper()
	ropts := r.ClientOptions()
	if cfg.repo != "" {
		repo, err := name.NewRepository(r.Repo(cfg.repo))
		if err != nil {
			t.Fatalf("ocitest: repository %q: %v", cfg.repo, err)
		}
		ropts = append(ropts, ociremote.WithTargetRepository(repo))
	}
	digest, err := ociremote.ResolveDigest(r.ref(t, ref), ropts...)
	if err != nil {
		t.Fatalf("ocitest: resolve %s: %v", ref, err)
	}
	return digest, ropts
}
