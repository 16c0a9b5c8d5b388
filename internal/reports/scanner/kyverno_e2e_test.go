package scanner_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/internal/platform/kyvernometrics"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/reports/scanner"
	"github.com/verdict-dev/verdict/internal/testkit"
)

// kyvernoResults sums kyverno_policy_results_total over the series whose
// labels include want.
func kyvernoResults(t *testing.T, reg *prometheus.Registry, want map[string]string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != kyvernometrics.NamePolicyResults {
			continue
		}
		for _, m := range mf.GetMetric() {
			n := 0
			for _, lp := range m.GetLabel() {
				if v, ok := want[lp.GetName()]; ok && v == lp.GetValue() {
					n++
				}
			}
			if n == len(want) {
				sum += m.GetCounter().GetValue()
			}
		}
	}
	return sum
}

// TestE2EKyvernoMetrics: with WithKyvernoMetrics, a scan's rule results
// are counted under Kyverno's names as Kyverno counts its background
// scans (rule_execution_cause background_scan, each resource a create,
// never a dry run), one per Pod evaluated.
func TestE2EKyvernoMetrics(t *testing.T) {
	e := reportertest.NewEnv(t)
	ns := e.Namespace("kyverno-metrics-").Name
	createPod(e, ns, "labelled", map[string]string{"app": "web"})
	createPod(e, ns, "bare", nil)
	reg := prometheus.NewRegistry()
	km, err := kyvernometrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	startScanner(e, scanner.WithKyvernoMetrics(km))
	name := "kyverno-metrics-" + ns
	createPolicy(e, fmt.Sprintf(scanPolicy, name, ns, true, "app"))

	labels := func(result string) map[string]string {
		return map[string]string{
			"policy_name": name, "policy_namespace": "-", "policy_type": "cluster", "policy_validation_mode": "audit",
			"policy_background_mode": "true", "rule_name": "require-label", "rule_type": "validate", "rule_result": result,
			"rule_execution_cause": "background_scan", "resource_kind": "Pod", "resource_namespace": ns,
			"resource_request_operation": "create", "dry_run": "false",
		}
	}
	testkit.Eventually(t, 30*time.Second, "a result per Pod under Kyverno's names", func() error {
		pass, fail := kyvernoResults(t, reg, labels("pass")), kyvernoResults(t, reg, labels("fail"))
		if pass < 1 || fail < 1 {
			return fmt.Errorf("pass %v, fail %v", pass, fail)
		}
		return nil
	})
}
