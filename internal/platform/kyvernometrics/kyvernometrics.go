// Package kyvernometrics records Verdict's evaluations under the metric
// names and labels Kyverno 1.19 exports (kyverno_admission_requests_total,
// kyverno_policy_results_total, kyverno_policy_execution_duration_seconds,
// ...), so that dashboards and alerts built for Kyverno keep working after
// the switch (docs/migrating-from-kyverno.md, "Metrics"). It is off unless
// a service is started with --kyverno-metrics (the chart's
// metrics.kyvernoNames); Verdict's own verdict_* metrics are there either
// way.
//
// Every value comes from an evaluation Verdict made: the webhook records
// its admission requests and the rule results of its engine calls, the
// reporter's background scan the rule results of its scans. Durations are
// the engine's per-rule timings (engine.WithRuleClock), which the services
// turn on together with these metrics.
//
// Kyverno's names, labels and label values are read from its source
// (pkg/metrics: admission.go, policy_engine.go, policy_rule.go, vpol.go,
// ivpol.go, mpol.go, common_types.go; its OpenTelemetry Prometheus exporter
// adds _total to counters). What Kyverno exports and Verdict does not:
// kyverno_info (it would claim a Kyverno version), the client, HTTP,
// controller, event, TTL, cleanup and generate families, and the
// otel_scope_* labels of Kyverno's exporter.
package kyvernometrics

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// Metric names, as Kyverno's Prometheus exporter writes them.
const (
	NameAdmissionRequests  = "kyverno_admission_requests_total"
	NameAdmissionDuration  = "kyverno_admission_review_duration_seconds"
	NamePolicyResults      = "kyverno_policy_results_total"
	NamePolicyDuration     = "kyverno_policy_execution_duration_seconds"
	NamePolicyRuleInfo     = "kyverno_policy_rule_info_total"
	NamePolicyChanges      = "kyverno_policy_changes_total"
	NameVPolResults        = "kyverno_validating_policy_results_total"
	NameVPolDuration       = "kyverno_validating_policy_execution_duration_seconds"
	NameIVPolResults       = "kyverno_image_validating_policy_results_total"
	NameIVPolDuration      = "kyverno_image_validating_policy_execution_duration_seconds"
	NameMPolResults        = "kyverno_mutating_policy_results_total"
	NameMPolDuration       = "kyverno_mutating_policy_execution_duration_seconds"
	labelResourceKind      = "resource_kind"
	labelResourceNamespace = "resource_namespace"
	labelOperation         = "resource_request_operation"
	labelPolicyName        = "policy_name"
	labelPolicyNamespace   = "policy_namespace"
	labelPolicyType        = "policy_type"
	labelPolicyMode        = "policy_validation_mode"
	labelPolicyBackground  = "policy_background_mode"
	labelRuleName          = "rule_name"
	labelRuleType          = "rule_type"
	labelRuleResult        = "rule_result"
	labelRuleCause         = "rule_execution_cause"
	labelCELCause          = "execution_cause"
	labelCELResult         = "result"
	labelDryRun            = "dry_run"
	labelAllowed           = "request_allowed"
	labelWebhook           = "request_webhook"
	labelStatusReady       = "status_ready"
	labelChangeType        = "policy_change_type"
	clusterPolicyNamespace = "-"
	policyTypeCluster      = "cluster"
	policyTypeNamespaced   = "namespaced"
	modeEnforce            = "enforce"
	modeAudit              = "audit"
	celModeDeny            = "Deny"
	celModeAudit           = "Audit"
	ruleTypeValidate       = "validate"
	ruleTypeMutate         = "mutate"
	ruleTypeGenerate       = "generate"
	ruleTypeImageVerify    = "imageVerify"
	ruleTypeNone           = "-"
	changeCreated          = "created"
	changeUpdated          = "updated"
	changeDeleted          = "deleted"
	boolTrue, boolFalse    = "true", "false"
)

// Webhook is the request_webhook label: the kind of configuration the
// API server called the webhook through.
type Webhook string

// The webhooks, as Kyverno names them.
const (
	Mutating   Webhook = "MutatingWebhookConfiguration"
	Validating Webhook = "ValidatingWebhookConfiguration"
)

// Cause is why a rule was evaluated (rule_execution_cause,
// execution_cause).
type Cause string

// Causes.
const (
	AdmissionRequest Cause = "admission_request"
	BackgroundScan   Cause = "background_scan"
)

// Buckets are the bounds of the histograms, in seconds: Kyverno's
// defaults, so that quantiles compare.
var Buckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 15, 20, 25, 30}

// The label names of each family, in the order their values are given.
var (
	admissionLabels = [...]string{labelResourceKind, labelResourceNamespace, labelOperation, labelAllowed, labelWebhook}
	resultLabels    = [...]string{
		labelPolicyMode, labelPolicyType, labelPolicyBackground, labelPolicyNamespace, labelPolicyName,
		labelResourceKind, labelResourceNamespace, labelOperation,
		labelRuleName, labelRuleResult, labelRuleType, labelRuleCause, labelDryRun,
	}
	validatingLabels = [...]string{
		labelPolicyMode, labelPolicyBackground, labelPolicyName, labelPolicyNamespace,
		labelResourceKind, labelResourceNamespace, labelOperation, labelCELCause, labelCELResult,
	}
	mutatingLabels = [...]string{
		labelPolicyBackground, labelPolicyName, labelPolicyNamespace,
		labelResourceKind, labelResourceNamespace, labelOperation, labelCELCause, labelCELResult,
	}
	ruleInfoLabels = [...]string{
		labelRuleName, labelRuleType, labelPolicyNamespace, labelPolicyName, labelStatusReady,
		labelPolicyMode, labelPolicyType, labelPolicyBackground,
	}
	changeLabels = [...]string{
		labelPolicyMode, labelPolicyType, labelPolicyBackground, labelPolicyNamespace, labelPolicyName, labelChangeType,
	}
)

// Metrics records evaluations under Kyverno's names. Make it with New;
// it is safe for concurrent use.
type Metrics struct {
	admissionRequests *prometheus.CounterVec
	admissionDuration *prometheus.HistogramVec
	results           *prometheus.CounterVec
	duration          *prometheus.HistogramVec
	vpolResults       *prometheus.CounterVec
	vpolDuration      *prometheus.HistogramVec
	ivpolResults      *prometheus.CounterVec
	ivpolDuration     *prometheus.HistogramVec
	mpolResults       *prometheus.CounterVec
	mpolDuration      *prometheus.HistogramVec
	changes           *prometheus.CounterVec

	// The series of each family pair by their label values (see
	// seriesOf).
	admissionSeries seriesCache[admissionValues]
	resultSeries    seriesCache[resultValues]
	vpolSeries      seriesCache[validatingValues]
	ivpolSeries     seriesCache[validatingValues]
	mpolSeries      seriesCache[mutatingValues]
}

// The label values of each family, in the order of its label names: as
// arrays, they are the keys of seriesCache.
type (
	admissionValues  [len(admissionLabels)]string
	resultValues     [len(resultLabels)]string
	validatingValues [len(validatingLabels)]string
	mutatingValues   [len(mutatingLabels)]string
)

// labelValues is the label values of a family.
type labelValues interface {
	comparable
	slice() []string
}

func (v admissionValues) slice() []string  { return v[:] }
func (v resultValues) slice() []string     { return v[:] }
func (v validatingValues) slice() []string { return v[:] }
func (v mutatingValues) slice() []string   { return v[:] }

// series is a counter and the histogram of the same labels.
type series struct {
	count    prometheus.Counter
	duration prometheus.Observer
}

// seriesCache keeps the series of a pair of families by their label
// values, so that recording one is a map lookup: a vector's
// WithLabelValues checks and hashes every value, twice for a pair, which
// on the admission path costs several times more. It holds one entry a
// series, as the vectors do.
type seriesCache[K labelValues] struct {
	mu       sync.RWMutex
	m        map[K]series
	count    *prometheus.CounterVec
	duration *prometheus.HistogramVec
}

// seriesOf returns the series of the label values k.
func (c *seriesCache[K]) seriesOf(k K) series {
	c.mu.RLock()
	s, ok := c.m[k]
	c.mu.RUnlock()
	if ok {
		return s
	}
	values := k.slice()
	s = series{count: c.count.WithLabelValues(values...), duration: c.duration.WithLabelValues(values...)}
	c.mu.Lock()
	if c.m == nil {
		c.m = map[K]series{}
	}
	c.m[k] = s
	c.mu.Unlock()
	return s
}

func (s series) record(took time.Duration) {
	s.count.Inc()
	s.duration.Observe(took.Seconds())
}

// New makes the families and registers them on reg: the admission
// requests and their durations, the rule results and durations of the
// classic and CEL policy kinds, and the policy changes.
// kyverno_policy_rule_info_total is registered apart (RuleInfo), by the
// services that hold the policy set.
func New(reg prometheus.Registerer) (*Metrics, error) {
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
	}
	histogram := func(name, help string, labels []string) *prometheus.HistogramVec {
		return prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: Buckets}, labels)
	}
	m := &Metrics{
		admissionRequests: counter(NameAdmissionRequests,
			"Kyverno's name: admission requests answered, by the resource's kind, namespace and operation, whether the answer allowed it, and the kind of webhook configuration.", admissionLabels[:]),
		admissionDuration: histogram(NameAdmissionDuration,
			"Kyverno's name: time from an admission request's arrival to its answer, every policy evaluated on it included, with the labels of kyverno_admission_requests_total.", admissionLabels[:]),
		results: counter(NamePolicyResults,
			"Kyverno's name: rule results of ClusterPolicies and Policies, one per rule evaluated, at admission or in a background scan.", resultLabels[:]),
		duration: histogram(NamePolicyDuration,
			"Kyverno's name: time to evaluate one rule of a ClusterPolicy or Policy, with the labels of kyverno_policy_results_total.", resultLabels[:]),
		vpolResults: counter(NameVPolResults,
			"Kyverno's name: results of ValidatingPolicies and NamespacedValidatingPolicies, one per evaluation that gave one.", validatingLabels[:]),
		vpolDuration: histogram(NameVPolDuration,
			"Kyverno's name: time to evaluate a ValidatingPolicy on a resource.", validatingLabels[:]),
		ivpolResults: counter(NameIVPolResults,
			"Kyverno's name: results of ImageValidatingPolicies and their namespaced kind, one per evaluation that gave one.", validatingLabels[:]),
		ivpolDuration: histogram(NameIVPolDuration,
			"Kyverno's name: time to evaluate an ImageValidatingPolicy on a resource.", validatingLabels[:]),
		mpolResults: counter(NameMPolResults,
			"Kyverno's name: results of MutatingPolicies and NamespacedMutatingPolicies, one per evaluation that gave one.", mutatingLabels[:]),
		mpolDuration: histogram(NameMPolDuration,
			"Kyverno's name: time to evaluate a MutatingPolicy on a resource.", mutatingLabels[:]),
		changes: counter(NamePolicyChanges,
			"Kyverno's name: ClusterPolicies and Policies seen created, updated (their spec) and deleted by this replica's watch; those present at start count as created.", changeLabels[:]),
	}
	m.admissionSeries = seriesCache[admissionValues]{count: m.admissionRequests, duration: m.admissionDuration}
	m.resultSeries = seriesCache[resultValues]{count: m.results, duration: m.duration}
	m.vpolSeries = seriesCache[validatingValues]{count: m.vpolResults, duration: m.vpolDuration}
	m.ivpolSeries = seriesCache[validatingValues]{count: m.ivpolResults, duration: m.ivpolDuration}
	m.mpolSeries = seriesCache[mutatingValues]{count: m.mpolResults, duration: m.mpolDuration}
	for _, c := range []prometheus.Collector{
		m.admissionRequests, m.admissionDuration, m.results, m.duration,
		m.vpolResults, m.vpolDuration, m.ivpolResults, m.ivpolDuration, m.mpolResults, m.mpolDuration, m.changes,
	} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register Kyverno's metrics: %w", err)
		}
	}
	return m, nil
}

// Admission records one answered admission request: the resource's kind,
// the request's namespace and operation (CREATE, UPDATE, DELETE,
// CONNECT), whether the answer allowed it, and how long it took.
func (m *Metrics) Admission(w Webhook, kind, namespace, operation string, allowed bool, took time.Duration) {
	m.admissionSeries.seriesOf(admissionValues{kind, namespace, lowerOperation(operation), formatBool(allowed), string(w)}).record(took)
}

// Evaluation is what the rule results of one engine call share.
type Evaluation struct {
	Cause Cause
	// Operation is the admission operation (CREATE, UPDATE, DELETE,
	// CONNECT); a background scan evaluates as a CREATE, as Kyverno's does.
	Operation string
	// DryRun is the admission request's dryRun.
	DryRun bool
	// Kind and Namespace are the resource's.
	Kind, Namespace string
}

// Results records the rule results of one engine call on one policy:
// under kyverno_policy_results_total (and its duration) for a
// ClusterPolicy or Policy, under the family of its kind for a
// ValidatingPolicy, ImageValidatingPolicy or MutatingPolicy. The results
// of other kinds (GeneratingPolicy, the API server's admission policies)
// have no family here and are not recorded.
func (m *Metrics) Results(ev Evaluation, resp engine.Response) {
	p := resp.Policy
	if p == nil || p.Raw == nil || len(resp.Rules) == 0 {
		return
	}
	raw := p.Raw
	op := lowerOperation(ev.Operation)
	switch {
	case raw.VPol != nil, raw.IVPol != nil:
		cache := &m.vpolSeries
		if raw.IVPol != nil {
			cache = &m.ivpolSeries
		}
		mode := celModeAudit
		if raw.Spec.ValidationFailureAction == policy.Enforce {
			mode = celModeDeny
		}
		for _, rr := range resp.Rules {
			cache.seriesOf(validatingValues{mode, backgroundMode(raw), raw.Metadata.Name, raw.Metadata.Namespace,
				ev.Kind, ev.Namespace, op, string(ev.Cause), string(rr.Status)}).record(rr.Duration)
		}
	case raw.MPol != nil:
		for _, rr := range resp.Rules {
			m.mpolSeries.seriesOf(mutatingValues{backgroundMode(raw), raw.Metadata.Name, raw.Metadata.Namespace,
				ev.Kind, ev.Namespace, op, string(ev.Cause), string(rr.Status)}).record(rr.Duration)
		}
	case classic(raw):
		info := classicInfo(raw)
		dry := formatBool(ev.DryRun)
		for _, rr := range resp.Rules {
			m.resultSeries.seriesOf(resultValues{info.mode, info.typ, info.background, info.namespace, info.name,
				ev.Kind, ev.Namespace, op, rr.Name, ruleResult(rr.Status), responseType(rr.Type), string(ev.Cause), dry}).record(rr.Duration)
		}
	}
}

// classic reports whether p is a ClusterPolicy or a Policy (the kinds
// Kyverno's policy metrics count), not a CEL kind converted to the same
// shape.
func classic(p *policy.Policy) bool {
	return (p.Kind == policy.KindClusterPolicy || p.Kind == policy.KindPolicy) &&
		p.VPol == nil && p.MPol == nil && p.GPol == nil && p.IVPol == nil && p.Native == nil
}

// policyInfo is the labels that describe a classic policy.
type policyInfo struct {
	name, namespace, typ, background, mode string
}

func classicInfo(p *policy.Policy) policyInfo {
	info := policyInfo{name: p.Metadata.Name, namespace: clusterPolicyNamespace, typ: policyTypeCluster, background: backgroundMode(p), mode: modeAudit}
	if p.Namespaced() {
		info.namespace, info.typ = p.Metadata.Namespace, policyTypeNamespaced
	}
	if enforces(p) {
		info.mode = modeEnforce
	}
	return info
}

// enforces is Kyverno's HasValidateEnforce: a validate rule whose own
// failureAction is Enforce, or the policy's validationFailureAction.
func enforces(p *policy.Policy) bool {
	for i := range p.Spec.Rules {
		if v := p.Spec.Rules[i].Validation; v != nil && strings.EqualFold(v.FailureAction, policy.Enforce) {
			return true
		}
	}
	return strings.EqualFold(p.Spec.ValidationFailureAction, policy.Enforce)
}

func backgroundMode(p *policy.Policy) string { return formatBool(p.Spec.BackgroundEnabled()) }

// ruleResult is the rule_result label: the status's name (Kyverno counts
// an unknown status as a failure).
func ruleResult(s engine.Status) string {
	switch s {
	case engine.StatusPass, engine.StatusFail, engine.StatusWarn, engine.StatusError, engine.StatusSkip:
		return string(s)
	}
	return string(engine.StatusFail)
}

// responseType is the rule_type label of a rule response.
func responseType(t engine.RuleType) string {
	switch t {
	case engine.TypeValidation:
		return ruleTypeValidate
	case engine.TypeMutation:
		return ruleTypeMutate
	case engine.TypeGeneration:
		return ruleTypeGenerate
	case engine.TypeImageVerify:
		return ruleTypeImageVerify
	}
	return ruleTypeNone
}

// ruleType is the rule_type label of a rule as written.
func ruleType(r *policy.Rule) string {
	switch {
	case r.Validation != nil:
		return ruleTypeValidate
	case r.Mutation != nil:
		return ruleTypeMutate
	case r.Generation != nil:
		return ruleTypeGenerate
	case len(r.VerifyImages) > 0:
		return ruleTypeImageVerify
	}
	return ruleTypeNone
}

// lowerOperation is resource_request_operation: the operation in lower
// case, without allocating for the four an API server sends.
func lowerOperation(op string) string {
	switch op {
	case "CREATE":
		return "create"
	case "UPDATE":
		return "update"
	case "DELETE":
		return "delete"
	case "CONNECT":
		return "connect"
	}
	return strings.ToLower(op)
}

func formatBool(b bool) string {
	if b {
		return boolTrue
	}
	return boolFalse
}
