package reporter_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// TestE2EForgedResultsCannotEvictAVerifiedOne (issue 28, finding 8): a
// real object's verified violation is in its report; then more forged
// results than the stream keeps per subject (DefaultResultHistory) arrive
// on the same subject, with the object's uid and a resourceVersion it has
// not reached. They are rejected and deleted, and the violation stays:
// in the report after the object's next fold, and after a replay of the
// whole stream.
func TestE2EForgedResultsCannotEvictAVerifiedOne(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := e.Namespace("evict-")
	cm, err := e.Kube.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "real"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	real := reportertest.RefOf("v1", "ConfigMap", cm)
	rep := e.StartProjector(e.Connect())

	e.Publish(reportertest.Evaluation{Ref: real, Policy: "p", Version: "1", Request: "real", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event())
	testkit.Eventually(t, 20*time.Second, "the violation in the report", func() error {
		return reportertest.SummaryIs(e.Report(ns.Name, string(cm.UID)), 0, 1, 0, 0, 0)
	})

	future := real
	future.ResourceVersion = "999999999999"
	for i := range bus.DefaultResultHistory + 1 {
		e.Publish(reportertest.Evaluation{Ref: future, Policy: "p", Version: "1", Request: fmt.Sprintf("forged-%d", i), Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event())
	}
	testkit.Eventually(t, 20*time.Second, "every forged result rejected", func() error {
		if n := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_unverified_total", string(apicheck.Future)); n != float64(bus.DefaultResultHistory+1) {
			return fmt.Errorf("%v rejected", n)
		}
		return nil
	})

	// The object's next fold: another policy's result.
	e.Publish(reportertest.Evaluation{Ref: real, Policy: "q", Version: "1", Request: "real-q", Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event())
	testkit.Eventually(t, 20*time.Second, "the next fold", func() error {
		return reportertest.SummaryIs(e.Report(ns.Name, string(cm.UID)), 1, 1, 0, 0, 0)
	})

	// A replay of the whole stream keeps it too.
	rep.Halt(t)
	m, err := reporter.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	w, err := reporter.NewWriter(e.Dyn, reporter.WithWriteQPS(2000, 2000), reporter.WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reporter.Rebuild(ctx, e.Connect(), w, reporter.WithRebuildChecker(e.Checker(apicheck.WithGrace(time.Millisecond)))); err != nil {
		t.Fatal(err)
	}
	if err := reportertest.SummaryIs(e.Report(ns.Name, string(cm.UID)), 1, 1, 0, 0, 0); err != nil {
		t.Errorf("the report after a replay: %v", err)
	}
}
