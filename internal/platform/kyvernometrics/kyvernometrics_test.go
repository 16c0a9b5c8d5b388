package kyvernometrics_test

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/cache"

	"github.com/verdict-dev/verdict/internal/platform/kyvernometrics"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// kyvernoLabels are the label names Kyverno 1.19 exports on each family
// (pkg/metrics of its source: the attributes each Record* call sets),
// written out here so that a change on either side shows.
var kyvernoLabels = map[string][]string{
	// admission.go RecordRequest, with the request_webhook attribute
	// its handlers add (attributes.go).
	"kyverno_admission_requests_total":          {"request_allowed", "request_webhook", "resource_kind", "resource_namespace", "resource_request_operation"},
	"kyverno_admission_review_duration_seconds": {"request_allowed", "request_webhook", "resource_kind", "resource_namespace", "resource_request_operation"},
	// policy_engine.go RecordResponse.
	"kyverno_policy_results_total": {"dry_run", "policy_background_mode", "policy_name", "policy_namespace", "policy_type", "policy_validation_mode",
		"resource_kind", "resource_namespace", "resource_request_operation", "rule_execution_cause", "rule_name", "rule_result", "rule_type"},
	"kyverno_policy_execution_duration_seconds": {"dry_run", "policy_background_mode", "policy_name", "policy_namespace", "policy_type", "policy_validation_mode",
		"resource_kind", "resource_namespace", "resource_request_operation", "rule_execution_cause", "rule_name", "rule_result", "rule_type"},
	// policy_rule.go RecordPolicyRuleInfo.
	"kyverno_policy_rule_info_total": {"policy_background_mode", "policy_name", "policy_namespace", "policy_type", "policy_validation_mode", "rule_name", "rule_type", "status_ready"},
	// metrics.go RecordPolicyChanges.
	"kyverno_policy_changes_total": {"policy_background_mode", "policy_change_type", "policy_name", "policy_namespace", "policy_type", "policy_validation_mode"},
	// vpol.go and ivpol.go.
	"kyverno_validating_policy_results_total": {"execution_cause", "policy_background_mode", "policy_name", "policy_namespace", "policy_validation_mode",
		"resource_kind", "resource_namespace", "resource_request_operation", "result"},
	"kyverno_validating_policy_execution_duration_seconds": {"execution_cause", "policy_background_mode", "policy_name", "policy_namespace", "policy_validation_mode",
		"resource_kind", "resource_namespace", "resource_request_operation", "result"},
	"kyverno_image_validating_policy_results_total": {"execution_cause", "policy_background_mode", "policy_name", "policy_namespace", "policy_validation_mode",
		"resource_kind", "resource_namespace", "resource_request_operation", "result"},
	"kyverno_image_validating_policy_execution_duration_seconds": {"execution_cause", "policy_background_mode", "policy_name", "policy_namespace", "policy_validation_mode",
		"resource_kind", "resource_namespace", "resource_request_operation", "result"},
	// mpol.go: no validation mode.
	"kyverno_mutating_policy_results_total": {"execution_cause", "policy_background_mode", "policy_name", "policy_namespace",
		"resource_kind", "resource_namespace", "resource_request_operation", "result"},
	"kyverno_mutating_policy_execution_duration_seconds": {"execution_cause", "policy_background_mode", "policy_name", "policy_namespace",
		"resource_kind", "resource_namespace", "resource_request_operation", "result"},
}

// series is one gathered series: its labels and, for a counter or a
// gauge, its value; for a histogram its count and sum.
type series struct {
	labels     map[string]string
	value, sum float64
	count      uint64
	typ        dto.MetricType
}

func gather(t *testing.T, reg *prometheus.Registry) map[string][]series {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]series{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			s := series{labels: map[string]string{}, typ: mf.GetType()}
			for _, lp := range m.GetLabel() {
				s.labels[lp.GetName()] = lp.GetValue()
			}
			switch mf.GetType() {
			case dto.MetricType_COUNTER:
				s.value = m.GetCounter().GetValue()
			case dto.MetricType_GAUGE:
				s.value = m.GetGauge().GetValue()
			case dto.MetricType_HISTOGRAM:
				s.count, s.sum = m.GetHistogram().GetSampleCount(), m.GetHistogram().GetSampleSum()
			}
			out[mf.GetName()] = append(out[mf.GetName()], s)
		}
	}
	return out
}

// checkLabels fails unless every series of every family gathered has
// exactly Kyverno's label names.
func checkLabels(t *testing.T, got map[string][]series) {
	t.Helper()
	for name, ss := range got {
		want, ok := kyvernoLabels[name]
		if !ok {
			t.Errorf("%s: not a name Kyverno exports", name)
			continue
		}
		for _, s := range ss {
			if names := slices.Sorted(maps.Keys(s.labels)); !slices.Equal(names, want) {
				t.Errorf("%s: labels %v, Kyverno's are %v", name, names, want)
			}
		}
	}
}

// find returns the series of name whose labels include want.
func find(t *testing.T, got map[string][]series, name string, want map[string]string) series {
	t.Helper()
	for _, s := range got[name] {
		match := true
		for k, v := range want {
			if s.labels[k] != v {
				match = false
				break
			}
		}
		if match {
			return s
		}
	}
	var have []string
	for _, s := range got[name] {
		have = append(have, labelString(s.labels))
	}
	t.Fatalf("%s: no series with %s; have:\n%s", name, labelString(want), strings.Join(have, "\n"))
	return series{}
}

func labelString(l map[string]string) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(l)) {
		parts = append(parts, k+"="+l[k])
	}
	return "{" + strings.Join(parts, ",") + "}"
}

func newMetrics(t *testing.T) (*kyvernometrics.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := kyvernometrics.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

func TestAdmission(t *testing.T) {
	m, reg := newMetrics(t)
	m.Admission(kyvernometrics.Validating, "Pod", "team", "CREATE", false, 30*time.Millisecond)
	m.Admission(kyvernometrics.Validating, "Pod", "team", "CREATE", false, 10*time.Millisecond)
	m.Admission(kyvernometrics.Mutating, "Namespace", "gen-a", "UPDATE", true, time.Millisecond)
	got := gather(t, reg)
	checkLabels(t, got)
	denied := map[string]string{"resource_kind": "Pod", "resource_namespace": "team", "resource_request_operation": "create",
		"request_allowed": "false", "request_webhook": "ValidatingWebhookConfiguration"}
	if s := find(t, got, "kyverno_admission_requests_total", denied); s.value != 2 || s.typ != dto.MetricType_COUNTER {
		t.Errorf("requests: %+v", s)
	}
	if s := find(t, got, "kyverno_admission_review_duration_seconds", denied); s.count != 2 || s.sum < 0.0399 || s.sum > 0.0401 {
		t.Errorf("duration: %+v", s)
	}
	find(t, got, "kyverno_admission_requests_total", map[string]string{"resource_kind": "Namespace", "resource_request_operation": "update",
		"request_allowed": "true", "request_webhook": "MutatingWebhookConfiguration"})
}

func compile(t *testing.T, eng *engine.Engine, y string) *engine.Policy {
	t.Helper()
	docs, err := policy.Parse([]byte(y), "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs.Policies) != 1 {
		t.Fatalf("%d policies", len(docs.Policies))
	}
	p, err := eng.Compile(docs.Policies[0])
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func object(t *testing.T, y string) map[string]any {
	t.Helper()
	docs, err := document.DecodeAll([]byte(y))
	if err != nil || len(docs) != 1 {
		t.Fatalf("decode: %v", err)
	}
	return docs[0].Object
}

const (
	enforcePolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: enforced}
spec:
  validationFailureAction: Audit
  rules:
  - name: privileged
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      failureAction: Enforce
      message: no privileged containers
      pattern: {spec: {containers: [{=(securityContext): {=(privileged): "false"}}]}}
  - name: team
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: label team is required
      pattern: {metadata: {labels: {team: "?*"}}}
`
	namespacedPolicy = `apiVersion: kyverno.io/v1
kind: Policy
metadata: {name: local, namespace: team}
spec:
  background: false
  rules:
  - name: add-label
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate: {patchStrategicMerge: {metadata: {labels: {added: "yes"}}}}
`
	vpol = `apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: vp}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}]
  validations:
  - expression: "has(object.metadata.labels) && 'app' in object.metadata.labels"
    message: label app is required
`
	mpol = `apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: mp}
spec:
  evaluation: {background: {enabled: false}}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"owner": "me"}}}'
`
)

// TestResults evaluates a ClusterPolicy, a Policy, a ValidatingPolicy and
// a MutatingPolicy on a Pod with an engine whose rule clock ticks 2ms a
// read, records them as admission and as a background scan, and checks
// the series against Kyverno's names, labels and label values.
func TestResults(t *testing.T) {
	tick := time.Unix(0, 0)
	eng, err := engine.New(engine.WithRuleClock(func() time.Time { tick = tick.Add(2 * time.Millisecond); return tick }))
	if err != nil {
		t.Fatal(err)
	}
	pod := object(t, `{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: team, labels: {app: a}}, spec: {containers: [{name: c, image: nginx, securityContext: {privileged: true}}]}}`)
	req := &engine.Request{Operation: engine.OpCreate, Object: pod, Namespace: "team", Name: "p"}
	m, reg := newMetrics(t)
	admission := kyvernometrics.Evaluation{Cause: kyvernometrics.AdmissionRequest, Operation: "CREATE", DryRun: true, Kind: "Pod", Namespace: "team"}
	enforced := compile(t, eng, enforcePolicy)
	m.Results(admission, eng.Check(t.Context(), req, enforced, nil))
	m.Results(admission, eng.Mutate(t.Context(), req, compile(t, eng, namespacedPolicy), nil))
	m.Results(admission, eng.Check(t.Context(), req, compile(t, eng, vpol), nil))
	m.Results(admission, eng.Mutate(t.Context(), req, compile(t, eng, mpol), nil))
	scan := kyvernometrics.Evaluation{Cause: kyvernometrics.BackgroundScan, Operation: "CREATE", Kind: "Pod", Namespace: "team"}
	m.Results(scan, eng.Check(t.Context(), &engine.Request{Object: pod}, enforced, nil))

	got := gather(t, reg)
	checkLabels(t, got)
	want := map[string]string{
		"policy_name": "enforced", "policy_namespace": "-", "policy_type": "cluster", "policy_validation_mode": "enforce",
		"policy_background_mode": "true", "resource_kind": "Pod", "resource_namespace": "team", "resource_request_operation": "create",
		"rule_name": "privileged", "rule_type": "validate", "rule_result": "fail", "rule_execution_cause": "admission_request", "dry_run": "true",
	}
	if s := find(t, got, "kyverno_policy_results_total", want); s.value != 1 {
		t.Errorf("privileged: %+v", s)
	}
	if s := find(t, got, "kyverno_policy_execution_duration_seconds", want); s.count != 1 || s.sum < 0.00199 || s.sum > 0.00201 {
		t.Errorf("privileged duration (one rule, 2ms): %+v", s)
	}
	want["rule_name"], want["rule_result"] = "team", "fail"
	find(t, got, "kyverno_policy_results_total", want)
	want["rule_execution_cause"], want["dry_run"] = "background_scan", "false"
	find(t, got, "kyverno_policy_results_total", want)
	find(t, got, "kyverno_policy_results_total", map[string]string{
		"policy_name": "local", "policy_namespace": "team", "policy_type": "namespaced", "policy_validation_mode": "audit",
		"policy_background_mode": "false", "rule_name": "add-label", "rule_type": "mutate", "rule_result": "pass",
	})
	find(t, got, "kyverno_validating_policy_results_total", map[string]string{
		"policy_name": "vp", "policy_namespace": "", "policy_validation_mode": "Deny", "policy_background_mode": "true",
		"resource_kind": "Pod", "resource_namespace": "team", "resource_request_operation": "create",
		"execution_cause": "admission_request", "result": "pass",
	})
	find(t, got, "kyverno_validating_policy_execution_duration_seconds", map[string]string{"policy_name": "vp", "result": "pass"})
	find(t, got, "kyverno_mutating_policy_results_total", map[string]string{
		"policy_name": "mp", "policy_namespace": "", "policy_background_mode": "false", "execution_cause": "admission_request", "result": "pass",
	})
	find(t, got, "kyverno_mutating_policy_execution_duration_seconds", map[string]string{"policy_name": "mp"})
}

// TestResultsOfIVPol records an ImageValidatingPolicy's result under its
// own family.
func TestResultsOfIVPol(t *testing.T) {
	m, reg := newMetrics(t)
	raw := &policy.Policy{Kind: policy.KindNamespacedImageValidatingPolicy, Metadata: policy.ObjectMeta{Name: "images", Namespace: "team"},
		IVPol: &policy.ImageValidatingPolicySpec{}}
	raw.Spec.ValidationFailureAction = policy.Audit
	m.Results(kyvernometrics.Evaluation{Cause: kyvernometrics.BackgroundScan, Operation: "CREATE", Kind: "Pod", Namespace: "team"},
		engine.Response{Policy: &engine.Policy{Raw: raw}, Rules: []engine.RuleResponse{{Name: "images", Status: engine.StatusError}}})
	got := gather(t, reg)
	checkLabels(t, got)
	find(t, got, "kyverno_image_validating_policy_results_total", map[string]string{
		"policy_name": "images", "policy_namespace": "team", "policy_validation_mode": "Audit", "execution_cause": "background_scan", "result": "error",
	})
}

// TestRuleInfo checks kyverno_policy_rule_info_total: one series a rule,
// autogen rules included, ready from the status, CEL kinds left out.
func TestRuleInfo(t *testing.T) {
	eng, err := engine.New()
	if err != nil {
		t.Fatal(err)
	}
	enforced := compile(t, eng, enforcePolicy)
	enforced.Raw.Status = &policy.Status{Ready: true}
	local := compile(t, eng, namespacedPolicy)
	reg := prometheus.NewRegistry()
	if err := kyvernometrics.RuleInfo(reg, func() []*engine.Policy {
		return []*engine.Policy{enforced, local, compile(t, eng, vpol)}
	}); err != nil {
		t.Fatal(err)
	}
	got := gather(t, reg)
	checkLabels(t, got)
	var rules []string
	for _, s := range got["kyverno_policy_rule_info_total"] {
		if s.value != 1 || s.typ != dto.MetricType_GAUGE {
			t.Errorf("%s: %+v", labelString(s.labels), s)
		}
		rules = append(rules, s.labels["policy_name"]+"/"+s.labels["rule_name"])
	}
	sort.Strings(rules)
	want := []string{
		"enforced/autogen-cronjob-privileged", "enforced/autogen-cronjob-team", "enforced/autogen-privileged", "enforced/autogen-team",
		"enforced/privileged", "enforced/team",
		"local/add-label", "local/autogen-add-label", "local/autogen-cronjob-add-label",
	}
	if !slices.Equal(rules, want) {
		t.Errorf("rules %v, want %v", rules, want)
	}
	find(t, got, "kyverno_policy_rule_info_total", map[string]string{
		"policy_name": "enforced", "policy_namespace": "-", "policy_type": "cluster", "rule_name": "privileged", "rule_type": "validate",
		"status_ready": "true", "policy_validation_mode": "enforce", "policy_background_mode": "true",
	})
	find(t, got, "kyverno_policy_rule_info_total", map[string]string{
		"policy_name": "local", "policy_namespace": "team", "policy_type": "namespaced", "rule_name": "add-label", "rule_type": "mutate",
		"status_ready": "false", "policy_validation_mode": "audit", "policy_background_mode": "false",
	})
}

func watchObject(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	return &unstructured.Unstructured{Object: object(t, y)}
}

// TestPolicyChanges checks kyverno_policy_changes_total as Kyverno counts
// watch events: a spec change under the old labels (and the new ones
// when the mode changed), a status change not at all, other kinds never.
func TestPolicyChanges(t *testing.T) {
	m, reg := newMetrics(t)
	h := m.PolicyChanges()
	audit := watchObject(t, `{apiVersion: kyverno.io/v1, kind: ClusterPolicy, metadata: {name: cp}, spec: {rules: [{name: r, validate: {message: m}}]}}`)
	enforce := watchObject(t, `{apiVersion: kyverno.io/v1, kind: ClusterPolicy, metadata: {name: cp}, spec: {rules: [{name: r, validate: {message: m, failureAction: Enforce}}]}}`)
	withStatus := watchObject(t, `{apiVersion: kyverno.io/v1, kind: ClusterPolicy, metadata: {name: cp}, spec: {rules: [{name: r, validate: {message: m, failureAction: Enforce}}]}, status: {ready: true}}`)
	h.OnAdd(audit, true)
	h.OnUpdate(audit, enforce)
	h.OnUpdate(enforce, withStatus)
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "cp", Obj: withStatus})
	h.OnAdd(watchObject(t, `{apiVersion: policies.kyverno.io/v1, kind: GeneratingPolicy, metadata: {name: gp}, spec: {}}`), false)
	h.OnAdd(watchObject(t, `{apiVersion: kyverno.io/v1, kind: Policy, metadata: {name: p, namespace: team}, spec: {background: false, rules: []}}`), false)

	got := gather(t, reg)
	checkLabels(t, got)
	count := func(mode, change string) float64 {
		return find(t, got, "kyverno_policy_changes_total", map[string]string{"policy_name": "cp", "policy_namespace": "-", "policy_type": "cluster",
			"policy_background_mode": "true", "policy_validation_mode": mode, "policy_change_type": change}).value
	}
	if c := count("audit", "created"); c != 1 {
		t.Errorf("created: %v", c)
	}
	if c := count("audit", "updated"); c != 1 {
		t.Errorf("updated under the old labels: %v", c)
	}
	if c := count("enforce", "updated"); c != 1 {
		t.Errorf("updated under the new labels (the mode changed), the status change not counted: %v", c)
	}
	if c := count("enforce", "deleted"); c != 1 {
		t.Errorf("deleted: %v", c)
	}
	find(t, got, "kyverno_policy_changes_total", map[string]string{"policy_name": "p", "policy_namespace": "team", "policy_type": "namespaced",
		"policy_background_mode": "false", "policy_validation_mode": "audit", "policy_change_type": "created"})
	if n := len(got["kyverno_policy_changes_total"]); n != 5 {
		t.Errorf("%d series, want 5 (the GeneratingPolicy is not counted)", n)
	}
}
