package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// certLifetime is long enough for any test run or demo session.
const certLifetime = 7 * 24 * time.Hour

// authority is the throw-away cluster CA: it signs the serving and client
// certificates of the control plane, and kube-controller-manager's CSR
// signer uses it too.
type authority struct {
	cert    *x509.Certificate
	key     crypto.Signer
	certPEM []byte
	keyPEM  []byte
}

// keyPair is a certificate and its private key, PEM-encoded.
type keyPair struct {
	certPEM []byte
	keyPEM  []byte
}

func newKey() (*ecdsa.PrivateKey, error) {
	return ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
}

func serialNumber() (*big.Int, error) {
	return rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
}

func encodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func encodePublicKey(key crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

func newAuthority(commonName string) (*authority, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &authority{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}, nil
}

// certRequest describes a leaf certificate: client, server or both.
type certRequest struct {
	commonName    string
	organizations []string
	dnsNames      []string
	ips           []net.IP
	client        bool
	server        bool
}

func (a *authority) issue(req certRequest) (*keyPair, error) {
	key, err := newKey()
	if err != nil {
		return nil, err
	}
	serial, err := serialNumber()
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: req.commonName, Organization: req.organizations},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		DNSNames:              req.dnsNames,
		IPAddresses:           req.ips,
	}
	if req.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	if req.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, err
	}
	keyPEM, err := encodeKey(key)
	if err != nil {
		return nil, err
	}
	return &keyPair{
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		keyPEM:  keyPEM,
	}, nil
}

// pki is every file the components need, written under one directory.
type pki struct {
	ca        *authority
	admin     *keyPair
	apiServer *keyPair
	kcm       *keyPair // kube-controller-manager's client identity
	kcmServe  *keyPair // and its serving certificate

	// The front proxy: the apiserver's identity towards aggregated API
	// servers, and the CA that components delegating authentication to the
	// apiserver (the controller manager, extension apiservers) trust for
	// request headers.
	frontProxyCA     *authority
	frontProxyClient *keyPair
	// The apiserver's client identity towards admission webhooks (mutual
	// TLS), from a CA of its own so that a webhook trusting it trusts
	// nothing else of the cluster.
	webhookClientCA *authority
	webhookClient   *keyPair
	saKeyPEM        []byte
	saPubPEM        []byte

	// file paths
	caCert, caKey                 string
	apiServerCert, apiServerKey   string
	kcmServeCert, kcmServeKey     string
	frontProxyCACert              string
	frontProxyCert, frontProxyKey string
	webhookClientCACert           string
	saKey, saPub                  string
}

const (
	serviceIP            = "10.96.0.1" // first address of serviceClusterIPRange
	frontProxyClientName = "front-proxy-client"
	// WebhookClientName is the common name of the certificate the
	// apiserver presents to admission webhooks.
	WebhookClientName = "kube-apiserver-webhook-client"
)

func newPKI(dir string) (*pki, error) {
	ca, err := newAuthority("verdict-controlplane-ca")
	if err != nil {
		return nil, fmt.Errorf("cluster CA: %w", err)
	}
	p := &pki{ca: ca}
	loopback := []net.IP{net.IPv4(127, 0, 0, 1)}
	if p.apiServer, err = ca.issue(certRequest{
		commonName: "kube-apiserver",
		dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
			"kubernetes.default.svc.cluster.local"},
		ips:    append(loopback, net.ParseIP(serviceIP)),
		server: true,
	}); err != nil {
		return nil, fmt.Errorf("apiserver serving certificate: %w", err)
	}
	if p.admin, err = ca.issue(certRequest{
		commonName:    "verdict-admin",
		organizations: []string{"system:masters"},
		client:        true,
	}); err != nil {
		return nil, fmt.Errorf("admin client certificate: %w", err)
	}
	if p.kcm, err = ca.issue(certRequest{commonName: "system:kube-controller-manager", client: true}); err != nil {
		return nil, fmt.Errorf("controller-manager client certificate: %w", err)
	}
	if p.kcmServe, err = ca.issue(certRequest{
		commonName: "kube-controller-manager",
		dnsNames:   []string{"localhost"},
		ips:        loopback,
		server:     true,
	}); err != nil {
		return nil, fmt.Errorf("controller-manager serving certificate: %w", err)
	}
	if p.frontProxyCA, err = newAuthority("verdict-front-proxy-ca"); err != nil {
		return nil, fmt.Errorf("front-proxy CA: %w", err)
	}
	if p.frontProxyClient, err = p.frontProxyCA.issue(certRequest{commonName: frontProxyClientName, client: true}); err != nil {
		return nil, fmt.Errorf("front-proxy client certificate: %w", err)
	}
	if p.webhookClientCA, err = newAuthority("verdict-webhook-client-ca"); err != nil {
		return nil, fmt.Errorf("webhook client CA: %w", err)
	}
	if p.webhookClient, err = p.webhookClientCA.issue(certRequest{commonName: WebhookClientName, client: true}); err != nil {
		return nil, fmt.Errorf("webhook client certificate: %w", err)
	}
	saKey, err := newKey()
	if err != nil {
		return nil, fmt.Errorf("service-account key: %w", err)
	}
	if p.saKeyPEM, err = encodeKey(saKey); err != nil {
		return nil, err
	}
	if p.saPubPEM, err = encodePublicKey(saKey.Public()); err != nil {
		return nil, err
	}

	files := []struct {
		path *string
		name string
		data []byte
	}{
		{&p.caCert, "ca.crt", ca.certPEM},
		{&p.caKey, "ca.key", ca.keyPEM},
		{&p.apiServerCert, "apiserver.crt", p.apiServer.certPEM},
		{&p.apiServerKey, "apiserver.key", p.apiServer.keyPEM},
		{&p.kcmServeCert, "controller-manager.crt", p.kcmServe.certPEM},
		{&p.kcmServeKey, "controller-manager.key", p.kcmServe.keyPEM},
		{&p.frontProxyCACert, "front-proxy-ca.crt", p.frontProxyCA.certPEM},
		{&p.frontProxyCert, "front-proxy-client.crt", p.frontProxyClient.certPEM},
		{&p.frontProxyKey, "front-proxy-client.key", p.frontProxyClient.keyPEM},
		{&p.webhookClientCACert, "webhook-client-ca.crt", p.webhookClientCA.certPEM},
		{&p.saKey, "sa.key", p.saKeyPEM},
		{&p.saPub, "sa.pub", p.saPubPEM},
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for _, f := range files {
		*f.path = filepath.Join(dir, f.name)
		if err := os.WriteFile(*f.path, f.data, 0o600); err != nil {
			return nil, err
		}
	}
	return p, nil
}
