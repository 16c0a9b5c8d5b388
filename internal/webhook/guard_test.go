package webhook

import (
	"crypto/tls"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/testkit"
)

const denyEverything = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: deny-everything, uid: pol-uid-9, resourceVersion: "9"}
spec:
  validationFailureAction: Enforce
  rules:
  - name: nothing
    match: {any: [{resources: {kinds: ["*"]}}]}
    validate: {message: nothing is allowed, deny: {}}
`

func resourceOf(group, resource string) func(*admissionv1.AdmissionRequest) {
	return func(r *admissionv1.AdmissionRequest) {
		r.Resource = metav1.GroupVersionResource{Group: group, Version: "v1", Resource: resource}
	}
}

// Requests for what the cluster needs to heal itself, and for excluded
// namespaces, are admitted without evaluation even if a configuration
// (stale, or edited by hand) or a forged review sends them.
func TestExcludedRequestsAreAdmitted(t *testing.T) {
	h := newHarness(t, staticSource(t, denyEverything), testConfig(func(c *Config) {
		c.ExcludedNamespaces = []string{"nats"}
	}))
	node := map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": "n1", "uid": "n1"}}
	lease := map[string]any{"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": map[string]any{"name": "n1", "namespace": "kube-node-lease", "uid": "l1"}}
	event := map[string]any{"apiVersion": "v1", "kind": "Event", "metadata": map[string]any{"name": "e1", "namespace": "default", "uid": "e1"}}
	ns := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "kube-system", "uid": "ns1"}}
	cases := map[string]struct {
		review  *admissionv1.AdmissionReview
		allowed bool
	}{
		"node":                   {review: reviewOf(t, admissionv1.Update, node, resourceOf("", "nodes")), allowed: true},
		"lease":                  {review: reviewOf(t, admissionv1.Update, lease, resourceOf("coordination.k8s.io", "leases")), allowed: true},
		"event":                  {review: reviewOf(t, admissionv1.Create, event, resourceOf("", "events")), allowed: true},
		"pod in kube-system":     {review: reviewOf(t, admissionv1.Create, pod("p", inNamespace("kube-system")), resourceOf("", "pods")), allowed: true},
		"pod in nats":            {review: reviewOf(t, admissionv1.Create, pod("p", inNamespace("nats")), resourceOf("", "pods")), allowed: true},
		"the kube-system object": {review: reviewOf(t, admissionv1.Update, ns, resourceOf("", "namespaces")), allowed: true},
		"pod in default":         {review: reviewOf(t, admissionv1.Create, pod("p"), resourceOf("", "pods")), allowed: false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			resp := h.admit(PathValidate, tc.review)
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed = %v, want %v (%+v)", resp.Allowed, tc.allowed, resp.Result)
			}
		})
	}
	if got := counter(t, h.reg, "verdict_webhook_requests_total", map[string]string{"endpoint": "validate", "outcome": "skipped"}); got != 6 {
		t.Fatalf("skipped requests = %v, want 6", got)
	}
}

// A review whose object contradicts the request is refused, not evaluated.
func TestInconsistentReviewIsRefused(t *testing.T) {
	h := newHarness(t, staticSource(t, enforcePrivileged), testConfig())
	cases := map[string]struct {
		mod  func(*admissionv1.AdmissionRequest)
		want string
	}{
		"kind":      {mod: func(r *admissionv1.AdmissionRequest) { r.Kind.Kind = "ConfigMap" }, want: "request.kind says ConfigMap"},
		"namespace": {mod: func(r *admissionv1.AdmissionRequest) { r.Namespace = "kube-public-not" }, want: "request.namespace says"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			code, out := h.post(PathValidate, "application/json", mustJSON(t, reviewOf(t, admissionv1.Create, pod("p", privileged), tc.mod)))
			if code != http.StatusBadRequest || !strings.Contains(string(out), tc.want) {
				t.Fatalf("status %d: %s", code, out)
			}
		})
	}
}

// At most MaxConcurrentEvaluations requests are evaluated at once; one
// more waits EvaluationQueueTimeout and is answered 429, quickly.
func TestConcurrencyLimit(t *testing.T) {
	src := stuckSource{release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(src.release) }) }
	t.Cleanup(release)
	h := newHarness(t, src, testConfig(func(c *Config) {
		c.MaxConcurrentEvaluations = 2
		c.EvaluationQueueTimeout = 100 * time.Millisecond
	}))
	body := string(mustJSON(t, reviewOf(t, admissionv1.Create, pod("p"))))
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test client
	var wg sync.WaitGroup
	codes := make(chan int, 2)
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := client.Post(h.url+PathValidate, "application/json", strings.NewReader(body))
			if err != nil {
				codes <- 0
				return
			}
			_ = resp.Body.Close()
			codes <- resp.StatusCode
		}()
	}
	testkit.EventuallyTrue(t, 10*time.Second, "two evaluations in flight", func() bool {
		return gaugeValue(h.s.metrics.inFlight) == 2
	})
	for i := range 5 {
		start := time.Now()
		code, out := h.post(PathValidate, "application/json", []byte(body))
		if took := time.Since(start); code != http.StatusTooManyRequests || took > 2*time.Second {
			t.Fatalf("flood request %d: status %d after %s: %s", i, code, took, out)
		}
	}
	if got := counter(t, h.reg, "verdict_webhook_overload_rejections_total", nil); got != 5 {
		t.Fatalf("overload rejections = %v, want 5", got)
	}
	if got := counter(t, h.reg, "verdict_webhook_requests_total", map[string]string{"endpoint": "validate", "outcome": "overloaded"}); got != 5 {
		t.Fatalf("overloaded requests = %v, want 5", got)
	}
	// Probes never wait for a slot.
	if code, _ := h.post(PathHealthz, "application/json", nil); code != http.StatusOK {
		t.Fatalf("healthz while saturated: %d", code)
	}
	release()
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != http.StatusOK {
			t.Fatalf("a request holding a slot ended %d", c)
		}
	}
}
