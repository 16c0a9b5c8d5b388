package reporter_test

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// TestE2EPolicyKindsShareAName: a ClusterPolicy and a ValidatingPolicy of
// the same name both show in one resource's report, live (the projector
// folding as they arrive) and after replay (the report deleted while no
// projector runs, then rebuilt from the stream by a new one): results
// are keyed by the policy's kind and name, so neither replaces the
// other.
func TestE2EPolicyKindsShareAName(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := e.Namespace("kinds-")
	pod, err := e.Kube.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := reportertest.RefOf("v1", "Pod", pod)
	rep := e.StartProjector(e.Connect())
	e.Publish(
		reportertest.Evaluation{Ref: ref, Policy: "require-team", Version: "1", Request: "r1", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event(),
		reportertest.Evaluation{Ref: ref, Policy: "require-team", Kind: "ValidatingPolicy", Version: "1", Request: "r1", Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event(),
	)
	testkit.Eventually(t, 20*time.Second, "both results, live", func() error {
		return reportertest.SummaryIs(e.Report(ns.Name, string(pod.UID)), 1, 1, 0, 0, 0)
	})
	if err := reportertest.Matches(e.Report(ns.Name, string(pod.UID)), e.Expected()[string(pod.UID)]); err != nil {
		t.Error(err)
	}

	rep.Halt(t)
	if err := e.Dyn.Resource(model.PolicyReports).Namespace(ns.Name).Delete(ctx, string(pod.UID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.StartProjector(e.Connect())
	// A third policy's result makes the new projector fold the Pod from
	// the stream again.
	e.Publish(reportertest.Evaluation{Ref: ref, Policy: "disallow-latest", Version: "1", Request: "r2", Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event())
	testkit.Eventually(t, 20*time.Second, "both results, after replay", func() error {
		return reportertest.SummaryIs(e.Report(ns.Name, string(pod.UID)), 2, 1, 0, 0, 0)
	})
}
