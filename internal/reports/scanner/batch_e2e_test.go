package scanner_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// TestE2EScanRetractsResultsInAdmissionBatches: a policy's results that
// came with admissions, in batches with other policies' (issue 33), are
// the policy's results to a scan as its own messages are. The policy is
// changed to select ConfigMaps only: its scan retracts its result in the
// Pod's batch, and the Pod's report keeps the other policy's. (A scan
// that read only the policy's own subjects would leave the stale result
// in the report for good.)
func TestE2EScanRetractsResultsInAdmissionBatches(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := e.Namespace("scan-batch-").Name
	pod := createPod(e, ns, "web", nil)
	name := "require-app-" + ns
	pol := createPolicy(e, fmt.Sprintf(scanPolicy, name, ns, true, "app"))

	// The admission's batch: this policy's failure and another's pass.
	ref := reportertest.RefOf("v1", "Pod", pod)
	mine := reportertest.Evaluation{Ref: ref, Policy: name, Version: pol.GetResourceVersion(), Request: "r1", Scored: true,
		Rules: []bus.RuleResult{{Name: "require-label", Type: engine.TypeValidation, Status: engine.StatusFail, Message: "label app is required"}}}.Event()
	mine.Policy.UID = string(pol.GetUID())
	other := reportertest.Evaluation{Ref: ref, Policy: "other-" + ns, Version: "1", Request: "r1", Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event()
	other.Timestamp = mine.Timestamp
	e.PublishBatch(mine, other)
	e.StartProjector(e.Connect())
	testkit.Eventually(t, 20*time.Second, "the admission's report", func() error {
		return reportertest.SummaryIs(e.Report(ns, string(pod.UID)), 1, 1, 0, 0, 0)
	})

	// The policy now selects ConfigMaps only; the scanner starts and
	// scans it.
	cur, err := e.Dyn.Resource(policycache.ClusterPolicies).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rules, _, _ := unstructured.NestedSlice(cur.Object, "spec", "rules")
	anyOf, _, _ := unstructured.NestedSlice(rules[0].(map[string]any), "match", "any")
	anyOf[0].(map[string]any)["resources"].(map[string]any)["kinds"] = []any{"ConfigMap"}
	if err := unstructured.SetNestedSlice(rules[0].(map[string]any), anyOf, "match", "any"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(cur.Object, rules, "spec", "rules"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Dyn.Resource(policycache.ClusterPolicies).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := startScanner(e)
	testkit.Eventually(t, 30*time.Second, "the policy's result retracted", func() error {
		if err := reportertest.SummaryIs(e.Report(ns, string(pod.UID)), 1, 0, 0, 0, 0); err != nil {
			return err
		}
		if n := reportertest.Counter(t, s.reg, "verdict_scanner_results_total", "retracted"); n != 1 {
			return fmt.Errorf("%v retractions counted, want 1", n)
		}
		return nil
	})
	got := policyResults(e, name)[string(pod.UID)]
	if got.Retracted != bus.RetractedNotSelected || got.Policy.ResourceVersion == pol.GetResourceVersion() {
		t.Fatalf("the policy's newest result %+v: want a notSelected retraction by its new version", got)
	}
}
