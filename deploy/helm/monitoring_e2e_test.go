package helm_test

import (
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// scraped is what every replica of a topology exports: by sample name
// (a histogram's x_bucket, x_sum and x_count, a counter's x_total), the
// services that export it, and the families themselves by service.
type scraped struct {
	names    map[string]map[string]bool
	families map[string][]*dto.MetricFamily
}

// scrape reads /metrics of every replica of tp (the probe port the
// chart's ServiceMonitor scrapes).
func scrape(tp *topology) (scraped, error) {
	out := scraped{names: map[string]map[string]bool{}, families: map[string][]*dto.MetricFamily{}}
	for svc, rs := range tp.replicas {
		for _, r := range rs {
			resp, err := http.Get(strings.Replace(r.ready, "/readyz", "/metrics", 1))
			if err != nil {
				return out, fmt.Errorf("%s: %w", r.name, err)
			}
			p := expfmt.NewTextParser(model.UTF8Validation)
			mfs, err := p.TextToMetricFamilies(resp.Body)
			_ = resp.Body.Close()
			if err != nil {
				return out, fmt.Errorf("%s /metrics: %w", r.name, err)
			}
			for name, mf := range mfs {
				samples := []string{name}
				if mf.GetType() == dto.MetricType_HISTOGRAM {
					samples = append(samples, name+"_bucket", name+"_sum", name+"_count")
				}
				for _, s := range samples {
					if out.names[s] == nil {
						out.names[s] = map[string]bool{}
					}
					out.names[s][svc] = true
				}
				out.families[svc] = append(out.families[svc], mf)
			}
		}
	}
	return out, nil
}

// series reports whether svc exports a series of family name whose
// labels include want.
func (s scraped) series(svc, name string, want map[string]string) bool {
	for _, mf := range s.families[svc] {
		if mf.GetName() != name {
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
				return true
			}
		}
	}
	return false
}

// kyvernoSeries are the series under Kyverno's names that each service
// exports with metrics.kyvernoNames on, once the scenario ran.
var kyvernoSeries = []struct {
	svc, name string
	labels    map[string]string
}{
	{"webhook", "kyverno_admission_requests_total", map[string]string{"request_allowed": "false", "request_webhook": "ValidatingWebhookConfiguration", "resource_kind": "Pod"}},
	{"webhook", "kyverno_admission_review_duration_seconds", map[string]string{"request_allowed": "true", "resource_kind": "Pod"}},
	{"webhook", "kyverno_policy_results_total", map[string]string{"policy_name": "disallow-privileged", "rule_result": "fail", "rule_execution_cause": "admission_request", "dry_run": "true"}},
	{"webhook", "kyverno_policy_execution_duration_seconds", map[string]string{"policy_name": "require-team-label", "rule_result": "fail"}},
	{"webhook", "kyverno_policy_rule_info_total", map[string]string{"policy_name": "namespace-defaults", "rule_type": "generate"}},
	{"webhook", "kyverno_policy_changes_total", map[string]string{"policy_name": "disallow-privileged", "policy_change_type": "created"}},
	{"webhook", "kyverno_validating_policy_results_total", map[string]string{"policy_name": "require-app-label", "result": "fail", "execution_cause": "admission_request"}},
	{"reporter", "kyverno_policy_results_total", map[string]string{"policy_name": "require-team-label", "rule_execution_cause": "background_scan", "resource_request_operation": "create"}},
}

// TestE2EMonitoringMetricsExist (issue 32): the chart's HA topology runs
// as processes with metrics.kyvernoNames on; a Pod exists before the
// policies (the background scan finds it), then the scenario of
// TestE2ETopology's first part runs (an Enforce denial, an admitted Pod
// with its Audit failures in its report, a generated ConfigMap, a
// cleanup). Then every replica's /metrics is scraped: every metric the
// chart's Grafana dashboard and PrometheusRule read is exported by a
// service, and the webhook and the reporter export Kyverno's names with
// the labels of the evaluations made.
func TestE2EMonitoringMetricsExist(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the chart's topology on a real control plane; skipped under -short")
	}
	want := monitoringNames(t)
	env := startChartTopology(t, topoServices, "--set", "metrics.kyvernoNames=true")
	ctx, kube, dyn := t.Context(), env.kube, env.dyn
	if _, err := kube.CoreV1().Pods(topoNamespace).Create(ctx, topoPod("early", false), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	good := enforceTopoPolicies(t, env)
	createNamespace(t, kube, "gen-metrics")
	createTmp(t, kube, "tmp-metrics", true)
	topoEventually(t, 90*time.Second, "the report, the generated ConfigMap and the cleanup", func() error {
		if err := auditFailed(ctx, dyn, good); err != nil {
			return err
		}
		if err := generated(ctx, kube, "gen-metrics"); err != nil {
			return err
		}
		return cleaned(ctx, kube, "tmp-metrics")
	})

	// The Audit ValidatingPolicy is watched apart from the ClusterPolicies:
	// the replica that admitted the compliant Pod may not have loaded it
	// yet (its report failure then came from the background scan). A
	// dry-run Pod each round is admitted once some replica has it.
	var last scraped
	round := 0
	topoEventually(t, 90*time.Second, "every metric of the dashboard and the alerts, and Kyverno's names, scraped", func() error {
		round++
		if _, err := kube.CoreV1().Pods(topoNamespace).Create(ctx, topoPod(fmt.Sprintf("late-%d", round), false), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err != nil {
			return fmt.Errorf("dry-run Pod: %w", err)
		}
		s, err := scrape(env.topo)
		if err != nil {
			return err
		}
		last = s
		var missing []string
		for _, n := range slices.Sorted(maps.Keys(want)) {
			if len(s.names[n]) == 0 {
				missing = append(missing, n)
			}
		}
		for _, k := range kyvernoSeries {
			if !s.series(k.svc, k.name, k.labels) {
				missing = append(missing, fmt.Sprintf("%s: %s%v", k.svc, k.name, k.labels))
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not exported: %s", strings.Join(missing, ", "))
		}
		return nil
	})
	for _, n := range slices.Sorted(maps.Keys(want)) {
		t.Logf("%s: %v", n, slices.Sorted(maps.Keys(last.names[n])))
	}
}
