package registrar_test

import (
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/webhook/registrar"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// earlierRelease stands in for a webhook replica of a release before
// WebhookAPI 2: it allows every review sent to a path that release
// serves and answers 404 to the rest, as its mux did.
func earlierRelease(t *testing.T) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !slices.Contains(registrar.PathsOfRelease1, r.URL.Path) {
			http.NotFound(w, r)
			return
		}
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		review.Response = &admissionv1.AdmissionResponse{UID: review.Request.UID, Allowed: true}
		review.Request = nil
		_ = json.NewEncoder(w).Encode(&review)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestE2ERollingUpgradeKeepsEveryReplicaReachable: a rolling upgrade
// from a release whose webhook serves only /mutate, /validate and
// /validate-policy. While one of its pods is left (no
// verdict.dev/webhook-api label), the leader of the new release points
// every webhook at those paths, so writes the old replica answers go
// through; once that pod is gone, the webhooks move to the scoped paths
// at once (the pod watch, not the resync). Before, the new leader wrote
// the scoped paths at once and the old replica answered 404: every write
// a webhook failing closed received was refused until the rollout ended.
func TestE2ERollingUpgradeKeepsEveryReplicaReachable(t *testing.T) {
	cp := controlplane.StartForTest(t)
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ctx := t.Context()
	for _, ns := range []string{"verdict", "team"} {
		n := namespace(ns)
		if _, err := client.CoreV1().Namespaces().Create(ctx, &n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// No controller manager runs: the pods' service account is made here.
	if _, err := client.CoreV1().ServiceAccounts("verdict").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	selector := map[string]string{"app.kubernetes.io/name": "verdict", "app.kubernetes.io/component": "webhook"}
	pod := func(name string, api string) {
		labels := map[string]string{"pod-template-hash": name}
		for k, v := range selector {
			labels[k] = v
		}
		if api != "" {
			labels[registrar.LabelWebhookAPI] = api
		}
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "verdict", Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "webhook", Image: "verdict-webhook"}}},
		}
		if _, err := client.CoreV1().Pods("verdict").Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod("webhook-old", "")
	pod("webhook-new", "2")
	// Another component's pod is not a webhook replica.
	if _, err := client.CoreV1().Pods("verdict").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "reporter", Namespace: "verdict", Labels: map[string]string{"app.kubernetes.io/name": "verdict", "app.kubernetes.io/component": "reporter"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "reporter", Image: "verdict-reporter"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	old := earlierRelease(t)
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: old.Certificate().Raw})
	src := &staticSource{p: []*engine.Policy{compile(t, cmEnforce), compile(t, tenantPolicy)}, changed: make(chan struct{}, 1)}
	opts := registrar.Options{URL: old.URL, CABundle: ca, Filter: admissionfilter.New([]string{"verdict"}, nil), GuardTTL: true}
	replicas, err := registrar.WatchReplicas(ctx, client, "verdict", "app.kubernetes.io/name=verdict,app.kubernetes.io/component=webhook")
	if err != nil {
		t.Fatal(err)
	}
	reg := registrar.New(client, registrar.NewDiscoveryResolver(client.Discovery()), src, opts).WithReplicas(replicas)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = reg.Loop(ctx, nil, time.Hour) // no resync: only the pod watch moves it
	}()
	t.Cleanup(func() { <-done })

	paths := func() []string {
		var out []string
		val, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, registrar.DefaultValidatingName, metav1.GetOptions{})
		if err != nil {
			return nil
		}
		for _, w := range val.Webhooks {
			out = append(out, strings.TrimPrefix(*w.ClientConfig.URL, old.URL))
		}
		return out
	}
	testkit.EventuallyTrue(t, 10*time.Second, "the condition", func() bool { return len(paths()) > 0 })
	for _, p := range paths() {
		if !slices.Contains(registrar.PathsOfRelease1, p) {
			t.Fatalf("with an earlier release's replica left, a webhook points at %s: it answers 404", p)
		}
	}
	configMap := func(ns, name string) error {
		_, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	}
	// The configuration reaches the API server's admission within a
	// moment; each write is answered by the earlier release's replica.
	time.Sleep(2 * time.Second)
	for _, ns := range []string{"team", "default"} {
		if err := configMap(ns, "during"); err != nil {
			t.Errorf("a ConfigMap in %s during the upgrade: %v", ns, err)
		}
	}

	// The rollout ends: the last pod of the earlier release goes.
	if err := client.CoreV1().Pods("verdict").Delete(ctx, "webhook-old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 10*time.Second, "the condition", func() bool {
		p := paths()
		return slices.Contains(p, registrar.PathValidateCluster) && slices.Contains(p, registrar.PathValidateNamespaced) && slices.Contains(p, registrar.PathValidateTTL)
	})
	// Now only this release's replicas may be called; the stand-in, which
	// is not one, shows that the scoped paths are what the API server
	// calls.
	time.Sleep(2 * time.Second)
	if err := configMap("default", "after"); err == nil || !strings.Contains(err.Error(), "could not find the requested resource") {
		t.Errorf("a ConfigMap after the upgrade, sent to a path the earlier release lacks: %v, want its 404 (the API server's \"could not find the requested resource\")", err)
	}
}

// A tenant's Policy on ConfigMaps in team, failing closed.
const tenantPolicy = `apiVersion: verdict.dev/v1
kind: Policy
metadata: {name: cms, namespace: team}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`
