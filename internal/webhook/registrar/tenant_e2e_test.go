package registrar_test

import (
	"encoding/pem"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/webhook/registrar"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// Cluster-wide: ConfigMaps everywhere go through the webhook, and fail
// closed.
const cmEnforce = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: cms}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`

// A tenant's Policy in team-a on every kind, failing closed, asking for
// the longest timeout the API server allows.
const tenantEverything = `apiVersion: verdict.dev/v1
kind: Policy
metadata: {name: everything, namespace: team-a}
spec:
  webhookTimeoutSeconds: 30
  rules:
  - name: r
    match: {any: [{resources: {kinds: ["*"]}}]}
    validate: {message: no, deny: {}}
`

// Another tenant's, in team-c, failing open.
const tenantEverythingIgnore = `apiVersion: verdict.dev/v1
kind: Policy
metadata: {name: everything, namespace: team-c}
spec:
  failurePolicy: Ignore
  rules:
  - name: r
    match: {any: [{resources: {kinds: ["*"]}}]}
    validate: {message: no, deny: {}}
`

// TestE2ETenantPolicyStaysInItsNamespace: with the webhook unreachable,
// a tenant's Policy on every kind (failurePolicy Fail, timeout 30) makes
// writes fail in its own namespace only: a Secret in another namespace
// and a cluster-scoped object are written, a Secret in a failing-open
// tenant's namespace too, while the cluster policy still fails
// ConfigMaps everywhere; the shared webhook keeps the cluster policies'
// timeout.
func TestE2ETenantPolicyStaysInItsNamespace(t *testing.T) {
	cp := controlplane.StartForTest(t)
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ctx := t.Context()
	for _, ns := range []string{"team-a", "team-b", "team-c"} {
		n := namespace(ns)
		if _, err := client.CoreV1().Namespaces().Create(ctx, &n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// An address nothing listens on: every call is refused at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "https://" + ln.Addr().String()
	_ = ln.Close()
	src := &staticSource{p: []*engine.Policy{compile(t, cmEnforce), compile(t, tenantEverything), compile(t, tenantEverythingIgnore)}, changed: make(chan struct{}, 1)}
	opts := registrar.Options{URL: url, CABundle: cp.CACertPEM(), Filter: admissionfilter.New([]string{"verdict"}, nil)}
	reg := registrar.New(client, registrar.NewDiscoveryResolver(client.Discovery()), src, opts)
	if _, err := reg.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	val, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, registrar.DefaultValidatingName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range val.Webhooks {
		if w.Name == "validate-fail.verdict.dev" && *w.TimeoutSeconds != 10 {
			t.Errorf("the shared webhook's timeout is %d s, want the cluster policies' 10", *w.TimeoutSeconds)
		}
	}

	secret := func(ns string) error {
		_, err := client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s"}}, metav1.CreateOptions{})
		return err
	}
	configMap := func(ns string) error {
		_, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}}, metav1.CreateOptions{})
		return err
	}
	// The configuration reaches the API server's admission within a
	// moment: wait until the cluster policy's webhook is called.
	deadline := time.Now().Add(10 * time.Second)
	for configMap("team-b") == nil {
		if time.Now().After(deadline) {
			t.Fatal("the cluster policy's webhook is never called")
		}
		_ = client.CoreV1().ConfigMaps("team-b").Delete(ctx, "c", metav1.DeleteOptions{})
		time.Sleep(100 * time.Millisecond)
	}
	for name, tc := range map[string]struct {
		write   func() error
		written bool
	}{
		"a Secret in another namespace":        {write: func() error { return secret("team-b") }, written: true},
		"a Secret in the tenant's namespace":   {write: func() error { return secret("team-a") }},
		"a Secret in a failing-open tenant's":  {write: func() error { return secret("team-c") }, written: true},
		"a ConfigMap under the cluster policy": {write: func() error { return configMap("team-b") }},
		"a ConfigMap in the tenant's, too":     {write: func() error { return configMap("team-a") }},
		"a cluster-scoped object":              {write: func() error { return clusterRole(t, client) }, written: true},
		"a Namespace, which the tenant cannot own": {write: func() error {
			n := namespace("team-d")
			_, err := client.CoreV1().Namespaces().Create(ctx, &n, metav1.CreateOptions{})
			return err
		}, written: true},
	} {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			err := tc.write()
			if tc.written && err != nil {
				t.Errorf("refused: %v", err)
			}
			if !tc.written && err == nil {
				t.Error("written while its webhook is unreachable and fails closed")
			}
			if d := time.Since(start); d > 5*time.Second {
				t.Errorf("took %s", d)
			}
		})
	}
}

func clusterRole(t *testing.T, client kubernetes.Interface) error {
	_, err := client.RbacV1().ClusterRoles().Create(t.Context(), &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "tenant-test"}}, metav1.CreateOptions{})
	return err
}

// TestE2ETenantTimeoutWithAHungReplica: the webhook completes TLS and
// never answers. A tenant's Policy on every kind asking for 30 s makes a
// Secret create in another namespace wait for nothing (it is not sent),
// and one in its own namespace wait the capped 10 s, then fail as its
// failure policy says. Before, both waited 30 s and failed.
func TestE2ETenantTimeoutWithAHungReplica(t *testing.T) {
	cp := controlplane.StartForTest(t)
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ctx := t.Context()
	for _, ns := range []string{"team-a", "team-b"} {
		n := namespace(ns)
		if _, err := client.CoreV1().Namespaces().Create(ctx, &n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hang := make(chan struct{})
	srv := httptest.NewTLSServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-hang }))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(hang) })
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	src := &staticSource{p: []*engine.Policy{compile(t, tenantEverything)}, changed: make(chan struct{}, 1)}
	opts := registrar.Options{URL: srv.URL, CABundle: ca, Filter: admissionfilter.New([]string{"verdict"}, nil)}
	if _, err := registrar.New(client, registrar.NewDiscoveryResolver(client.Discovery()), src, opts).Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	secret := func(ns, name string) (time.Duration, error) {
		start := time.Now()
		_, err := client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return time.Since(start), err
	}
	// The configuration reaches admission within a moment.
	time.Sleep(2 * time.Second)
	if d, err := secret("team-b", "s"); err != nil || d > time.Second {
		t.Errorf("a Secret in another namespace: %s, %v; want written within a second", d, err)
	}
	if d, err := secret("team-a", "s"); err == nil || d < 9*time.Second || d > 12*time.Second {
		t.Errorf("a Secret in the tenant's namespace: %s, %v; want refused after the capped 10 s", d, err)
	}
}
