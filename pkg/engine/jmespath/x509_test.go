package jmespath

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"net"
	"reflect"
	"testing"
	"time"
)

type testPKI struct {
	rsaKey  *rsa.PrivateKey
	certPEM string
	csrPEM  string
	ecPEM   string
}

func newTestPKI(t *testing.T) testPKI {
	t.Helper()
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(42),
		Subject:               pkix.Name{CommonName: "*.kyverno.svc", Organization: []string{"Verdict"}},
		NotBefore:             time.Date(2022, 10, 10, 11, 46, 32, 0, time.UTC),
		NotAfter:              time.Date(2023, 10, 10, 12, 46, 32, 0, time.UTC),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		DNSNames:              []string{"a.example"},
		IPAddresses:           []net.IP{net.ParseIP("10.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &rsaKey.PublicKey, rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	csrDER, err := x509.CreateCertificateRequest(rand.Reader, &x509.CertificateRequest{
		Subject:  pkix.Name{CommonName: "csr.example"},
		DNSNames: []string{"csr.example"},
	}, rsaKey)
	if err != nil {
		t.Fatal(err)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &ecKey.PublicKey, ecKey)
	if err != nil {
		t.Fatal(err)
	}
	encode := func(typ string, der []byte) string {
		return string(pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}))
	}
	return testPKI{
		rsaKey:  rsaKey,
		certPEM: encode("CERTIFICATE", der),
		csrPEM:  encode("CERTIFICATE REQUEST", csrDER),
		ecPEM:   encode("CERTIFICATE", ecDER),
	}
}

func TestX509Decode(t *testing.T) {
	pki := newTestPKI(t)
	i := newTestInterpreter(t)
	data := map[string]any{
		"cert":    pki.certPEM,
		"certB64": base64.StdEncoding.EncodeToString([]byte(pki.certPEM)),
		"csr":     pki.csrPEM,
		"ec":      pki.ecPEM,
		"pubkey":  string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: []byte{1, 2, 3}})),
		"broken":  string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte{1, 2, 3}})),
	}
	runSearchCases(t, i, map[string]searchCase{
		"common name":       {expr: "x509_decode(cert).Subject.CommonName", data: data, want: "*.kyverno.svc"},
		"organization":      {expr: "x509_decode(cert).Subject.Organization", data: data, want: []any{"Verdict"}},
		"issuer":            {expr: "x509_decode(cert).Issuer.CommonName", data: data, want: "*.kyverno.svc"},
		"not after":         {expr: "x509_decode(cert).NotAfter", data: data, want: "2023-10-10T12:46:32Z"},
		"is ca":             {expr: "x509_decode(cert).IsCA", data: data, want: true},
		"key usage":         {expr: "x509_decode(cert).KeyUsage", data: data, want: 37.0},
		"serial number":     {expr: "x509_decode(cert).SerialNumber", data: data, want: 42.0},
		"dns names":         {expr: "x509_decode(cert).DNSNames", data: data, want: []any{"a.example"}},
		"ip addresses":      {expr: "x509_decode(cert).IPAddresses", data: data, want: []any{"10.0.0.1"}},
		"public key e":      {expr: "x509_decode(cert).PublicKey.E", data: data, want: 65537.0},
		"public key n":      {expr: "x509_decode(cert).PublicKey.N", data: data, want: pki.rsaKey.N.String()},
		"after base64":      {expr: "x509_decode(base64_decode(certB64)).Subject.CommonName", data: data, want: "*.kyverno.svc"},
		"csr":               {expr: "x509_decode(csr).Subject.CommonName", data: data, want: "csr.example"},
		"csr dns names":     {expr: "x509_decode(csr).DNSNames", data: data, want: []any{"csr.example"}},
		"csr public key e":  {expr: "x509_decode(csr).PublicKey.E", data: data, want: 65537.0},
		"ecdsa unsupported": {expr: "x509_decode(ec)", data: data, wantErr: ErrFunction},
		"other pem type":    {expr: "x509_decode(pubkey)", data: data, wantErr: ErrFunction},
		"corrupt der":       {expr: "x509_decode(broken)", data: data, wantErr: ErrFunction},
		"not pem":           {expr: "x509_decode('hello')", wantErr: ErrFunction},
		"not a string":      {expr: "x509_decode(`{}`)", wantErr: ErrFunction},
	})

	t.Run("whole object is JSON compatible", func(t *testing.T) {
		got, err := i.Search("x509_decode(@)", pki.certPEM)
		if err != nil {
			t.Fatal(err)
		}
		assertJSONCompatible(t, got)
		obj, ok := got.(map[string]any)
		if !ok {
			t.Fatalf("x509_decode = %T, want an object", got)
		}
		for _, key := range []string{"Raw", "Extensions", "Subject", "NotBefore", "PublicKeyAlgorithm", "SignatureAlgorithm"} {
			if _, ok := obj[key]; !ok {
				t.Errorf("x509_decode result lacks %q", key)
			}
		}
		wantKey := map[string]any{"N": pki.rsaKey.N.String(), "E": 65537.0}
		if !reflect.DeepEqual(obj["PublicKey"], wantKey) {
			t.Errorf("PublicKey = %#v, want %#v", obj["PublicKey"], wantKey)
		}
	})
}
