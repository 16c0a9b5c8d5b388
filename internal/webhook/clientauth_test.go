package webhook

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/testkit"
)

// testCA is a CA that issues client certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t testing.TB, cn string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// client issues a client certificate.
func (ca *testCA) client(t testing.TB, cn string) tls.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}
}

// With a client CA, only callers presenting a certificate it signed get
// past the handshake; readiness still works.
func TestMutualTLS(t *testing.T) {
	apiServerCA, stranger := newTestCA(t, "webhook-client-ca"), newTestCA(t, "someone-else")
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, apiServerCA.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _, _ := selfSigned(t, "webhook.test")
	cfg := testConfig(func(c *Config) { c.ClientCAFile = caFile })
	s, err := New(cfg, WithPolicySource(staticSource(t, enforcePrivileged)), WithCertSource(certs.Static(cert)),
		WithRegistry(prometheus.NewRegistry()), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	sv := serve(t, s)
	t.Cleanup(func() {
		sv.cancel()
		if err := <-sv.done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	testkit.EventuallyTrue(t, 10*time.Second, "ready with mutual TLS on", func() bool { return s.Ready(t.Context()) == nil })

	body := string(mustJSON(t, reviewOf(t, admissionv1.Create, pod("p", privileged))))
	post := func(clientCerts ...tls.Certificate) (int, error) {
		c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
			InsecureSkipVerify: true, //nolint:gosec // test client: the server side is what is tested
			Certificates:       clientCerts,
		}}}
		resp, err := c.Post("https://"+sv.addr+PathValidate, "application/json", strings.NewReader(body))
		if err != nil {
			return 0, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode, nil
	}
	cases := map[string]struct {
		certs []tls.Certificate
		ok    bool
	}{
		"no client certificate":         {},
		"certificate of another CA":     {certs: []tls.Certificate{stranger.client(t, "kube-apiserver-webhook-client")}},
		"the API server's certificate":  {certs: []tls.Certificate{apiServerCA.client(t, "kube-apiserver-webhook-client")}, ok: true},
		"serving cert as a client cert": {certs: []tls.Certificate{cert}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, err := post(tc.certs...)
			if tc.ok {
				if err != nil || code != http.StatusOK {
					t.Fatalf("status %d, error %v", code, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("answered %d without a valid client certificate", code)
			}
			if !strings.Contains(err.Error(), "certificate") && !strings.Contains(err.Error(), "tls") {
				t.Fatalf("refused, but not at the handshake: %v", err)
			}
		})
	}

	t.Run("a bundle without certificates is refused at start", func(t *testing.T) {
		bad := filepath.Join(t.TempDir(), "empty.crt")
		if err := os.WriteFile(bad, []byte("not a certificate"), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := New(testConfig(func(c *Config) { c.ClientCAFile = bad }), WithPolicySource(staticSource(t)),
			WithCertSource(certs.Static(cert)), WithRegistry(prometheus.NewRegistry()), WithLogger(testLogger(t)))
		if err == nil || !strings.Contains(err.Error(), "client-ca-file") {
			t.Fatalf("New: %v", err)
		}
	})
}
