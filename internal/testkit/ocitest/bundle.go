package ocitest

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	ociremote "github.com/sigstore/cosign/v3/pkg/oci/remote"
	ctypes "github.com/sigstore/cosign/v3/pkg/types"
	protocommon "github.com/sigstore/protobuf-specs/gen/pb-go/common/v1"
	"github.com/sigstore/sigstore-go/pkg/sign"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"google.golang.org/protobuf/encoding/protojson"
)

// SignBundle signs the image ref as `cosign sign --key` of cosign v3
// does by default (the new bundle format): an in-toto statement of
// predicate type https://sigstore.dev/cosign/sign/v1 for the image's
// digest, in a DSSE envelope signed by key, in a Sigstore bundle (v0.3,
// the key's hint as verification material, no transparency log entry)
// pushed as an OCI 1.1 referrer of the image. It returns the referrer's
// digest reference and fails t on error.
func (r *Registry) SignBundle(t testing.TB, ref string, key *Key) string {
	t.Helper()
	return r.AttestBundle(t, ref, key, ctypes.CosignSignPredicateType, map[string]any{})
}

// AttestBundle attaches an in-toto statement of predicateType with
// predicate as cosign v3's `cosign attest --key` does by default: a
// Sigstore bundle pushed as an OCI 1.1 referrer of the image (see
// SignBundle).
func (r *Registry) AttestBundle(t testing.TB, ref string, key *Key, predicateType string, predicate any) string {
	t.Helper()
	digest, ropts := r.resolve(t, ref, signConfig{})
	statement, err := json.Marshal(map[string]any{
		"_type":         "https://in-toto.io/Statement/v1",
		"subject":       []any{map[string]any{"name": digest.Repository.String(), "digest": map[string]any{"sha256": strings.TrimPrefix(digest.DigestStr(), "sha256:")}}},
		"predicateType": predicateType,
		"predicate":     predicate,
	})
	if err != nil {
		t.Fatalf("ocitest: statement: %v", err)
	}
	b, err := sign.Bundle(&sign.DSSEData{Data: statement, PayloadType: ctypes.IntotoPayloadType}, bundleKeypair{key}, sign.BundleOptions{Context: t.Context()})
	if err != nil {
		t.Fatalf("ocitest: bundle: %v", err)
	}
	raw, err := protojson.Marshal(b)
	if err != nil {
		t.Fatalf("ocitest: bundle: %v", err)
	}
	if err := ociremote.WriteAttestationNewBundleFormat(digest, raw, predicateType, ropts...); err != nil {
		t.Fatalf("ocitest: write bundle of %s: %v", digest, err)
	}
	return digest.String()
}

// bundleKeypair is a Key as sigstore-go's signer takes it.
type bundleKeypair struct{ k *Key }

func (b bundleKeypair) GetHashAlgorithm() protocommon.HashAlgorithm {
	return protocommon.HashAlgorithm_SHA2_256
}
func (b bundleKeypair) GetSigningAlgorithm() protocommon.PublicKeyDetails {
	return protocommon.PublicKeyDetails_PKIX_ECDSA_P256_SHA_256
}
func (b bundleKeypair) GetHint() []byte {
	der, _ := cryptoutils.MarshalPublicKeyToDER(b.k.priv.Public())
	sum := sha256.Sum256(der)
	return []byte(base64.StdEncoding.EncodeToString(sum[:]))
}
func (b bundleKeypair) GetKeyAlgorithm() string          { return "ECDSA" }
func (b bundleKeypair) GetPublicKey() crypto.PublicKey   { return b.k.priv.Public() }
func (b bundleKeypair) GetPublicKeyPem() (string, error) { return b.k.pem, nil }
func (b bundleKeypair) SignData(_ context.Context, data []byte) ([]byte, []byte, error) {
	sum := sha256.Sum256(data)
	sig, err := b.k.priv.Sign(rand.Reader, sum[:], crypto.SHA256)
	return sig, sum[:], err
}
