package reporter_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// TestE2EPendingFloodDoesNotDelayVerified (issue 28, finding 9): a flood
// of results naming uids that no object has (forged reviews; 5 policies
// for each of 1,000 uids, all within the grace period) is stored, and
// then one result of a real Pod. The Pod's report must appear within 5s:
// results waiting for their object never hold a verified one back. Once
// the grace is over every forged result is accounted for, either dropped
// as not found (and deleted: held, or remembered for a recheck beyond the
// pending set) or given up as pending with a reason, and the consumer
// settles.
func TestE2EPendingFloodDoesNotDelayVerified(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := e.Namespace("flood-")
	if _, err := e.Kube.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod, err := e.Kube.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "real"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const grace = 10 * time.Second
	e.Check = e.Checker(apicheck.WithGrace(grace))
	rep := e.StartProjector(e.Connect())

	const uids, policies = 1000, 5
	flood := make([]queue.Message, 0, uids*policies)
	for i := range uids {
		ghost := bus.ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: ns.Name, Name: fmt.Sprintf("ghost-%04d", i),
			UID: fmt.Sprintf("00000000-0000-4000-9000-%012d", i)}
		for p := range policies {
			m, err := bus.ResultMessage(reportertest.Evaluation{Ref: ghost, Policy: fmt.Sprintf("p%d", p), Version: "1",
				Request: fmt.Sprintf("forged-%d", i), Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event())
			if err != nil {
				t.Fatal(err)
			}
			flood = append(flood, m)
		}
	}
	pub, err := e.Conn.NewAsyncPublisher(queue.WithBufferSize(len(flood)))
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	if err := pub.PublishAll(flood); err != nil {
		t.Fatal(err)
	}
	if err := pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	stored := time.Since(begin)

	real := reportertest.RefOf("v1", "Pod", pod)
	e.Publish(reportertest.Evaluation{Ref: real, Policy: "p0", Version: "1", Request: "real", Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event())
	published := time.Now()
	testkit.Eventually(t, 5*time.Second, "the real Pod's report behind the flood", func() error {
		return reportertest.SummaryIs(e.Report(ns.Name, string(pod.UID)), 1, 0, 0, 0, 0)
	})
	t.Logf("flood of %d results stored in %v; the real Pod's report %v after its result", len(flood), stored.Round(time.Millisecond), time.Since(published).Round(time.Millisecond))

	testkit.Eventually(t, grace+30*time.Second, "every forged result accounted for", func() error {
		notFound := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_unverified_total", string(apicheck.NotFound))
		givenUp := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_pending_dropped_total")
		if notFound+givenUp != float64(len(flood)) {
			return fmt.Errorf("%v dropped as not found, %v given up while pending; want %d in all", notFound, givenUp, len(flood))
		}
		return nil
	})
	t.Logf("after the grace: %v dropped as not found, %v given up while pending (the pending set and the rechecks full)",
		reportertest.Counter(t, rep.Reg, "verdict_reporter_results_unverified_total", string(apicheck.NotFound)),
		reportertest.Counter(t, rep.Reg, "verdict_reporter_results_pending_dropped_total"))
	testkit.Eventually(t, 20*time.Second, "every message acknowledged", e.ConsumerSettled)
	if n := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_pending"); n != 0 {
		t.Errorf("%v results still held pending", n)
	}
	if n := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_pending_rechecks"); n != 0 {
		t.Errorf("%v results still remembered for a recheck", n)
	}
	if e.Report(ns.Name, "00000000-0000-4000-9000-000000000000") != nil {
		t.Error("a report for a forged uid")
	}
}

// TestE2EPendingFullStillReportsARealCreate (issue 28, finding 9): while
// a flood of forged results fills the pending set, a real Pod is created
// through a validating webhook that publishes the Pod's result and
// answers only once the reporter has checked it, as Verdict's webhook
// does: the API server stores the object after its validating webhooks
// answered, so the result names an object that is not found yet. Its
// report must still appear, well before the grace period ends and
// without another result of the Pod. Before, the result was given up at
// once (acknowledged, counted as full) and the report never came.
func TestE2EPendingFullStillReportsARealCreate(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := e.Namespace("pending-full-")
	if _, err := e.Kube.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	const grace, limit = 30 * time.Second, 8
	e.Check = e.Checker(apicheck.WithGrace(grace))
	rep := e.StartProjector(e.Connect(), reporter.WithPendingLimit(limit, 4<<20))

	// 40 forged uids, 5 policies each: 8 held, the rest past the bound.
	var flood []bus.ResultEvent
	for i := range 40 {
		ghost := bus.ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: ns.Name, Name: fmt.Sprintf("ghost-%02d", i),
			UID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i)}
		for p := range 5 {
			flood = append(flood, reportertest.Evaluation{Ref: ghost, Policy: fmt.Sprintf("p%d", p), Version: "1",
				Request: fmt.Sprintf("forged-%d", i), Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event())
		}
	}
	e.Publish(flood...)
	testkit.Eventually(t, 20*time.Second, "the pending set full", func() error {
		consumed := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_consumed_total")
		held := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_pending")
		if consumed < float64(len(flood)) || held != limit {
			return fmt.Errorf("%v of %d results taken, %v held", consumed, len(flood), held)
		}
		return nil
	})

	// The webhook: it publishes the result of the CREATE it is asked
	// about and answers once the projector has taken it.
	published := make(chan time.Time, 1)
	hook, probed := admitAfterPublish(t, e, rep, ns.Name, published)
	registerWebhook(t, e, ns.Name, hook, probed)

	pod, err := e.Kube.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "real"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	at := <-published
	if n := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_pending"); n != limit {
		t.Fatalf("%v results held pending when the real one was checked, want the set full (%d)", n, limit)
	}
	defer func() {
		t.Logf("given up while pending: %v; verified on a recheck: %v",
			reportertest.Counter(t, rep.Reg, "verdict_reporter_results_pending_dropped_total"),
			reportertest.Counter(t, rep.Reg, "verdict_reporter_results_recovered_total"))
	}()
	testkit.Eventually(t, 10*time.Second, "the real Pod's report while the pending set is full", func() error {
		return reportertest.SummaryIs(e.Report(ns.Name, string(pod.UID)), 1, 0, 0, 0, 0)
	})
	t.Logf("the real Pod's report %v after its result, behind %d forged results (%d held)",
		time.Since(at).Round(time.Millisecond), len(flood), limit)
	if e.Report(ns.Name, "00000000-0000-4000-8000-000000000000") != nil {
		t.Error("a report for a forged uid")
	}
}

// admitAfterPublish is a validating webhook standing in for Verdict's:
// for the CREATE of a Pod in ns (not a dry run) it publishes a passing
// result naming the new object (its uid is set before validating
// webhooks run; it is not stored yet), waits until the projector of rep
// has taken the message and checked it, then allows the request. A dry
// run is allowed at once and noted in probed (registerWebhook's probe).
func admitAfterPublish(t *testing.T, e *reportertest.Env, rep *reportertest.Replica, ns string, published chan<- time.Time) (*httptest.Server, *atomic.Bool) {
	t.Helper()
	probed := &atomic.Bool{}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var review admissionv1.AdmissionReview
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil || review.Request == nil {
			http.Error(w, "bad review", http.StatusBadRequest)
			return
		}
		req := review.Request
		review.Response = &admissionv1.AdmissionResponse{UID: req.UID, Allowed: true}
		review.Request = nil
		if req.DryRun != nil && *req.DryRun {
			probed.Store(true)
		} else {
			var obj metav1.PartialObjectMetadata
			if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			ref := bus.ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: ns, Name: req.Name, UID: string(obj.UID)}
			m, err := bus.ResultMessage(reportertest.Evaluation{Ref: ref, Policy: "p0", Version: "1", Request: string(req.UID),
				Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event())
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			before := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_consumed_total")
			if _, err := e.Conn.PublishSync(r.Context(), m); err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			published <- time.Now()
			for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
				if reportertest.Counter(t, rep.Reg, "verdict_reporter_results_consumed_total") > before {
					break
				}
			}
			time.Sleep(300 * time.Millisecond) // the check follows the take at once
		}
		_ = json.NewEncoder(w).Encode(&review)
	}))
	t.Cleanup(srv.Close)
	return srv, probed
}

// registerWebhook sends the CREATE of every Pod in ns to srv (failing
// closed) and waits until the API server does (a dry run reaches it and
// sets probed).
func registerWebhook(t *testing.T, e *reportertest.Env, ns string, srv *httptest.Server, probed *atomic.Bool) {
	t.Helper()
	ctx := t.Context()
	url := srv.URL + "/validate"
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	fail, none, timeout := admissionregv1.Fail, admissionregv1.SideEffectClassNone, int32(10)
	cfg, err := e.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "pending-full-"},
		Webhooks: []admissionregv1.ValidatingWebhook{{
			Name:                    "pods.pending-full.verdict.dev",
			ClientConfig:            admissionregv1.WebhookClientConfig{URL: &url, CABundle: ca},
			Rules:                   []admissionregv1.RuleWithOperations{{Operations: []admissionregv1.OperationType{admissionregv1.Create}, Rule: admissionregv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: ns}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(context.WithoutCancel(ctx), cfg.Name, metav1.DeleteOptions{})
	})
	probe := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "probe"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}}}
	testkit.Eventually(t, 20*time.Second, "the webhook registered", func() error {
		if _, err := e.Kube.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			return err
		}
		if !probed.Load() {
			return testkit.ErrNotYet
		}
		return nil
	})
}

// TestE2EPendingRechecksCountedAtShutdown: results remembered for a
// recheck when a replica stops are counted as given up (shutdown), and
// stay in the stream; nothing is forgotten silently.
func TestE2EPendingRechecksCountedAtShutdown(t *testing.T) {
	e := reportertest.NewEnv(t)
	ns := e.Namespace("pending-stop-")
	e.Check = e.Checker(apicheck.WithGrace(time.Minute))
	rep := e.StartProjector(e.Connect(), reporter.WithPendingLimit(2, 4<<20))
	var flood []bus.ResultEvent
	for i := range 20 {
		ghost := bus.ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: ns.Name, Name: fmt.Sprintf("ghost-%02d", i),
			UID: fmt.Sprintf("00000000-0000-4000-a000-%012d", i)}
		flood = append(flood, reportertest.Evaluation{Ref: ghost, Policy: "p0", Version: "1", Request: "forged",
			Rules: reportertest.Rules(engine.StatusFail)}.Event())
	}
	e.Publish(flood...)
	testkit.Eventually(t, 20*time.Second, "18 results remembered for a recheck", func() error {
		if n := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_pending_rechecks"); n != 18 {
			return fmt.Errorf("%v remembered", n)
		}
		return nil
	})
	rep.Halt(t)
	if n := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_pending_dropped_total", reporter.PendingShutdown); n != 18 {
		t.Errorf("%v given up at shutdown, want 18", n)
	}
	if n := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_pending_rechecks"); n != 0 {
		t.Errorf("%v still remembered", n)
	}
	left := 0
	if _, err := e.Conn.Replay(t.Context(), bus.StreamResults, func(queue.ReplayMsg) error { left++; return nil }, queue.WithReplayAll()); err != nil {
		t.Fatal(err)
	}
	if left != len(flood) {
		t.Errorf("%d results left in the stream, want all %d", left, len(flood))
	}
}
