// Package reportserver serves the PolicyReport API from the report index
// (internal/reportindex) as an aggregated API server: the reporter's
// serving mode (docs/reporter.md, "Serving reports from the stream"),
// in which etcd holds no reports.
//
// The types are the wgpolicyk8s.io/v1alpha2 schema the CRD mode's
// PolicyReports follow, field for field as reporter.Fold writes them, so
// that a report read from either mode is the same document.
package reportserver

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the group and version served.
var GroupVersion = schema.GroupVersion{Group: "wgpolicyk8s.io", Version: "v1alpha2"}

// PolicyReport is one namespaced resource's report.
type PolicyReport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Scope             *corev1.ObjectReference `json:"scope,omitempty"`
	Summary           Summary                 `json:"summary"`
	Results           []Result                `json:"results,omitempty"`
}

// ClusterPolicyReport is one cluster-scoped resource's report.
type ClusterPolicyReport PolicyReport

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

// DeepCopyObject is a deep copy.
func (r *PolicyReport) DeepCopyObject() runtime.Object {
	out := new(PolicyReport)
	r.DeepCopyInto(out)
	return out
}

// DeepCopyObject is a deep copy.
func (r *ClusterPolicyReport) DeepCopyObject() runtime.Object {
	out := new(ClusterPolicyReport)
	(*PolicyReport)(r).DeepCopyInto((*PolicyReport)(out))
	return out
}

// DeepCopyObject is a deep copy.
func (l *PolicyReportList) DeepCopyObject() runtime.Object {
	out := &PolicyReportList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]PolicyReport, len(l.Items))
		for i := range l.Items {
			l.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
	return out
}

// DeepCopyObject is a deep copy.
func (l *ClusterPolicyReportList) DeepCopyObject() runtime.Object {
	out := &ClusterPolicyReportList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]ClusterPolicyReport, len(l.Items))
		for i := range l.Items {
			(*PolicyReport)(&l.Items[i]).DeepCopyInto((*PolicyReport)(&out.Items[i]))
		}
	}
	return out
}

// addToScheme registers the types, in the served version and as the
// internal one (the same types: there is nothing to convert).
func addToScheme(s *runtime.Scheme) {
	for _, gv := range []schema.GroupVersion{GroupVersion, {Group: GroupVersion.Group, Version: runtime.APIVersionInternal}} {
		s.AddKnownTypes(gv, &PolicyReport{}, &PolicyReportList{}, &ClusterPolicyReport{}, &ClusterPolicyReportList{})
	}
	metav1.AddToGroupVersion(s, GroupVersion)
}
