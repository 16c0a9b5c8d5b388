// Package certs keeps the services' TLS material: a self-signed CA and a
// serving certificate in Secrets, renewed before they expire, with a CA
// rotation that never leaves a replica serving a certificate the API
// server cannot verify; and the one reloader of a serving certificate
// (Reloader, from files or from the Secret, for the webhook and the
// reporter's API server alike) and of a CA bundle (CABundle), so that
// renewals need no restart.
package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"time"
)

// ErrInvalid marks unreadable certificate material.
var ErrInvalid = errors.New("invalid certificate material")

// KeyPair is a certificate with its key, in PEM.
type KeyPair struct {
	CertPEM []byte
	KeyPEM  []byte
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
}

// Cert returns the parsed certificate.
func (k *KeyPair) Cert() *x509.Certificate { return k.cert }

// ParseKeyPair reads a PEM certificate and its ECDSA key.
func ParseKeyPair(certPEM, keyPEM []byte) (*KeyPair, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%w: no certificate", ErrInvalid)
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, fmt.Errorf("%w: no key", ErrInvalid)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return &KeyPair{CertPEM: certPEM, KeyPEM: keyPEM, cert: cert, key: key}, nil
}

func newKey() (*ecdsa.PrivateKey, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	der, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), nil
}

func serial() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

// NewCA makes a self-signed CA valid from now for validity.
func NewCA(commonName string, now time.Time, validity time.Duration) (*KeyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          sn,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-5 * time.Minute),
		NotAfter:              now.Add(validity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return ParseKeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM)
}

// NewServing makes a serving certificate signed by ca for the names and
// addresses.
func NewServing(ca *KeyPair, dnsNames []string, ips []net.IP, now time.Time, validity time.Duration) (*KeyPair, error) {
	key, keyPEM, err := newKey()
	if err != nil {
		return nil, err
	}
	sn, err := serial()
	if err != nil {
		return nil, err
	}
	cn := "verdict-webhook"
	if len(dnsNames) > 0 {
		cn = dnsNames[0]
	}
	notAfter := now.Add(validity)
	if notAfter.After(ca.cert.NotAfter) {
		notAfter = ca.cert.NotAfter
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    now.Add(-5 * time.Minute),
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     dnsNames,
		IPAddresses:  ips,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, err
	}
	return ParseKeyPair(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM)
}

// ParseBundle reads every certificate of a PEM bundle.
func ParseBundle(b []byte) ([]*x509.Certificate, error) {
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return out, nil
		}
		if blk.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		out = append(out, c)
	}
}

// EncodeBundle writes certificates as one PEM bundle.
func EncodeBundle(certs ...*x509.Certificate) []byte {
	var buf bytes.Buffer
	for _, c := range certs {
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	return buf.Bytes()
}

// SignedBy reports whether cert verifies against ca.
func SignedBy(cert, ca *x509.Certificate) bool {
	return cert.CheckSignatureFrom(ca) == nil
}

// BundleHas reports whether the bundle holds ca.
func BundleHas(bundle []byte, ca *x509.Certificate) bool {
	certs, err := ParseBundle(bundle)
	if err != nil {
		return false
	}
	for _, c := range certs {
		if c.Equal(ca) {
			return true
		}
	}
	return false
}
