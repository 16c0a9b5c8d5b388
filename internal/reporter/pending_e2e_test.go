package reporter_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/events"
	"github.com/verdict-dev/verdict/internal/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/verify"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// TestE2EPendingFloodDoesNotDelayVerified (issue 28, finding 9): a flood
// of results naming uids that no object has (forged reviews; 5 policies
// for each of 1,000 uids, all within the grace period) is stored, and
// then one result of a real Pod. The Pod's report must appear within 5s:
// results waiting for their object never hold a verified one back. Once
// the grace is over every forged result is accounted for, either dropped
// as not found (and deleted) or given up as pending with a reason, and
// the consumer settles.
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
	e.Check = e.Checker(verify.WithGrace(grace))
	rep := e.StartProjector(e.Connect())

	const uids, policies = 1000, 5
	flood := make([]queue.Message, 0, uids*policies)
	for i := range uids {
		ghost := events.ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: ns.Name, Name: fmt.Sprintf("ghost-%04d", i),
			UID: fmt.Sprintf("00000000-0000-4000-9000-%012d", i)}
		for p := range policies {
			m, err := events.ResultMessage(reportertest.Evaluation{Ref: ghost, Policy: fmt.Sprintf("p%d", p), Version: "1",
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
	reportertest.Eventually(t, 5*time.Second, "the real Pod's report behind the flood", func() error {
		return reportertest.SummaryIs(e.Report(ns.Name, string(pod.UID)), 1, 0, 0, 0, 0)
	})
	t.Logf("flood of %d results stored in %v; the real Pod's report %v after its result", len(flood), stored.Round(time.Millisecond), time.Since(published).Round(time.Millisecond))

	reportertest.Eventually(t, grace+30*time.Second, "every forged result accounted for", func() error {
		notFound := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_unverified_total", string(verify.NotFound))
		givenUp := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_pending_dropped_total")
		if notFound+givenUp != float64(len(flood)) {
			return fmt.Errorf("%v dropped as not found, %v given up while pending; want %d in all", notFound, givenUp, len(flood))
		}
		return nil
	})
	t.Logf("after the grace: %v dropped as not found, %v given up while pending (the pending set full)",
		reportertest.Counter(t, rep.Reg, "verdict_reporter_results_unverified_total", string(verify.NotFound)),
		reportertest.Counter(t, rep.Reg, "verdict_reporter_results_pending_dropped_total"))
	reportertest.Eventually(t, 20*time.Second, "every message acknowledged", e.ConsumerSettled)
	if n := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_pending"); n != 0 {
		t.Errorf("%v results still held pending", n)
	}
	if e.Report(ns.Name, "00000000-0000-4000-9000-000000000000") != nil {
		t.Error("a report for a forged uid")
	}
}
