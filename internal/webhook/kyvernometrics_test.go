package webhook

import (
	"net/http"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
)

// families gathers h's registry by name.
func families(t *testing.T, h *harness) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := h.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// histogramCount is the sample count of a histogram's series with labels.
func histogramCount(mf *dto.MetricFamily, labels map[string]string) (uint64, float64) {
	for _, m := range mf.GetMetric() {
		if labelsMatch(m, labels) {
			return m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
		}
	}
	return 0, 0
}

// With --kyverno-metrics the webhook records its admission requests and
// rule results under Kyverno's names, from its real evaluations: a denial
// as request_allowed=false, a failed Enforce rule as rule_result=fail
// with its measured duration, every rule in kyverno_policy_rule_info_total,
// an error answer as not allowed.
func TestKyvernoMetrics(t *testing.T) {
	h := newHarness(t, staticSource(t, enforcePrivileged, mutateLabels), testConfig(func(c *Config) { c.KyvernoMetrics = true }))
	if resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("bad", privileged, inNamespace("team")))); resp.Allowed {
		t.Fatal("privileged pod admitted")
	}
	if resp := h.admit(PathMutateCluster, reviewOf(t, admissionv1.Create, pod("good", inNamespace("team")), dryRun)); !resp.Allowed {
		t.Fatal("mutation refused")
	}
	denied := map[string]string{"resource_kind": "Pod", "resource_namespace": "team", "resource_request_operation": "create",
		"request_allowed": "false", "request_webhook": "ValidatingWebhookConfiguration"}
	if got := counter(t, h.reg, "kyverno_admission_requests_total", denied); got != 1 {
		t.Errorf("denied admission counted %v", got)
	}
	mutated := map[string]string{"resource_kind": "Pod", "resource_request_operation": "create", "request_allowed": "true",
		"request_webhook": "MutatingWebhookConfiguration"}
	if got := counter(t, h.reg, "kyverno_admission_requests_total", mutated); got != 1 {
		t.Errorf("mutation counted %v", got)
	}
	fams := families(t, h)
	if n, sum := histogramCount(fams["kyverno_admission_review_duration_seconds"], denied); n != 1 || sum <= 0 {
		t.Errorf("admission duration: %d observations, sum %v", n, sum)
	}
	failed := map[string]string{"policy_name": "disallow-privileged", "policy_namespace": "-", "policy_type": "cluster",
		"policy_validation_mode": "enforce", "policy_background_mode": "true", "rule_name": "privileged-containers",
		"rule_type": "validate", "rule_result": "fail", "rule_execution_cause": "admission_request", "dry_run": "false",
		"resource_kind": "Pod", "resource_namespace": "team", "resource_request_operation": "create"}
	if got := counter(t, h.reg, "kyverno_policy_results_total", failed); got != 1 {
		t.Errorf("failed rule counted %v", got)
	}
	if n, sum := histogramCount(fams["kyverno_policy_execution_duration_seconds"], failed); n != 1 || sum <= 0 {
		t.Errorf("rule duration: %d observations, sum %v (the rule is timed)", n, sum)
	}
	patched := map[string]string{"policy_name": "add-labels", "rule_name": "team-label", "rule_type": "mutate", "rule_result": "pass", "dry_run": "true"}
	if got := counter(t, h.reg, "kyverno_policy_results_total", patched); got != 1 {
		t.Errorf("mutate rule counted %v", got)
	}
	info := map[string]string{"policy_name": "disallow-privileged", "rule_name": "privileged-containers", "rule_type": "validate", "status_ready": "false"}
	if got := counter(t, h.reg, "kyverno_policy_rule_info_total", info); got != 1 {
		t.Errorf("rule info %v", got)
	}

	// An error answer (here a recovered panic) is a request not allowed.
	broken := newHarness(t, panicSource{}, testConfig(func(c *Config) { c.KyvernoMetrics = true }))
	body := mustJSON(t, reviewOf(t, admissionv1.Create, pod("p")))
	if code, _ := broken.post(PathValidate, "application/json", body); code != http.StatusInternalServerError {
		t.Fatalf("status %d", code)
	}
	if got := counter(t, broken.reg, "kyverno_admission_requests_total", map[string]string{"request_allowed": "false", "resource_kind": "Pod"}); got != 1 {
		t.Errorf("error answer counted %v", got)
	}
}

// Without --kyverno-metrics no kyverno_* family is registered (nor the
// engine's rule clock set: pkg/engine TestRuleClock); the series alerts
// watch are there at 0 from the start.
func TestKyvernoMetricsOff(t *testing.T) {
	h := newHarness(t, staticSource(t, enforcePrivileged), testConfig())
	h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("bad", privileged)))
	fams := families(t, h)
	for name := range fams {
		if strings.HasPrefix(name, "kyverno_") {
			t.Errorf("%s registered without --kyverno-metrics", name)
		}
	}
	for _, want := range []struct {
		name   string
		labels map[string]string
	}{
		{"verdict_webhook_panics_total", map[string]string{"endpoint": "validate-cluster"}},
		{"verdict_webhook_panics_total", map[string]string{"endpoint": "mutate"}},
		{"verdict_webhook_work_publish_failures_total", map[string]string{"reason": "streamFull"}},
	} {
		found := false
		for _, m := range fams[want.name].GetMetric() {
			found = found || labelsMatch(m, want.labels)
		}
		if !found {
			t.Errorf("%s%v not there before its first event", want.name, want.labels)
		}
	}
}
