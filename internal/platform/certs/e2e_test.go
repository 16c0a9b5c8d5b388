package certs_test

import (
	"context"
	"crypto/x509"
	"net"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
)

// clock is a test clock the renewer reads.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestE2ERotation walks a CA rotation on a real API server and checks,
// after every step, that the serving certificate verifies against the
// bundle the API server trusts: no moment exists where a request would
// fail verification.
func TestE2ERotation(t *testing.T) {
	cp := controlplane.StartForTest(t)
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ctx := t.Context()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "verdict"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	clk := &clock{now: time.Now()}
	// trustedBundle stands for the caBundle of the webhook configurations:
	// the registrar copies the CA secret's bundle there.
	var trustedBundle []byte
	trusted := func(_ context.Context, ca *x509.Certificate) (bool, error) {
		return certs.BundleHas(trustedBundle, ca), nil
	}
	r, err := certs.NewRenewer(client, certs.Config{
		Namespace: "verdict", CASecret: "verdict-ca", TLSSecret: "verdict-tls",
		DNSNames: []string{"verdict-webhook.verdict.svc"}, IPs: []net.IP{net.ParseIP("127.0.0.1")},
		CAValidity: 10 * time.Hour, CertValidity: 4 * time.Hour, RenewBefore: time.Hour, ReloadGrace: time.Minute,
		Now: clk.Now,
	}, trusted)
	if err != nil {
		t.Fatal(err)
	}
	step := func(want certs.Step) {
		t.Helper()
		got, err := r.Reconcile(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("step %s, want %s", got, want)
		}
	}
	push := func() { // what the registrar does
		b, err := certs.Bundle(ctx, client, "verdict", "verdict-ca")
		if err != nil {
			t.Fatal(err)
		}
		trustedBundle = b
	}
	verifies := func() {
		t.Helper()
		s, err := client.CoreV1().Secrets("verdict").Get(ctx, "verdict-tls", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		kp, err := certs.ParseKeyPair(s.Data[certs.KeyCert], s.Data[certs.KeyKey])
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(trustedBundle) {
			t.Fatal("empty trusted bundle")
		}
		if _, err := kp.Cert().Verify(x509.VerifyOptions{Roots: pool, DNSName: "verdict-webhook.verdict.svc", CurrentTime: clk.Now()}); err != nil {
			t.Fatalf("serving certificate does not verify against the trusted bundle: %v", err)
		}
	}

	step(certs.StepCreatedCA)
	step(certs.StepIssuedCert)
	push()
	verifies()
	step(certs.StepNone)

	// The serving certificate nears expiry: renewed by the same CA.
	clk.Add(3*time.Hour + time.Minute)
	step(certs.StepIssuedCert)
	verifies()
	step(certs.StepNone)

	clk.Add(3 * time.Hour)
	step(certs.StepIssuedCert)
	verifies()

	// The CA nears expiry: new CA, the bundle holds both.
	clk.Add(3 * time.Hour)
	step(certs.StepRotatedCA)
	verifies() // the old serving certificate, old CA still trusted
	// Not yet trusted: the renewer waits instead of switching.
	step(certs.StepWaitTrust)
	verifies()
	push()
	step(certs.StepIssuedCert)
	verifies()
	// Replicas get ReloadGrace to load the new certificate.
	step(certs.StepWaitReload)
	clk.Add(2 * time.Minute)
	step(certs.StepDroppedOld)
	push()
	verifies()
	step(certs.StepNone)
	if b, _ := certs.ParseBundle(trustedBundle); len(b) != 1 {
		t.Fatalf("bundle holds %d CAs after rotation", len(b))
	}
}

// TestE2ESecretSource checks that a replica serves the certificate of the
// Secret and follows its renewal.
func TestE2ESecretSource(t *testing.T) {
	cp := controlplane.StartForTest(t)
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ctx := t.Context()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "verdict"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	src := certs.WatchSecret(ctx, client, "verdict", "verdict-tls")
	if src.Loaded() {
		t.Fatal("loaded before the secret exists")
	}
	r, err := certs.NewRenewer(client, certs.Config{
		Namespace: "verdict", CASecret: "verdict-ca", TLSSecret: "verdict-tls", IPs: []net.IP{net.ParseIP("127.0.0.1")},
		CertValidity: 2 * time.Hour, RenewBefore: time.Hour,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, err := r.Reconcile(ctx); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !src.Loaded() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	first, err := src.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	// Renew by hand (as the renewer would) and see the replica follow.
	s, _ := client.CoreV1().Secrets("verdict").Get(ctx, "verdict-tls", metav1.GetOptions{})
	ca, _ := client.CoreV1().Secrets("verdict").Get(ctx, "verdict-ca", metav1.GetOptions{})
	caKP, err := certs.ParseKeyPair(ca.Data[certs.KeyCert], ca.Data[certs.KeyKey])
	if err != nil {
		t.Fatal(err)
	}
	kp, err := certs.NewServing(caKP, nil, []net.IP{net.ParseIP("127.0.0.1")}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s.Data[certs.KeyCert], s.Data[certs.KeyKey] = kp.CertPEM, kp.KeyPEM
	if _, err := client.CoreV1().Secrets("verdict").Update(ctx, s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, _ := src.GetCertificate(nil)
		if c != first {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatal("the replica did not load the renewed certificate")
}
