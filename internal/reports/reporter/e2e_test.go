package reporter_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// TestE2EReports: results of a Pod, a ConfigMap and a Namespace (real
// objects, real UIDs) become a PolicyReport each (a ClusterPolicyReport
// for the Namespace) owned by the object, with the right summaries; later,
// duplicated and interleaved publishes end in the newest state; an older
// fold written by hand after a newer one is skipped; a resource with no
// rule results left loses its report; an undecodable message is
// dead-lettered with its reason and the projection goes on.
func TestE2EReports(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := e.Namespace("reports-")
	// The controller manager's service account controller may be first.
	if _, err := e.Kube.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod, err := e.Kube.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web.v1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := e.Kube.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podRef, cmRef, nsRef := reportertest.RefOf("v1", "Pod", pod), reportertest.RefOf("v1", "ConfigMap", cm), reportertest.RefOf("v1", "Namespace", ns)

	rep := e.StartProjector(e.Connect())

	e.Publish(
		reportertest.Evaluation{Ref: podRef, Policy: "require-labels", Version: "1", Request: "r1", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event(),
		reportertest.Evaluation{Ref: podRef, Policy: "team/advisory", Version: "1", Request: "r1", Scored: false, Rules: reportertest.Rules(engine.StatusFail, engine.StatusPass)}.Event(),
		reportertest.Evaluation{Ref: podRef, Policy: "disallow-latest", Version: "1", Request: "r1", Scored: true, Rules: reportertest.Rules(engine.StatusPass, engine.StatusSkip)}.Event(),
		reportertest.Evaluation{Ref: cmRef, Policy: "require-labels", Version: "1", Request: "r2", Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event(),
		reportertest.Evaluation{Ref: nsRef, Policy: "ns-owner", Version: "1", Request: "r3", Scored: true, Rules: reportertest.Rules(engine.StatusFail, engine.StatusError)}.Event(),
	)
	testkit.Eventually(t, 20*time.Second, "pod report", func() error { return reportertest.SummaryIs(e.Report(ns.Name, string(pod.UID)), 2, 1, 1, 0, 1) })
	testkit.Eventually(t, 20*time.Second, "configmap report", func() error { return reportertest.SummaryIs(e.Report(ns.Name, string(cm.UID)), 1, 0, 0, 0, 0) })
	testkit.Eventually(t, 20*time.Second, "namespace report", func() error { return reportertest.SummaryIs(e.Report("", string(ns.UID)), 0, 1, 0, 1, 0) })
	want := e.Expected()
	for _, c := range []struct {
		namespace string
		uid       string
		owner     string
	}{{ns.Name, string(pod.UID), "Pod"}, {ns.Name, string(cm.UID), "ConfigMap"}, {"", string(ns.UID), "Namespace"}} {
		got := e.Report(c.namespace, c.uid)
		if err := reportertest.Matches(got, want[c.uid]); err != nil {
			t.Error(err)
		}
		owners := got.GetOwnerReferences()
		if len(owners) != 1 || string(owners[0].UID) != c.uid || owners[0].Kind != c.owner {
			t.Errorf("%s report owners %+v", c.owner, owners)
		}
		if kind, _, _ := unstructured.NestedString(got.Object, "scope", "kind"); kind != c.owner {
			t.Errorf("%s report scope kind %q", c.owner, kind)
		}
		if got.GetManagedFields()[0].Manager != reporter.FieldManager {
			t.Errorf("%s report written by %q", c.owner, got.GetManagedFields()[0].Manager)
		}
	}
	if kind := e.Report("", string(ns.UID)).GetKind(); kind != model.KindClusterPolicyReport {
		t.Errorf("namespace report kind %s", kind)
	}

	// Newer evaluations, interleaved with the configmap's, with an exact
	// duplicate (same message id: stored once) and a republished
	// evaluation under a new id (stored again, same content): the report
	// ends in the newest state, at the stream's last sequence.
	seqs := e.Publish(
		reportertest.Evaluation{Ref: podRef, Policy: "require-labels", Version: "2", Request: "r4", Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event(),
		reportertest.Evaluation{Ref: cmRef, Policy: "require-labels", Version: "2", Request: "r5", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event(),
		reportertest.Evaluation{Ref: podRef, Policy: "disallow-latest", Version: "2", Request: "r4", Scored: true, Rules: reportertest.Rules(engine.StatusFail, engine.StatusFail)}.Event(),
		reportertest.Evaluation{Ref: podRef, Policy: "require-labels", Version: "3", Request: "r6", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event(),
		reportertest.Evaluation{Ref: podRef, Policy: "require-labels", Version: "3", Request: "r6", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event(),
		reportertest.Evaluation{Ref: podRef, Policy: "disallow-latest", Version: "2", Request: "r7", Scored: true, Rules: reportertest.Rules(engine.StatusFail, engine.StatusFail)}.Event(),
	)
	if seqs[4] != seqs[3] {
		t.Errorf("exact duplicate stored again: sequences %v", seqs)
	}
	last := fmt.Sprint(seqs[5])
	testkit.Eventually(t, 20*time.Second, "pod report, newest", func() error {
		got := e.Report(ns.Name, string(pod.UID))
		if got.GetAnnotations()[model.AnnotationLastSequence] != last {
			return fmt.Errorf("last sequence %s, want %s", got.GetAnnotations()[model.AnnotationLastSequence], last)
		}
		return reportertest.SummaryIs(got, 1, 3, 1, 0, 0)
	})
	testkit.Eventually(t, 20*time.Second, "configmap report, newest", func() error { return reportertest.SummaryIs(e.Report(ns.Name, string(cm.UID)), 0, 1, 0, 0, 0) })
	want = e.Expected()
	if err := reportertest.Matches(e.Report(ns.Name, string(pod.UID)), want[string(pod.UID)]); err != nil {
		t.Error(err)
	}

	// The stale guard: an older fold written after a newer one is skipped;
	// the same fold again changes nothing.
	before := e.Report(ns.Name, string(pod.UID))
	older, err := model.Fold(string(pod.UID), []model.Result{{Sequence: seqs[0], Event: reportertest.Evaluation{Ref: podRef, Policy: "require-labels", Version: "2", Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event()}})
	if err != nil {
		t.Fatal(err)
	}
	// Checked against the report itself (a writer without memory) and by
	// the projector's writer (which remembers what it wrote).
	fresh, err := reporter.NewWriter(e.Dyn, reporter.WithMemory(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []*reporter.Writer{fresh, rep.W} {
		if out, err := w.Write(ctx, older, nil); err != nil || out != reporter.OutcomeStale {
			t.Errorf("older fold: %s, %v; want stale", out, err)
		}
		if out, err := w.Write(ctx, want[string(pod.UID)], nil); err != nil || out != reporter.OutcomeUnchanged {
			t.Errorf("same fold: %s, %v; want unchanged", out, err)
		}
	}
	if after := e.Report(ns.Name, string(pod.UID)); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("report written by a skipped write: resourceVersion %s → %s", before.GetResourceVersion(), after.GetResourceVersion())
	}
	// An empty fold of an older sequence deletes nothing either.
	if out, err := fresh.Write(ctx, model.Report{Resource: podRef, LastSequence: seqs[0]}, nil); err != nil || out != reporter.OutcomeStale {
		t.Errorf("older empty fold: %s, %v; want stale", out, err)
	}

	// No rule results left (the policy no longer matches the configmap):
	// its report goes.
	e.Publish(reportertest.Evaluation{Ref: cmRef, Policy: "require-labels", Version: "3", Request: "r8", Scored: true}.Event())
	testkit.Eventually(t, 20*time.Second, "configmap report deleted", func() error {
		if r := e.Report(ns.Name, string(cm.UID)); r != nil {
			return fmt.Errorf("report still there: %v", r.Object["summary"])
		}
		return nil
	})

	// An undecodable message is dead-lettered with its reason, and is left
	// out of the fold; the projection goes on.
	garbage := bus.ResultSubject(string(pod.UID), "broken")
	if _, err := e.Conn.PublishSync(ctx, queue.Message{Subject: garbage, ID: "garbage-1", Data: []byte("{not json")}); err != nil {
		t.Fatal(err)
	}
	e.Publish(reportertest.Evaluation{Ref: podRef, Policy: "team/advisory", Version: "2", Request: "r9", Scored: false, Rules: reportertest.Rules(engine.StatusPass, engine.StatusPass)}.Event())
	testkit.Eventually(t, 20*time.Second, "pod report after the garbage", func() error { return reportertest.SummaryIs(e.Report(ns.Name, string(pod.UID)), 2, 3, 0, 0, 0) })
	testkit.Eventually(t, 20*time.Second, "dead letter", func() error {
		for _, d := range e.DeadLetters() {
			if d.Subject == garbage && strings.Contains(d.Reason, "poison") && strings.Contains(d.Reason, "decode") {
				return nil
			}
		}
		return fmt.Errorf("no dead letter for %s: %+v", garbage, e.DeadLetters())
	})
	testkit.Eventually(t, 20*time.Second, "every message acknowledged", e.ConsumerSettled)

	if n := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_consumed_total"); n < 12 {
		t.Errorf("results consumed %v, want at least 12", n)
	}
	if n := reportertest.Counter(t, rep.Reg, "verdict_reporter_reports_total", "deleted"); n != 1 {
		t.Errorf("reports deleted %v, want 1", n)
	}
	if n := reportertest.Counter(t, rep.Reg, "verdict_reporter_reports_total", "stale"); n < 1 {
		t.Errorf("stale skips %v, want at least 1", n)
	}
	if n := reportertest.Counter(t, rep.Reg, "verdict_reporter_lag_seconds"); n < 12 {
		t.Errorf("lag observations %v, want at least 12", n)
	}
}

// TestE2ESlowWrites: when writes are slow (a write QPS of one every two
// seconds) the waiting messages are kept in progress past their AckWait
// (1s here), so nothing is delivered twice; and they are acknowledged
// only once their report is written.
func TestE2ESlowWrites(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	var spec queue.ConsumerSpec
	for _, s := range bus.DefaultConsumers() {
		if s.Durable == bus.ConsumerReporter {
			spec = s
		}
	}
	spec.Durable, spec.AckWait = "slow", time.Second
	if err := bus.Provision(ctx, e.Conn, bus.WithConsumers(spec)); err != nil {
		t.Fatal(err)
	}
	ns := e.Namespace("slow-")
	var refs []bus.ResourceRef
	for i := range 3 {
		cm, err := e.Kube.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, reportertest.RefOf("v1", "ConfigMap", cm))
	}
	reg := prometheus.NewRegistry()
	m, err := reporter.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := reporter.NewWriter(e.Dyn, reporter.WithWriteQPS(0.5, 1), reporter.WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	p, err := reporter.NewProjector(e.Connect(), w, reporter.WithDurable("slow"), reporter.WithWindow(50*time.Millisecond), reporter.WithProgressEvery(200*time.Millisecond),
		reporter.WithChecker(e.Check), reporter.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	begin := time.Now()
	for i, ref := range refs {
		e.Publish(reportertest.Evaluation{Ref: ref, Policy: "p", Version: "1", Request: fmt.Sprint(i), Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event())
	}
	cons, err := e.Conn.JetStream().Consumer(ctx, bus.StreamResults, "slow")
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "three reports", func() error {
		for _, ref := range refs {
			if e.Report(ns.Name, ref.UID) == nil {
				return testkit.ErrNotYet
			}
		}
		return nil
	})
	if took := time.Since(begin); took < 3*time.Second {
		t.Fatalf("three writes at 0.5/s took %v: the rate limit did not hold", took)
	}
	testkit.Eventually(t, 10*time.Second, "all acknowledged", func() error {
		ci, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if ci.NumAckPending != 0 || ci.NumPending != 0 {
			return fmt.Errorf("%d unacknowledged, %d pending", ci.NumAckPending, ci.NumPending)
		}
		return nil
	})
	if n := reportertest.Counter(t, reg, "verdict_reporter_results_consumed_total"); n != 3 {
		t.Errorf("%v deliveries for 3 results: messages went past their AckWait", n)
	}
}
