package ocitest

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/cyberphone/json-canonicalization/go/src/webpki.org/jsoncanonicalizer"
	cbundle "github.com/sigstore/cosign/v3/pkg/cosign/bundle"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// RekorLog stands in for a transparency log (a private Rekor) as far as
// an offline verifier sees it: the log's key signs each entry's signed
// entry timestamp (SET), which cosign stores in the signature's bundle
// annotation when it uploads to the log. No log server runs: a verifier
// checks the bundle with the log's public key alone.
type RekorLog struct {
	key *ecdsa.PrivateKey
	pem string
	id  string
	mu  sync.Mutex
	n   int64
}

// NewRekorLog makes a log with a new ECDSA P-256 key. It fails t on
// error.
func NewRekorLog(t testing.TB) *RekorLog {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("ocitest: rekor key: %v", err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(key.Public())
	if err != nil {
		t.Fatalf("ocitest: rekor key: %v", err)
	}
	der, err := x509.MarshalPKIXPublicKey(key.Public())
	if err != nil {
		t.Fatalf("ocitest: rekor key: %v", err)
	}
	sum := sha256.Sum256(der)
	return &RekorLog{key: key, pem: string(pub), id: hex.EncodeToString(sum[:])}
}

// PublicKeyPEM is the log's public key, as a policy's rekor.pubkey names
// it.
func (l *RekorLog) PublicKeyPEM() string { return l.pem }

// InRekor records the signature in log, as `cosign sign` does when it
// uploads to a transparency log: a hashedrekord entry of the payload's
// hash, the signature and the signer's key (or certificate), and the
// log's SET over it, in the signature's bundle annotation.
func InRekor(log *RekorLog) SignOption {
	return func(c *signConfig) { c.rekor = log }
}

// entry is the bundle of one signature: its hashedrekord entry, logged
// now, with the log's SET.
func (l *RekorLog) entry(t testing.TB, payload []byte, b64Sig string, publicPEM []byte) *cbundle.RekorBundle {
	t.Helper()
	sum := sha256.Sum256(payload)
	body, err := json.Marshal(map[string]any{
		"apiVersion": "0.0.1",
		"kind":       "hashedrekord",
		"spec": map[string]any{
			"data":      map[string]any{"hash": map[string]any{"algorithm": "sha256", "value": hex.EncodeToString(sum[:])}},
			"signature": map[string]any{"content": b64Sig, "publicKey": map[string]any{"content": base64.StdEncoding.EncodeToString(publicPEM)}},
		},
	})
	if err != nil {
		t.Fatalf("ocitest: rekor entry: %v", err)
	}
	l.mu.Lock()
	index := l.n
	l.n++
	l.mu.Unlock()
	p := cbundle.RekorPayload{Body: base64.StdEncoding.EncodeToString(body), IntegratedTime: time.Now().Unix(), LogIndex: index, LogID: l.id}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatalf("ocitest: rekor payload: %v", err)
	}
	canonical, err := jsoncanonicalizer.Transform(raw)
	if err != nil {
		t.Fatalf("ocitest: rekor payload: %v", err)
	}
	digest := sha256.Sum256(canonical)
	set, err := ecdsa.SignASN1(rand.Reader, l.key, digest[:])
	if err != nil {
		t.Fatalf("ocitest: rekor SET: %v", err)
	}
	return &cbundle.RekorBundle{SignedEntryTimestamp: set, Payload: p}
}

// TrustedRoot is a Sigstore trusted root (trusted_root.json, as
// Sigstore's TUF repository serves it) that names ca as the Fulcio
// certificate authority and log as the transparency log: what an
// air-gapped cluster is given in place of the public instance's. It
// fails t on error.
func TrustedRoot(t testing.TB, ca *CA, log *RekorLog) []byte {
	t.Helper()
	var intermediates []*x509.Certificate
	if ca.intermediate != nil {
		intermediates = append(intermediates, ca.intermediate)
	}
	start := ca.root.NotBefore
	fulcio := &root.FulcioCertificateAuthority{Root: ca.root, Intermediates: intermediates, ValidityPeriodStart: start, URI: "https://fulcio.ocitest.example"}
	id, err := hex.DecodeString(log.id)
	if err != nil {
		t.Fatalf("ocitest: log id: %v", err)
	}
	tlog := &root.TransparencyLog{BaseURL: "https://rekor.ocitest.example", ID: id, ValidityPeriodStart: start,
		HashFunc: crypto.SHA256, PublicKey: log.key.Public(), SignatureHashFunc: crypto.SHA256}
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01, []root.CertificateAuthority{fulcio}, nil, nil,
		map[string]*root.TransparencyLog{log.id: tlog})
	if err != nil {
		t.Fatalf("ocitest: trusted root: %v", err)
	}
	raw, err := tr.MarshalJSON()
	if err != nil {
		t.Fatalf("ocitest: trusted root: %v", err)
	}
	return raw
}
