package model

import (
	"bytes"
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/internal/bus"
)

// SameReport reports whether the report cur already says what want says:
// the same scope, summary, results, owner, sequence and label. The writer
// skips an update when it holds; tests compare reports with it.
func SameReport(cur, want *unstructured.Unstructured) bool {
	a, errA := json.Marshal(ReportContent(cur))
	b, errB := json.Marshal(ReportContent(want))
	return errA == nil && errB == nil && bytes.Equal(a, b)
}

// ReportContent is what a report says: the fields the reporter owns and
// ShadowReportPrefix starts the names of a shadow's reports (beside
// Kyverno, whose reports are named after the resource's UID as
// Verdict's are).
const ShadowReportPrefix = "verdict-"

// Ours reports whether a stored report is Verdict's (LabelManagedBy).
func Ours(o *unstructured.Unstructured) bool {
	return o.GetLabels()[LabelManagedBy] == ManagedByValue
}

// SameReport compares (the managed-by label, the last sequence, the
// owners, the scope, the summary and the results).
func ReportContent(o *unstructured.Unstructured) map[string]any {
	owners, _, _ := unstructured.NestedFieldNoCopy(o.Object, "metadata", "ownerReferences")
	return map[string]any{
		"label":   o.GetLabels()[LabelManagedBy],
		"seq":     o.GetAnnotations()[AnnotationLastSequence],
		"owners":  owners,
		"scope":   o.Object["scope"],
		"summary": o.Object["summary"],
		"results": o.Object["results"],
	}
}

// WithHint returns the report with its resource named after hint (the
// same uid, without a resourceVersion) when the fold had no result to name
// it, so that a write finds the report where hint says.
func (r Report) WithHint(hint bus.ResourceRef) Report {
	if r.Resource.Name == "" && hint.UID == r.Resource.UID {
		r.Resource = hint
		r.Resource.ResourceVersion = ""
	}
	return r
}
