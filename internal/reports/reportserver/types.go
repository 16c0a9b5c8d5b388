// Package reportserver serves the PolicyReport API from the report index
// (internal/reports/reportindex) as an aggregated API server: the reporter's
// serving mode (docs/reporter.md, "Serving reports from the stream"),
// in which etcd holds no reports.
//
// The types are the wgpolicyk8s.io/v1alpha2 schema the CRD mode's
// PolicyReports follow, field for field as reporter.Fold writes them, so
// that a report read from either mode is the same document. The same
// reports are served as openreports.io/v1alpha1 Reports and
// ClusterReports, whose schema is v1alpha2's with a report-level source.
package reportserver

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The groups and versions served.
var (
	GroupVersion = schema.GroupVersion{Group: "wgpolicyk8s.io", Version: "v1alpha2"}
	OpenReports  = schema.GroupVersion{Group: "openreports.io", Version: "v1alpha1"}
)

// PolicyReport is one namespaced resource's report.
type PolicyReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	// Source is openreports.io's report-level source (empty, and left
	// out, in wgpolicyk8s.io).
	Source  string                  `json:"source,omitempty"`
	Scope   *corev1.ObjectReference `json:"scope,omitempty"`
	Summary Summary                 `json:"summary"`
	Results []Result                `json:"results,omitempty"`
}

// ClusterPolicyReport is one cluster-scoped resource's report.
type ClusterPolicyReport PolicyReport

// Report is a PolicyReport as openreports.io/v1alpha1 serves it.
type Report PolicyReport

// ClusterReport is a ClusterPolicyReport as openreports.io/v1alpha1
// serves it.
type ClusterReport PolicyReport

// Summary counts a report's results by outcome.
type Summary struct {
	Pass  int64 `json:"pass"`
	Fail  int64 `json:"fail"`
	Warn  int64 `json:"warn"`
	Error int64 `json:"error"`
	Skip  int64 `json:"skip"`
}

// Result is one rule's result.
type Result struct {
	Source     string            `json:"source,omitempty"`
	Policy     string            `json:"policy"`
	Rule       string            `json:"rule,omitempty"`
	Category   string            `json:"category,omitempty"`
	Severity   string            `json:"severity,omitempty"`
	Timestamp  *metav1.Timestamp `json:"timestamp,omitempty"`
	Result     string            `json:"result,omitempty"`
	Scored     bool              `json:"scored"`
	Message    string            `json:"message,omitempty"`
	Properties map[string]string `json:"properties,omitempty"`
}

// PolicyReportList is a list of PolicyReports.
type PolicyReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PolicyReport `json:"items"`
}

// ClusterPolicyReportList is a list of ClusterPolicyReports.
type ClusterPolicyReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterPolicyReport `json:"items"`
}

// ReportList is a list of Reports.
type ReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Report `json:"items"`
}

// ClusterReportList is a list of ClusterReports.
type ClusterReportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ClusterReport `json:"items"`
}

// DeepCopyInto copies r into out.
func (r *PolicyReport) DeepCopyInto(out *PolicyReport) {
	*out = *r
	out.TypeMeta = r.TypeMeta
	r.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if r.Scope != nil {
		s := *r.Scope
		out.Scope = &s
	}
	if r.Results != nil {
		out.Results = make([]Result, len(r.Results))
		for i := range r.Results {
			r.Results[i].deepCopyInto(&out.Results[i])
		}
	}
}

func (r *Result) deepCopyInto(out *Result) {
	*out = *r
	if r.Timestamp != nil {
		t := *r.Timestamp
		out.Timestamp = &t
	}
	if r.Properties != nil {
		out.Properties = make(map[string]string, len(r.Properties))
		for k, v := range r.Properties {
			out.Properties[k] = v
		}
	}
}

// copyReport deep-copies any of the four kinds, given as a PolicyReport.
func copyReport(r, out *PolicyReport) *PolicyReport {
	r.DeepCopyInto(out)
	return out
}

// DeepCopyObject is a deep copy.
func (r *PolicyReport) DeepCopyObject() runtime.Object { return copyReport(r, new(PolicyReport)) }

// DeepCopyObject is a deep copy.
func (r *ClusterPolicyReport) DeepCopyObject() runtime.Object {
	return (*ClusterPolicyReport)(copyReport((*PolicyReport)(r), new(PolicyReport)))
}

// DeepCopyObject is a deep copy.
func (r *Report) DeepCopyObject() runtime.Object {
	return (*Report)(copyReport((*PolicyReport)(r), new(PolicyReport)))
}

// DeepCopyObject is a deep copy.
func (r *ClusterReport) DeepCopyObject() runtime.Object {
	return (*ClusterReport)(copyReport((*PolicyReport)(r), new(PolicyReport)))
}

// copyList deep-copies a list's metadata and makes room for its items.
func copyList[T any](l *metav1.ListMeta, items []T) (metav1.ListMeta, []T) {
	var out metav1.ListMeta
	l.DeepCopyInto(&out)
	if items == nil {
		return out, nil
	}
	return out, make([]T, len(items))
}

// DeepCopyObject is a deep copy.
func (l *PolicyReportList) DeepCopyObject() runtime.Object {
	out := &PolicyReportList{TypeMeta: l.TypeMeta}
	out.ListMeta, out.Items = copyList(&l.ListMeta, l.Items)
	for i := range l.Items {
		l.Items[i].DeepCopyInto(&out.Items[i])
	}
	return out
}

// DeepCopyObject is a deep copy.
func (l *ClusterPolicyReportList) DeepCopyObject() runtime.Object {
	out := &ClusterPolicyReportList{TypeMeta: l.TypeMeta}
	out.ListMeta, out.Items = copyList(&l.ListMeta, l.Items)
	for i := range l.Items {
		(*PolicyReport)(&l.Items[i]).DeepCopyInto((*PolicyReport)(&out.Items[i]))
	}
	return out
}

// DeepCopyObject is a deep copy.
func (l *ReportList) DeepCopyObject() runtime.Object {
	out := &ReportList{TypeMeta: l.TypeMeta}
	out.ListMeta, out.Items = copyList(&l.ListMeta, l.Items)
	for i := range l.Items {
		(*PolicyReport)(&l.Items[i]).DeepCopyInto((*PolicyReport)(&out.Items[i]))
	}
	return out
}

// DeepCopyObject is a deep copy.
func (l *ClusterReportList) DeepCopyObject() runtime.Object {
	out := &ClusterReportList{TypeMeta: l.TypeMeta}
	out.ListMeta, out.Items = copyList(&l.ListMeta, l.Items)
	for i := range l.Items {
		(*PolicyReport)(&l.Items[i]).DeepCopyInto((*PolicyReport)(&out.Items[i]))
	}
	return out
}

// addToScheme registers the types, in the served versions and as the
// internal ones (the same types: there is nothing to convert).
func addToScheme(s *runtime.Scheme) {
	for _, gv := range []schema.GroupVersion{GroupVersion, {Group: GroupVersion.Group, Version: runtime.APIVersionInternal}} {
		s.AddKnownTypes(gv, &PolicyReport{}, &PolicyReportList{}, &ClusterPolicyReport{}, &ClusterPolicyReportList{})
	}
	for _, gv := range []schema.GroupVersion{OpenReports, {Group: OpenReports.Group, Version: runtime.APIVersionInternal}} {
		s.AddKnownTypes(gv, &Report{}, &ReportList{}, &ClusterReport{}, &ClusterReportList{})
	}
	for _, gv := range []schema.GroupVersion{Decisions, {Group: Decisions.Group, Version: runtime.APIVersionInternal}} {
		s.AddKnownTypes(gv, &AdmissionDenial{}, &AdmissionDenialList{})
	}
	metav1.AddToGroupVersion(s, GroupVersion)
	metav1.AddToGroupVersion(s, OpenReports)
	metav1.AddToGroupVersion(s, Decisions)
}
