// Package sigmanifest reads and checks Kubernetes resources signed the
// way k8s-manifest-sigstore signs them (`kubectl sigstore sign`, the
// signatures Kyverno's validate.manifests verifies): the YAML manifests a
// resource was made from, in a .tar.gz, gzipped and base64-encoded into
// the annotation <domain>/message, and signatures of that .tar.gz
// (base64, cosign's blob signatures) in <domain>/signature,
// <domain>/signature_1, ... A resource is verified when a key verifies
// one of its signatures and the resource equals the signed manifest of
// its kind and name, but for the fields ignored.
//
// The message may also be the YAML itself, gzipped once, as
// k8s-manifest-sigstore accepts it.
//
// It does no I/O and needs no registry or API server: keys are PEM public
// keys (ECDSA, RSA, Ed25519, as cosign's keys are). What a message may
// cost is bounded (its decompressed size, its files), since an annotation
// is whatever the requester wrote.
package sigmanifest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// DefaultDomain is the annotations' domain unless a rule names another.
const DefaultDomain = "cosign.sigstore.dev"

// Bounds of one message.
const (
	// MaxDecodedBytes bounds each decompression of a message (the
	// .tar.gz, then the tar).
	MaxDecodedBytes = 4 << 20
	// MaxFiles bounds the files of a message's tar.
	MaxFiles = 256
	// MaxSignatures bounds the signatures read from one resource.
	MaxSignatures = 32
)

var (
	// ErrNoMessage: the resource has no message annotation.
	ErrNoMessage = errors.New("YAML manifest not found for this resource: no message annotation")
	// ErrNoSignature: the resource has a message and no signature.
	ErrNoSignature = errors.New("signature not found for this resource: no signature annotation")
)

// Signed is what a resource's annotations hold.
type Signed struct {
	// Message is the bytes signed: the manifests' .tar.gz (or YAML).
	Message []byte
	// Manifests are the YAML documents of the message's files, in order.
	Manifests []map[string]any
	// Signatures are the signatures, decoded, in the annotations' order.
	Signatures [][]byte
}

// Annotation is the key of the annotation base (message, signature,
// certificate, bundle, resourceBundleRef) in domain, numbered from 1
// after the first (signature, signature_1, ...).
func Annotation(domain, base string, i int) string {
	if domain == "" {
		domain = DefaultDomain
	}
	if i == 0 {
		return domain + "/" + base
	}
	return domain + "/" + base + "_" + strconv.Itoa(i)
}

// Read reads the signed message and the signatures in annotations.
func Read(annotations map[string]string, domain string) (*Signed, error) {
	raw, ok := annotations[Annotation(domain, "message", 0)]
	if !ok || raw == "" {
		return nil, ErrNoMessage
	}
	gz, err := base64.StdEncoding.DecodeString(raw)
	if err != nil {
		return nil, fmt.Errorf("the message annotation is not base64: %w", err)
	}
	msg := gz
	if isGzip(gz) {
		if msg, err = gunzip(gz); err != nil {
			return nil, fmt.Errorf("the message annotation: %w", err)
		}
	}
	docs, err := manifests(msg)
	if err != nil {
		return nil, err
	}
	s := &Signed{Message: msg, Manifests: docs}
	for i := 0; ; i++ {
		sig, ok := annotations[Annotation(domain, "signature", i)]
		if !ok {
			break
		}
		if i >= MaxSignatures {
			return nil, fmt.Errorf("more than %d signatures", MaxSignatures)
		}
		b, err := base64.StdEncoding.DecodeString(sig)
		if err != nil {
			return nil, fmt.Errorf("signature %d is not base64: %w", i+1, err)
		}
		s.Signatures = append(s.Signatures, b)
	}
	if len(s.Signatures) == 0 {
		return nil, ErrNoSignature
	}
	return s, nil
}

// gunzip decompresses b, at most MaxDecodedBytes.
func gunzip(b []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return nil, err
	}
	defer func() { _ = zr.Close() }()
	out, err := io.ReadAll(io.LimitReader(zr, MaxDecodedBytes+1))
	if err != nil {
		return nil, err
	}
	if len(out) > MaxDecodedBytes {
		return nil, fmt.Errorf("larger than %d bytes decompressed", MaxDecodedBytes)
	}
	return out, nil
}

// isGzip reports whether b starts as gzip data does.
func isGzip(b []byte) bool { return len(b) > 2 && b[0] == 0x1f && b[1] == 0x8b }

// manifests are the YAML documents of the message: of the files of a
// .tar.gz, in order, or the message itself when it is YAML (as
// k8s-manifest-sigstore reads both).
func manifests(msg []byte) ([]map[string]any, error) {
	if !isGzip(msg) {
		ds, err := document.DecodeAll(msg)
		if err != nil {
			return nil, fmt.Errorf("the signed message is neither a .tar.gz nor YAML: %w", err)
		}
		docs := make([]map[string]any, 0, len(ds))
		for _, d := range ds {
			docs = append(docs, d.Object)
		}
		if len(docs) == 0 {
			return nil, errors.New("the signed message holds no YAML manifest")
		}
		return docs, nil
	}
	tarball, err := gunzip(msg)
	if err != nil {
		return nil, fmt.Errorf("the signed message is not a .tar.gz: %w", err)
	}
	tr := tar.NewReader(bytes.NewReader(tarball))
	var docs []map[string]any
	for files := 0; ; files++ {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("the signed message's tar: %w", err)
		}
		if files >= MaxFiles {
			return nil, fmt.Errorf("the signed message has more than %d files", MaxFiles)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		if ext := path.Ext(h.Name); ext != ".yaml" && ext != ".yml" && ext != ".json" {
			continue
		}
		data, err := io.ReadAll(tr) // the tar is within MaxDecodedBytes
		if err != nil {
			return nil, fmt.Errorf("the signed message's %s: %w", h.Name, err)
		}
		ds, err := document.DecodeAll(data)
		if err != nil {
			return nil, fmt.Errorf("the signed message's %s: %w", h.Name, err)
		}
		for _, d := range ds {
			docs = append(docs, d.Object)
		}
	}
	if len(docs) == 0 {
		return nil, errors.New("the signed message holds no YAML manifest")
	}
	return docs, nil
}

// Verifier checks signatures with one public key.
type Verifier struct {
	key  crypto.PublicKey
	hash crypto.Hash
}

// NewVerifier reads a PEM public key; algorithm is the digest of the
// signatures (sha224, sha256, sha384, sha512; "" is sha256).
func NewVerifier(pemKey, algorithm string) (*Verifier, error) {
	hashes := map[string]crypto.Hash{"": crypto.SHA256, "sha224": crypto.SHA224, "sha256": crypto.SHA256, "sha384": crypto.SHA384, "sha512": crypto.SHA512}
	h, ok := hashes[algorithm]
	if !ok {
		return nil, fmt.Errorf("invalid signature algorithm %s", algorithm)
	}
	b, _ := pem.Decode([]byte(strings.TrimSpace(pemKey)))
	if b == nil {
		return nil, errors.New("failed to load public key from PEM: no PEM block")
	}
	key, err := x509.ParsePKIXPublicKey(b.Bytes)
	if err != nil {
		return nil, fmt.Errorf("failed to load public key from PEM: %w", err)
	}
	switch key.(type) {
	case *ecdsa.PublicKey, *rsa.PublicKey, ed25519.PublicKey:
	default:
		return nil, fmt.Errorf("unsupported public key type %T", key)
	}
	return &Verifier{key: key, hash: h}, nil
}

// Verify reports whether sig is a signature of msg by the key.
func (v *Verifier) Verify(msg, sig []byte) bool {
	if k, ok := v.key.(ed25519.PublicKey); ok {
		return ed25519.Verify(k, msg, sig)
	}
	var digest []byte
	switch v.hash {
	case crypto.SHA224:
		d := sha256.Sum224(msg)
		digest = d[:]
	case crypto.SHA384:
		d := sha512.Sum384(msg)
		digest = d[:]
	case crypto.SHA512:
		d := sha512.Sum512(msg)
		digest = d[:]
	default:
		d := sha256.Sum256(msg)
		digest = d[:]
	}
	switch k := v.key.(type) {
	case *ecdsa.PublicKey:
		return ecdsa.VerifyASN1(k, digest, sig)
	case *rsa.PublicKey:
		return rsa.VerifyPKCS1v15(k, v.hash, digest, sig) == nil
	}
	return false
}
