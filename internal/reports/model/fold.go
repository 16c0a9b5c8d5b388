// Package model is the report model: a resource's results folded into
// its PolicyReport (Fold), the order of results, and a result message
// decoded and checked against its subject. It is pure: the reporter
// writes what it folds, the serving index holds it, the API server
// serves it.
package model

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// The report kinds (wgpolicyk8s.io/v1alpha2).
const (
	ReportAPIVersion        = "wgpolicyk8s.io/v1alpha2"
	KindPolicyReport        = "PolicyReport"
	KindClusterPolicyReport = "ClusterPolicyReport"
)

// The report resources.
var (
	PolicyReports        = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}
	ClusterPolicyReports = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "clusterpolicyreports"}
)

// Metadata Verdict puts on its reports.
const (
	// AnnotationLastSequence carries the highest VERDICT_RESULTS stream
	// sequence folded into the report: the stale-write guard compares it.
	AnnotationLastSequence = "verdict.dev/last-sequence"
	// LabelManagedBy marks the reports the reporter owns (replay --prune
	// deletes only those).
	LabelManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is LabelManagedBy's value.
	ManagedByValue = "verdict"
	// Source is every result's source.
	Source = "verdict"
)

// Result properties (results[].properties).
const (
	PropertyProcess   = "process"
	PropertyRuleType  = "ruleType"
	PropertyException = "exception"
	// PropertySeverity keeps a severity the report schema does not allow
	// (it accepts critical, high, medium, low and info).
	PropertySeverity = "severity"
	// PropertyStatus keeps a rule status the report schema does not allow;
	// the result is then an error.
	PropertyStatus = "status"
	// PropertyPolicyKind names the policy's kind when it is not a
	// ClusterPolicy or a Policy (ValidatingPolicy,
	// ValidatingAdmissionPolicy, ...): two policies of one name are told
	// apart.
	PropertyPolicyKind = "policyKind"
)

// Values of PropertyProcess, as Kyverno names them.
const (
	ProcessAdmission  = "admission review"
	ProcessBackground = "background scan"
)

// ErrForeignResult is returned by Fold for a result of another resource.
var ErrForeignResult = errors.New("result of another resource")

// Result is one message of VERDICT_RESULTS: an evaluation of one policy on
// the resource, its stream sequence, and when the stream stored it.
type Result struct {
	Sequence uint64
	Event    bus.ResultEvent
	// Stored is the stream's time of the message (zero when not known):
	// the checker's grace for objects not yet stored counts from it.
	Stored time.Time
	// Copy: the message is the projector's copy of a verified result
	// (bus.VerifiedCopySubject), which no admission can push out of the
	// stream. It folds like the original.
	Copy bool
}

// CompareResults orders two results of the same policy on the same
// resource, older first: by events.CompareResults (policy version, a
// policyDeleted retraction, resource version, evaluation time), then by
// stream sequence. Every reader keeps the newest by this order (Fold, the
// scanner's view of current results, Rebuild), whatever order the stream
// holds them in.
//
// A verified copy of an evaluation (Result.Copy) is older than the
// evaluation itself: the original is folded while it is stored (so a
// report's LastSequence is the same with or without copies), a copy once
// later admissions or forged results pushed the original out of its
// subject's history. Of two copies of one evaluation the first (the lower
// sequence) is the newer: every copy the projector writes after a fold
// holds every policy's result again, and preferring the first keeps the
// sequence a fold takes from them where it was, so that a fold read
// after the copy was written (a replay) is the report written before it.
func CompareResults(a, b Result) int {
	if c := bus.CompareResults(a.Event, b.Event); c != 0 {
		return c
	}
	switch {
	case a.Copy && b.Copy:
		return cmp.Compare(b.Sequence, a.Sequence)
	case a.Copy:
		return -1
	case b.Copy:
		return 1
	}
	return cmp.Compare(a.Sequence, b.Sequence)
}

// Report is the fold of one resource's results.
type Report struct {
	// Resource is the resource the report is about (no resourceVersion).
	// With no results at all only its UID is known, unless the caller
	// fills it in.
	Resource bus.ResourceRef
	// LastSequence is the highest stream sequence folded in (0 without
	// results).
	LastSequence uint64
	// Object is the PolicyReport or ClusterPolicyReport, or nil when the
	// resource has no rule results: then its report must not exist.
	Object *unstructured.Unstructured
	// Partial says that results were left out because the objects they
	// name are not found yet (within the checker's grace): the fold may
	// replace only a report of a lower sequence, and never deletes one
	// (see Writer).
	Partial bool
}

// Cluster reports whether the report is a ClusterPolicyReport (the
// resource is cluster-scoped).
func (r Report) Cluster() bool { return r.Resource.Namespace == "" }

// Name is the report's name: the resource's UID.
func (r Report) Name() string { return r.Resource.UID }

// GVR is the report's resource.
func (r Report) GVR() schema.GroupVersionResource { return reportGVR(r.Resource.Namespace) }

func reportGVR(namespace string) schema.GroupVersionResource {
	if namespace == "" {
		return ClusterPolicyReports
	}
	return PolicyReports
}

// Newest is the newest of rs by CompareResults (the zero Result when rs is
// empty).
func Newest(rs []Result) Result {
	var out Result
	for i, r := range rs {
		if i == 0 || CompareResults(r, out) > 0 {
			out = r
		}
	}
	return out
}

// Fold turns the current results of the resource uid into its report. It
// is pure and deterministic: the same results, in any order, give a
// byte-identical object. When a policy appears more than once (the stream
// keeps a short history per subject) the newest by CompareResults wins,
// and the report's last sequence is the highest sequence of the results
// that won. The caller has checked the results (only verified ones).
//
// The report is named by the UID, lives in the resource's namespace (a
// ClusterPolicyReport for a cluster-scoped resource), has the resource as
// its scope and as a non-controller owner, counts the results in its
// summary, lists one result per rule sorted by policy then rule, and
// carries the highest sequence in AnnotationLastSequence. A failure of a
// policy that is not scored is reported as a warning.
func Fold(uid string, results []Result) (Report, error) {
	rep := Report{Resource: bus.ResourceRef{UID: uid}}
	latest := make(map[string]Result, len(results))
	for _, r := range results {
		if r.Event.Resource.UID != uid {
			return Report{}, fmt.Errorf("%w: %q in the results of %q (policy %q, sequence %d)", ErrForeignResult, r.Event.Resource.UID, uid, r.Event.Policy.Key, r.Sequence)
		}
		if cur, ok := latest[r.Event.Policy.ResultKey()]; !ok || CompareResults(r, cur) > 0 {
			latest[r.Event.Policy.ResultKey()] = r
		}
	}
	if len(latest) == 0 {
		return rep, nil
	}
	// The newest result names the resource (names never change for a UID;
	// taking the newest keeps the choice deterministic).
	var newest Result
	for _, r := range latest {
		if r.Sequence > newest.Sequence || (r.Sequence == newest.Sequence && r.Event.Policy.ResultKey() > newest.Event.Policy.ResultKey()) {
			newest = r
		}
	}
	rep.LastSequence = newest.Sequence
	rep.Resource = newest.Event.Resource
	rep.Resource.ResourceVersion = ""

	var entries []map[string]any
	var sum summary
	for _, r := range latest {
		for _, rule := range r.Event.Rules {
			e, result := resultEntry(r.Event, rule)
			sum.add(result)
			entries = append(entries, e)
		}
	}
	if len(entries) == 0 {
		return rep, nil
	}
	slices.SortFunc(entries, compareEntries)
	list := make([]any, len(entries))
	for i, e := range entries {
		list[i] = e
	}

	res := rep.Resource
	scope := map[string]any{"apiVersion": res.APIVersion, "kind": res.Kind, "name": res.Name, "uid": res.UID}
	meta := map[string]any{
		"name":        uid,
		"labels":      map[string]any{LabelManagedBy: ManagedByValue},
		"annotations": map[string]any{AnnotationLastSequence: strconv.FormatUint(rep.LastSequence, 10)},
	}
	// The resource owns its report (the garbage collector deletes the
	// report with it), when the results name it well enough to refer to.
	if res.APIVersion != "" && res.Kind != "" && res.Name != "" {
		meta["ownerReferences"] = []any{map[string]any{
			"apiVersion":         res.APIVersion,
			"kind":               res.Kind,
			"name":               res.Name,
			"uid":                res.UID,
			"controller":         false,
			"blockOwnerDeletion": false,
		}}
	}
	kind := KindClusterPolicyReport
	if res.Namespace != "" {
		kind = KindPolicyReport
		meta["namespace"] = res.Namespace
		scope["namespace"] = res.Namespace
	}
	rep.Object = &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ReportAPIVersion,
		"kind":       kind,
		"metadata":   meta,
		"scope":      scope,
		"summary":    sum.object(),
		"results":    list,
	}}
	return rep, nil
}

// summary counts results by outcome.
type summary struct{ pass, fail, warn, error, skip int64 }

func (s *summary) add(result string) {
	switch result {
	case string(engine.StatusPass):
		s.pass++
	case string(engine.StatusFail):
		s.fail++
	case string(engine.StatusWarn):
		s.warn++
	case string(engine.StatusError):
		s.error++
	case string(engine.StatusSkip):
		s.skip++
	}
}

func (s summary) object() map[string]any {
	return map[string]any{"pass": s.pass, "fail": s.fail, "warn": s.warn, "error": s.error, "skip": s.skip}
}

// resultEntry is the report result of one rule, and its outcome.
func resultEntry(ev bus.ResultEvent, rule bus.RuleResult) (map[string]any, string) {
	// A CEL policy's audit annotations first: Verdict's own properties
	// below win over one of the same key.
	props := make(map[string]any, 4+len(rule.Properties))
	for k, v := range rule.Properties {
		props[k] = v
	}
	result := string(rule.Status)
	switch rule.Status {
	case engine.StatusPass, engine.StatusWarn, engine.StatusError, engine.StatusSkip:
	case engine.StatusFail:
		if !ev.Scored {
			result = string(engine.StatusWarn)
		}
	default:
		// Not a report outcome: an error, keeping what was said.
		result = string(engine.StatusError)
		props[PropertyStatus] = string(rule.Status)
	}
	if ev.Admission {
		props[PropertyProcess] = ProcessAdmission
	} else {
		props[PropertyProcess] = ProcessBackground
	}
	if rule.Type != "" {
		props[PropertyRuleType] = string(rule.Type)
	}
	if rule.Exception != "" {
		props[PropertyException] = rule.Exception
	}
	if ev.Policy.Kind != "" {
		props[PropertyPolicyKind] = ev.Policy.Kind
	}
	e := map[string]any{
		"policy":     ev.Policy.Key,
		"rule":       rule.Name,
		"result":     result,
		"scored":     ev.Scored,
		"source":     Source,
		"properties": props,
	}
	if rule.Message != "" {
		e["message"] = rule.Message
	}
	if ev.Category != "" {
		e["category"] = ev.Category
	}
	if ev.Severity != "" {
		switch sev := strings.ToLower(strings.TrimSpace(ev.Severity)); sev {
		case "critical", "high", "medium", "low", "info":
			e["severity"] = sev
		default:
			props[PropertySeverity] = ev.Severity
		}
	}
	if !ev.Timestamp.IsZero() {
		e["timestamp"] = map[string]any{"seconds": ev.Timestamp.Unix(), "nanos": int64(ev.Timestamp.Nanosecond())}
	}
	return e, result
}

// compareEntries orders results by policy, then rule, then (for rules of
// the same name, which a well-formed policy does not have) by the rest,
// so that the order never depends on the input's.
func compareEntries(a, b map[string]any) int {
	for _, k := range []string{"policy", "rule", "result", "message"} {
		as, _ := a[k].(string)
		bs, _ := b[k].(string)
		if c := cmp.Compare(as, bs); c != 0 {
			return c
		}
	}
	return cmp.Compare(fmt.Sprint(a), fmt.Sprint(b))
}
