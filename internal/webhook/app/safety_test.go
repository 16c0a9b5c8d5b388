package app_test

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
	"github.com/verdict-dev/verdict/internal/webhook/registrar"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// ready reports whether the replica's /readyz answers 200.
func (r *replica) ready() bool {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", r.probe))
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// TestE2ERestartDuringNATSOutage: NATS is down and a webhook replica
// restarts: it is ready and enforcing within 5 s (DESIGN.md invariant 8),
// and once NATS is back its results are published.
func TestE2ERestartDuringNATSOutage(t *testing.T) {
	e := newEnv(t)
	lb := e.startBalancer(t)
	a := e.startReplica(t, "replica-a", lb.url(), nil)
	lb.set(a)
	waitEnforced(t, e.kube)

	e.nats.Shutdown()
	e.nats = nil
	lb.set()
	a.stop(t)

	start := time.Now()
	b := e.startReplica(t, "replica-a", lb.url(), nil)
	lb.set(b)
	testkit.EventuallyTrue(t, 5*time.Second, "the condition", b.ready)
	ctx := t.Context()
	_, err := e.kube.CoreV1().Pods("team").Create(ctx, pod("bad-during-outage", true), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "Privileged mode is disallowed") {
		t.Fatalf("privileged pod during the outage: %v", err)
	}
	if _, err := e.kube.CoreV1().Pods("team").Create(ctx, pod("ok-during-outage", false), metav1.CreateOptions{}); err != nil {
		t.Fatalf("compliant pod during the outage: %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("ready and answering %s after the restart, want under 5s", took)
	}
	t.Logf("restarted replica ready and answering %s after start, NATS down", time.Since(start))

	e.startNATS(t)
	p, err := e.kube.CoreV1().Pods("team").Create(ctx, pod("after-outage", false), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := bus.Connect(ctx, queue.WithURL(e.nats.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool {
		n := 0
		_, err := conn.Replay(ctx, bus.StreamResults, func(queue.ReplayMsg) error { n++; return nil },
			queue.WithReplayFilter(bus.ResultsOfResource(string(p.UID))))
		return err == nil && n > 0
	})
}

const denyEverything = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: deny-everything}
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: nothing
    match: {any: [{resources: {kinds: ["*"]}}]}
    validate: {message: "nothing may be written", deny: {}}
`

// TestE2EBlastRadius: an Enforce policy on every kind is installed, then
// every webhook replica stops. What the cluster needs to heal itself is
// still written: Nodes, Leases in kube-node-lease, Events, and anything in
// the excluded namespaces.
func TestE2EBlastRadius(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	for _, ns := range []string{"nats"} {
		if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r := e.startReplica(t, "replica-a", "", func(c *webhookapp.Config) { c.Webhook.ExcludedNamespaces = []string{"nats"} })
	waitEnforced(t, e.kube)
	if _, err := e.dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, denyEverything), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The registrar takes the policy in: every kind, on a Fail webhook.
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool {
		v, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, registrar.DefaultValidatingName, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, w := range v.Webhooks {
			for _, rule := range w.Rules {
				if len(rule.Resources) == 1 && rule.Resources[0] == "*" {
					return true
				}
			}
		}
		return false
	})
	cm := func(ns, name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	}
	testkit.EventuallyTrue(t, 15*time.Second, "the condition", func() bool {
		_, err := e.kube.CoreV1().ConfigMaps("team").Create(ctx, cm("team", "probe"), metav1.CreateOptions{})
		return err != nil && strings.Contains(err.Error(), "nothing may be written")
	})

	r.stop(t)
	// The webhook is gone: an ordinary write fails (failurePolicy Fail)...
	if _, err := e.kube.CoreV1().ConfigMaps("team").Create(ctx, cm("team", "after-stop"), metav1.CreateOptions{}); err == nil {
		t.Fatal("a ConfigMap in an ordinary namespace was admitted with the webhook down and failurePolicy Fail")
	}
	// ...but what the cluster needs goes through.
	writes := map[string]func() error{
		"Node": func() error {
			_, err := e.kube.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}}, metav1.CreateOptions{})
			return err
		},
		"Lease in kube-node-lease": func() error {
			holder := "node-1"
			_, err := e.kube.CoordinationV1().Leases("kube-node-lease").Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{Name: "node-1"}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{})
			return err
		},
		"Lease in team": func() error {
			_, err := e.kube.CoordinationV1().Leases("team").Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: "elector"}}, metav1.CreateOptions{})
			return err
		},
		"Event in team": func() error {
			_, err := e.kube.CoreV1().Events("team").Create(ctx, &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: "ev-1"},
				InvolvedObject: corev1.ObjectReference{Kind: "Pod", Namespace: "team", Name: "x"},
				Reason:         "Test", Message: "still written", Type: corev1.EventTypeNormal,
			}, metav1.CreateOptions{})
			return err
		},
	}
	for _, ns := range []string{"kube-system", "kube-public", "kube-node-lease", "verdict", "nats"} {
		writes["ConfigMap in "+ns] = func() error {
			_, err := e.kube.CoreV1().ConfigMaps(ns).Create(ctx, cm(ns, "written"), metav1.CreateOptions{})
			return err
		}
	}
	for name, write := range writes {
		if err := write(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestE2EMutualTLS: the replica requires the API server's client
// certificate; admissions through the API server work (as in every e2e
// test here), a caller without it is refused at the handshake.
func TestE2EMutualTLS(t *testing.T) {
	e := newEnv(t)
	r := e.startReplica(t, "replica-a", "", nil)
	waitEnforced(t, e.kube)
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"forged","operation":"CREATE","kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"namespace":"team","object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"forged","namespace":"team","uid":"forged-uid"}}}}`
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the attacker does not care
	resp, err := client.Post(fmt.Sprintf("https://127.0.0.1:%d/validate", r.port), "application/json", strings.NewReader(body))
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a review without a client certificate was answered %d", resp.StatusCode)
	}
	if !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("refused, but not for the missing certificate: %v", err)
	}
}
