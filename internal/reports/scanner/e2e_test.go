package scanner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/reports/scanner"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// scanReplica is one running scanner with its own policy cache.
type scanReplica struct {
	reg  *prometheus.Registry
	stop context.CancelFunc
	done chan error
}

func startScanner(e *reportertest.Env, opts ...scanner.Option) *scanReplica {
	e.T.Helper()
	return startScannerWith(e, e.Dyn, opts...)
}

// startScannerWith is startScanner listing and reading with dyn (a
// narrower identity: reportertest.Env.As).
func startScannerWith(e *reportertest.Env, dyn dynamic.Interface, opts ...scanner.Option) *scanReplica {
	e.T.Helper()
	return startScannerCache(e, dyn, false, opts...)
}

// startScannerCache is startScannerWith, its policy cache watching the
// Kubernetes admission policies too when native is set (as the
// reporter's does).
func startScannerCache(e *reportertest.Env, dyn dynamic.Interface, native bool, opts ...scanner.Option) *scanReplica {
	e.T.Helper()
	eng, err := engine.New()
	if err != nil {
		e.T.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(e.T.Context()))
	pc := policycache.New(eng, e.Dyn, e.Kube, zerolog.Nop())
	if native {
		pc.WithNativePolicies()
	}
	if err := pc.Start(ctx); err != nil {
		cancel()
		e.T.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := reporter.NewMetrics(reg)
	if err != nil {
		e.T.Fatal(err)
	}
	w, err := reporter.NewWriter(e.Dyn, reporter.WithWriteQPS(2000, 2000), reporter.WithMetrics(m))
	if err != nil {
		e.T.Fatal(err)
	}
	s, err := scanner.New(e.Connect(), eng, dyn, e.Kube.Discovery(), pc, w,
		append([]scanner.Option{scanner.WithReportWatch(metadata.NewForConfigOrDie(reportertest.ControlPlane().RESTConfig())), scanner.WithChecker(e.Check), scanner.WithRegisterer(reg), scanner.WithLogger(zerolog.Nop())}, opts...)...)
	if err != nil {
		e.T.Fatal(err)
	}
	r := &scanReplica{reg: reg, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- s.Run(ctx) }()
	e.T.Cleanup(func() {
		cancel()
		select {
		case err := <-r.done:
			if err != nil {
				e.T.Errorf("scanner: %v", err)
			}
		case <-time.After(45 * time.Second):
			e.T.Error("scanner did not stop")
		}
	})
	return r
}

func createPolicy(e *reportertest.Env, y string) *unstructured.Unstructured {
	e.T.Helper()
	v, err := document.Decode([]byte(y))
	if err != nil {
		e.T.Fatal(err)
	}
	p, err := e.Dyn.Resource(policycache.ClusterPolicies).Create(e.T.Context(), &unstructured.Unstructured{Object: v.(map[string]any)}, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() {
		_ = e.Dyn.Resource(policycache.ClusterPolicies).Delete(context.WithoutCancel(e.T.Context()), p.GetName(), metav1.DeleteOptions{})
	})
	return p
}

func createPod(e *reportertest.Env, ns, name string, labels map[string]string) *corev1.Pod {
	e.T.Helper()
	p, err := e.Kube.CoreV1().Pods(ns).Create(e.T.Context(), &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	return p
}

// policyResults reads the current results of a policy by resource uid: the
// newest of each (the tests' resources are real: no check needed).
func policyResults(e *reportertest.Env, key string) map[string]bus.ResultEvent {
	e.T.Helper()
	reg := prometheus.NewRegistry()
	m, err := reporter.NewMetrics(reg)
	if err != nil {
		e.T.Fatal(err)
	}
	byUID, err := reporter.ReadStored(e.T.Context(), e.Conn, m, []string{bus.ResultsOfPolicy(key)})
	if undecodable := reportertest.Counter(e.T, reg, "verdict_reporter_results_undecodable_total"); err != nil || undecodable > 0 {
		e.T.Fatalf("read results of %s: %v (%v undecodable)", key, err, undecodable)
	}
	out := map[string]bus.ResultEvent{}
	for uid, rs := range byUID {
		out[uid] = model.Newest(rs).Event
	}
	return out
}

// storedResults is how many results VERDICT_RESULTS holds on result
// subjects (the reporter's verified copies, verdict.verified.>, apart):
// in this test, none is deleted, so how many were ever stored.
func storedResults(e *reportertest.Env) uint64 {
	e.T.Helper()
	s, err := e.Conn.JetStream().Stream(e.T.Context(), bus.StreamResults)
	if err != nil {
		e.T.Fatal(err)
	}
	info, err := s.Info(e.T.Context(), jetstream.WithSubjectFilter("verdict.results.>"))
	if err != nil {
		e.T.Fatal(err)
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return n
}

// summaries sums the summaries of the namespace's reports.
func summaries(e *reportertest.Env, ns string) (reports int, pass, fail int64) {
	for _, r := range e.ListReports(ns) {
		p, _, _ := unstructured.NestedInt64(r.Object, "summary", "pass")
		f, _, _ := unstructured.NestedInt64(r.Object, "summary", "fail")
		reports, pass, fail = reports+1, pass+p, fail+f
	}
	return reports, pass, fail
}

const scanPolicy = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata:
  name: %[1]s
  annotations: {policies.kyverno.io/category: Best Practices, policies.kyverno.io/severity: medium}
spec:
  validationFailureAction: Audit
  background: %[3]v
  rules:
  - name: require-label
    match:
      any:
      - resources: {kinds: [Pod], namespaces: [%[2]s]}
    validate:
      message: "label %[4]s is required"
      pattern: {metadata: {labels: {%[4]s: "?*"}}}
`

// TestE2EBackgroundScan: Pods exist before the policy; three scanner
// replicas (and a projector) run. Creating the policy scans it once: one
// result per Pod in the stream, no duplicates, even across several ticks
// of the periodic scan, which republishes nothing unchanged. A Pod created
// later (no webhook here) is found by the periodic scan. A background:
// false policy is not scanned. Changing the policy re-evaluates; deleting
// a Pod removes its report (garbage collector) and purges its results;
// deleting the policy retracts its results and the reports go.
func TestE2EBackgroundScan(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := e.Namespace("scan-").Name
	var pods []*corev1.Pod
	for i := range 12 {
		labels := map[string]string{}
		if i%3 != 0 {
			labels["app"] = "web"
		}
		if i < 3 {
			labels["tier"] = "front"
		}
		pods = append(pods, createPod(e, ns, fmt.Sprintf("pod-%02d", i), labels))
	}
	const interval = 2 * time.Second
	e.StartProjector(e.Connect())
	var scanners []*scanReplica
	for range 3 {
		scanners = append(scanners, startScanner(e, scanner.WithInterval(interval)))
	}
	sum := func(name string, labels ...string) float64 {
		var s float64
		for _, r := range scanners {
			s += reportertest.Counter(t, r.reg, name, labels...)
		}
		return s
	}

	name := "require-app-" + ns
	pol := createPolicy(e, fmt.Sprintf(scanPolicy, name, ns, true, "app"))
	createPolicy(e, fmt.Sprintf(scanPolicy, "no-background-"+ns, ns, false, "app"))

	testkit.Eventually(t, 30*time.Second, "a result per Pod", func() error {
		if n := len(policyResults(e, name)); n != len(pods) {
			return fmt.Errorf("%d results, want %d", n, len(pods))
		}
		return nil
	})
	testkit.Eventually(t, 30*time.Second, "reports", func() error {
		if n, pass, fail := summaries(e, ns); n != 12 || pass != 8 || fail != 4 {
			return fmt.Errorf("%d reports, pass %d fail %d; want 12, 8, 4", n, pass, fail)
		}
		return nil
	})
	for _, ev := range policyResults(e, name) {
		if ev.Admission || ev.Policy.UID != string(pol.GetUID()) || ev.Category != "Best Practices" || ev.Severity != "medium" {
			t.Fatalf("result %+v: want a background result of the policy's version with its annotations", ev)
		}
	}
	// Let the periodic scan tick a few times: nothing is republished.
	testkit.Eventually(t, 30*time.Second, "two ticks of the periodic scan", func() error {
		if n := sum("verdict_scanner_items_total", "all"); n < 2 {
			return fmt.Errorf("%v ticks", n)
		}
		return nil
	})
	if seq := storedResults(e); seq != uint64(len(pods)) {
		t.Fatalf("%d results stored for %d Pods: scans with three replicas and periodic ticks must store each result once", seq, len(pods))
	}
	if n := sum("verdict_scanner_results_total", "unchanged"); n < float64(len(pods)) {
		t.Errorf("%v unchanged results: the ticks should have re-evaluated every Pod", n)
	}
	if got := policyResults(e, "no-background-"+ns); len(got) != 0 {
		t.Fatalf("%d results of a background: false policy", len(got))
	}

	// A Pod created now is found by the periodic scan.
	late := createPod(e, ns, "late", nil)
	testkit.Eventually(t, 30*time.Second, "the periodic scan finds a new Pod", func() error {
		if _, ok := policyResults(e, name)[string(late.UID)]; !ok {
			return testkit.ErrNotYet
		}
		return nil
	})

	// The policy changes: every Pod is evaluated again.
	cur, err := e.Dyn.Resource(policycache.ClusterPolicies).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedField(cur.Object, []any{map[string]any{
		"name":     "require-label",
		"match":    map[string]any{"any": []any{map[string]any{"resources": map[string]any{"kinds": []any{"Pod"}, "namespaces": []any{ns}}}}},
		"validate": map[string]any{"message": "label tier is required", "pattern": map[string]any{"metadata": map[string]any{"labels": map[string]any{"tier": "?*"}}}},
	}}, "spec", "rules"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Dyn.Resource(policycache.ClusterPolicies).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "reports after the policy change", func() error {
		if n, pass, fail := summaries(e, ns); n != 13 || pass != 3 || fail != 10 {
			return fmt.Errorf("%d reports, pass %d fail %d; want 13, 3, 10", n, pass, fail)
		}
		return nil
	})

	// A deleted Pod's report goes (garbage collector) and its results are
	// purged.
	gone := pods[1]
	if err := e.Kube.CoreV1().Pods(ns).Delete(ctx, gone.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the deleted Pod's report removed and its results purged", func() error {
		if e.Report(ns, string(gone.UID)) != nil {
			return fmt.Errorf("report still there")
		}
		if _, ok := policyResults(e, name)[string(gone.UID)]; ok {
			return fmt.Errorf("results still in the stream")
		}
		return nil
	})

	// The policy is deleted: its results are retracted, the reports go.
	if err := e.Dyn.Resource(policycache.ClusterPolicies).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "reports gone with the policy", func() error {
		if n, _, _ := summaries(e, ns); n != 0 {
			return fmt.Errorf("%d reports left", n)
		}
		return nil
	})
	for uid, ev := range policyResults(e, name) {
		if len(ev.Rules) != 0 || ev.Retracted != bus.RetractedPolicyDeleted {
			t.Errorf("result on %s after the policy's deletion: %+v; want a retraction", uid, ev)
		}
	}
	if dl := e.DeadLetters(); len(dl) != 0 {
		t.Errorf("dead letters: %+v", dl)
	}
}
