package ocitest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"math/big"
	"net"
	"net/url"
	"testing"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// The Fulcio certificate extensions that carry the OIDC issuer: the
// deprecated raw string (1.1) and the DER UTF8String that replaced it
// (1.8). cosign reads 1.8 first and falls back to 1.1.
var (
	oidIssuerV1 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 1}
	oidIssuerV2 = asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}
)

// DefaultCertLifetime is how long an Issue certificate is valid when the
// Identity does not say: long enough for a slow end-to-end test, since
// cosign checks a certificate against the current time when the
// transparency log is off.
const DefaultCertLifetime = time.Hour

// Key is an ECDSA P-256 key pair, as `cosign generate-key-pair` makes.
type Key struct {
	priv *ecdsa.PrivateKey
	sv   signature.SignerVerifier
	pem  string
}

// NewKey generates an ECDSA P-256 key pair. It fails t on error.
func NewKey(t testing.TB) *Key {
	t.Helper()
	priv, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("ocitest: generate key: %v", err)
	}
	sv, err := signature.LoadECDSASignerVerifier(priv, crypto.SHA256)
	if err != nil {
		t.Fatalf("ocitest: load signer: %v", err)
	}
	pub, err := cryptoutils.MarshalPublicKeyToPEM(priv.Public())
	if err != nil {
		t.Fatalf("ocitest: marshal public key: %v", err)
	}
	return &Key{priv: priv, sv: sv, pem: string(pub)}
}

// PublicKeyPEM is the public key as a "PUBLIC KEY" PEM block, as
// policies write it in publicKeys.
func (k *Key) PublicKeyPEM() string { return k.pem }

// PrivateKey is the private half, for a signer of another format.
func (k *Key) PrivateKey() *ecdsa.PrivateKey { return k.priv }

// Verifier checks signatures made with the key (SHA-256).
func (k *Key) Verifier() signature.Verifier { return k.sv }

func (k *Key) signer() signature.SignerVerifier { return k.sv }
func (k *Key) certChain() (cert, chain []byte)  { return nil, nil }

// CA is a test certificate authority: a self-signed root and, with
// WithIntermediate, an intermediate that issues the leaves. It stands in
// for Fulcio (keyless signing) and for the CA of a Notary signing
// certificate or of a registry's TLS certificate.
type CA struct {
	root         *x509.Certificate
	intermediate *x509.Certificate // nil: the root issues
	issuer       *x509.Certificate
	issuerKey    *ecdsa.PrivateKey
}

// CAOption changes the CA NewCA makes.
type CAOption func(*caConfig)

type caConfig struct {
	intermediate bool
	name         string
}

// WithIntermediate has the root sign an intermediate CA, which issues
// every leaf: the chain Fulcio serves.
func WithIntermediate() CAOption {
	return func(c *caConfig) { c.intermediate = true }
}

// WithCommonName names the root (and "<name> intermediate"); default
// "ocitest root".
func WithCommonName(name string) CAOption {
	return func(c *caConfig) { c.name = name }
}

// NewCA makes a CA valid from a minute ago for a day. It fails t on error.
func NewCA(t testing.TB, opts ...CAOption) *CA {
	t.Helper()
	cfg := caConfig{name: "ocitest"}
	for _, o := range opts {
		o(&cfg)
	}
	rootKey := newECKey(t)
	rootTmpl := caTemplate(t, cfg.name+" root")
	root := createCert(t, rootTmpl, rootTmpl, &rootKey.PublicKey, rootKey)
	ca := &CA{root: root, issuer: root, issuerKey: rootKey}
	if cfg.intermediate {
		key := newECKey(t)
		tmpl := caTemplate(t, cfg.name+" intermediate")
		tmpl.MaxPathLenZero = true
		ca.intermediate = createCert(t, tmpl, root, &key.PublicKey, rootKey)
		ca.issuer, ca.issuerKey = ca.intermediate, key
	}
	return ca
}

// caTemplate is a CA certificate valid from a minute ago for a day.
func caTemplate(t testing.TB, commonName string) *x509.Certificate {
	t.Helper()
	now := time.Now()
	return &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"Verdict tests"}},
		NotBefore:             now.Add(-time.Minute),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
}

// Root is the root certificate.
func (ca *CA) Root() *x509.Certificate { return ca.root }

// RootsPEM is the root certificate as PEM, as a keyless attestor's
// roots or a Notary attestor's certs.
func (ca *CA) RootsPEM() string { return string(encodeCerts(ca.root)) }

// IntermediatesPEM is the intermediate as PEM, empty without one.
func (ca *CA) IntermediatesPEM() string {
	if ca.intermediate == nil {
		return ""
	}
	return string(encodeCerts(ca.intermediate))
}

// RootPool holds the root.
func (ca *CA) RootPool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.root)
	return p
}

// IntermediatePool holds the intermediate; nil without one.
func (ca *CA) IntermediatePool() *x509.CertPool {
	if ca.intermediate == nil {
		return nil
	}
	p := x509.NewCertPool()
	p.AddCert(ca.intermediate)
	return p
}

// chain is the issuing chain above a leaf: the intermediate if any,
// then the root.
func (ca *CA) chain() []*x509.Certificate {
	if ca.intermediate == nil {
		return []*x509.Certificate{ca.root}
	}
	return []*x509.Certificate{ca.intermediate, ca.root}
}

// Identity is the subject of a code-signing certificate, as Fulcio
// writes it: one email or URI subject alternative name, and the OIDC
// issuer in the Fulcio extensions.
type Identity struct {
	// Email is an email SAN (a person's identity), for example
	// "signer@example.com".
	Email string
	// URI is a URI SAN (a workload's identity), for example
	// "https://github.com/org/repo/.github/workflows/release.yaml@refs/heads/main".
	URI string
	// Issuer is the OIDC issuer, for example
	// "https://token.actions.githubusercontent.com"; none when empty.
	Issuer string
	// Lifetime is how long the certificate is valid from now;
	// DefaultCertLifetime when zero, and already expired when negative.
	Lifetime time.Duration
}

// Certificate is a key pair with a code-signing certificate from a CA
// (a leaf, its chain above it). It signs as cosign keyless does and as
// notation does.
type Certificate struct {
	key   *Key
	cert  *x509.Certificate
	chain []*x509.Certificate
}

// Issue makes a fresh key pair and a code-signing certificate for id,
// as Fulcio issues for an OIDC identity. It fails t on error.
func (ca *CA) Issue(t testing.TB, id Identity) *Certificate {
	t.Helper()
	key := NewKey(t)
	lifetime := id.Lifetime
	if lifetime == 0 {
		lifetime = DefaultCertLifetime
	}
	now := time.Now()
	notBefore, notAfter := now.Add(-time.Minute), now.Add(lifetime)
	if lifetime < 0 {
		notBefore, notAfter = now.Add(2*lifetime), now.Add(lifetime)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "ocitest signer", Organization: []string{"Verdict tests"}},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}
	if id.Email != "" {
		tmpl.EmailAddresses = []string{id.Email}
	}
	if id.URI != "" {
		u, err := url.Parse(id.URI)
		if err != nil {
			t.Fatalf("ocitest: identity uri: %v", err)
		}
		tmpl.URIs = []*url.URL{u}
	}
	if id.Issuer != "" {
		v2, err := asn1.MarshalWithParams(id.Issuer, "utf8")
		if err != nil {
			t.Fatalf("ocitest: issuer extension: %v", err)
		}
		tmpl.ExtraExtensions = []pkix.Extension{
			{Id: oidIssuerV1, Value: []byte(id.Issuer)},
			{Id: oidIssuerV2, Value: v2},
		}
	}
	cert := createCert(t, tmpl, ca.issuer, &key.priv.PublicKey, ca.issuerKey)
	return &Certificate{key: key, cert: cert, chain: ca.chain()}
}

// Cert is the leaf certificate.
func (c *Certificate) Cert() *x509.Certificate { return c.cert }

// Key is the leaf's key pair.
func (c *Certificate) Key() *Key { return c.key }

// CertPEM is the leaf as PEM (cosign's certificate annotation).
func (c *Certificate) CertPEM() string { return string(encodeCerts(c.cert)) }

// ChainPEM is the chain above the leaf as PEM, the intermediate first
// and the root last (cosign's chain annotation).
func (c *Certificate) ChainPEM() string { return string(encodeCerts(c.chain...)) }

// Chain is the leaf, then its intermediate if any, then the root: the
// chain a Notary signature carries.
func (c *Certificate) Chain() []*x509.Certificate {
	return append([]*x509.Certificate{c.cert}, c.chain...)
}

func (c *Certificate) signer() signature.SignerVerifier { return c.key.sv }
func (c *Certificate) certChain() (cert, chain []byte) {
	return encodeCerts(c.cert), encodeCerts(c.chain...)
}

// serverCert issues a TLS server certificate for loopback (127.0.0.1,
// ::1, localhost).
func (ca *CA) serverCert(t testing.TB) tls.Certificate {
	t.Helper()
	key := newECKey(t)
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		Subject:      pkix.Name{CommonName: "ocitest registry"},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		DNSNames:     []string{"localhost"},
	}
	cert := createCert(t, tmpl, ca.issuer, &key.PublicKey, ca.issuerKey)
	chain := [][]byte{cert.Raw}
	for _, c := range ca.chain() {
		chain = append(chain, c.Raw)
	}
	return tls.Certificate{Certificate: chain, PrivateKey: key, Leaf: cert}
}

func newECKey(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("ocitest: generate key: %v", err)
	}
	return k
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatalf("ocitest: serial: %v", err)
	}
	return n
}

func createCert(t testing.TB, tmpl, parent *x509.Certificate, pub crypto.PublicKey, signer crypto.Signer) *x509.Certificate {
	t.Helper()
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		t.Fatalf("ocitest: create certificate %q: %v", tmpl.Subject.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("ocitest: parse certificate %q: %v", tmpl.Subject.CommonName, err)
	}
	return cert
}

func encodeCerts(certs ...*x509.Certificate) []byte {
	var b bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&b, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return b.Bytes()
}
