package reporter_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// TestE2EResultOfAKindTheReporterMayNotRead: the chart's reporter may not
// read Secrets (reporter.rbac.readSecrets is off), and a policy that
// validates Secrets still makes admission results about them. Such a
// result can be neither confirmed nor refused: the projector says so
// (verdict_reporter_results_unreadable_total, a warning) and acknowledges
// it at once, leaving it in the stream and out of every report; the
// results of kinds it may read go on; a rebuild leaves it out and
// counts it instead of failing. Before, the result was retried with
// backoff like an API server that is down, for minutes, holding one of
// the consumer's unacknowledged messages, and a rebuild failed.
func TestE2EResultOfAKindTheReporterMayNotRead(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := e.Namespace("unreadable-")
	if _, err := e.Kube.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	secret, err := e.Kube.CoreV1().Secrets(ns.Name).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token"}, StringData: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := e.Kube.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "app"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rc := e.As(rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}})
	e.Check = e.CheckerAs(rc)
	rep := e.StartProjector(e.Connect())

	e.Publish(
		reportertest.Evaluation{Ref: reportertest.RefOf("v1", "Secret", secret), Policy: "secrets", Version: "1", Request: "s", Scored: true,
			Rules: reportertest.Rules(engine.StatusFail)}.Event(),
		reportertest.Evaluation{Ref: reportertest.RefOf("v1", "Pod", pod), Policy: "pods", Version: "1", Request: "p", Scored: true,
			Rules: reportertest.Rules(engine.StatusPass)}.Event(),
	)
	testkit.Eventually(t, 10*time.Second, "the Pod's report", func() error {
		return reportertest.SummaryIs(e.Report(ns.Name, string(pod.UID)), 1, 0, 0, 0, 0)
	})
	testkit.Eventually(t, 10*time.Second, "the Secret's result counted and acknowledged", func() error {
		if n := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_unreadable_total"); n != 1 {
			return fmt.Errorf("%v counted unreadable", n)
		}
		return e.ConsumerSettled()
	})
	if e.Report(ns.Name, string(secret.UID)) != nil {
		t.Error("a report for the Secret, which the reporter may not read")
	}
	if d := e.DeadLetters(); len(d) != 0 {
		t.Errorf("%d dead letters, want none", len(d))
	}
	if _, err := e.Conn.LastMsg(ctx, bus.StreamResults, bus.ResultSubject(string(secret.UID), "secrets")); err != nil {
		t.Errorf("the Secret's result is not left in the stream: %v", err)
	}

	reg := prometheus.NewRegistry()
	m, err := reporter.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := reporter.NewWriter(e.Dyn, reporter.WithWriteQPS(2000, 2000), reporter.WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	st, err := reporter.Rebuild(ctx, e.Connect(), w, reporter.WithRebuildChecker(e.Check))
	if err != nil {
		t.Fatalf("rebuild: %v", err)
	}
	if st.Unreadable != 1 || st.Partial != 1 {
		t.Errorf("rebuild: %d unreadable, %d partial; want the Secret's result left out, its fold partial", st.Unreadable, st.Partial)
	}
	if n := reportertest.Counter(t, reg, "verdict_reporter_results_unreadable_total"); n != 1 {
		t.Errorf("rebuild counted %v unreadable, want 1", n)
	}
	if err := reportertest.SummaryIs(e.Report(ns.Name, string(pod.UID)), 1, 0, 0, 0, 0); err != nil {
		t.Errorf("the Pod's report after the rebuild: %v", err)
	}
}
