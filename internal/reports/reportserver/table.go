package reportserver

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/duration"
)

// columns are the CRD mode's printer columns (deploy/crds), so that
// `kubectl get polr -o wide` shows the same in either mode.
var columns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "the report's name: its resource's uid"},
	{Name: "Kind", Type: "string", Priority: 1, Description: ".scope.kind"},
	{Name: "Name", Type: "string", Priority: 1, Description: ".scope.name"},
	{Name: "Pass", Type: "integer", Description: ".summary.pass"},
	{Name: "Fail", Type: "integer", Description: ".summary.fail"},
	{Name: "Warn", Type: "integer", Description: ".summary.warn"},
	{Name: "Error", Type: "integer", Description: ".summary.error"},
	{Name: "Skip", Type: "integer", Description: ".summary.skip"},
	{Name: "Age", Type: "date", Description: ".metadata.creationTimestamp"},
}

// ConvertToTable is the table of a report or a list of them.
func (r *reports) ConvertToTable(_ context.Context, obj runtime.Object, _ runtime.Object) (*metav1.Table, error) {
	t := &metav1.Table{ColumnDefinitions: columns}
	add := func(o *PolicyReport, raw runtime.Object) {
		var kind, name string
		if o.Scope != nil {
			kind, name = o.Scope.Kind, o.Scope.Name
		}
		age := "<unknown>"
		if !o.CreationTimestamp.IsZero() {
			age = duration.HumanDuration(time.Since(o.CreationTimestamp.Time))
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells:  []any{o.Name, kind, name, o.Summary.Pass, o.Summary.Fail, o.Summary.Warn, o.Summary.Error, o.Summary.Skip, age},
			Object: runtime.RawExtension{Object: raw},
		})
	}
	switch v := obj.(type) {
	case *PolicyReport:
		add(v, v)
	case *ClusterPolicyReport:
		add((*PolicyReport)(v), v)
	case *PolicyReportList:
		for i := range v.Items {
			add(&v.Items[i], &v.Items[i])
		}
	case *ClusterPolicyReportList:
		for i := range v.Items {
			add((*PolicyReport)(&v.Items[i]), &v.Items[i])
		}
	case *Report:
		add((*PolicyReport)(v), v)
	case *ClusterReport:
		add((*PolicyReport)(v), v)
	case *ReportList:
		for i := range v.Items {
			add((*PolicyReport)(&v.Items[i]), &v.Items[i])
		}
	case *ClusterReportList:
		for i := range v.Items {
			add((*PolicyReport)(&v.Items[i]), &v.Items[i])
		}
	default:
		return nil, fmt.Errorf("no table for %T", obj)
	}
	if l, err := meta.ListAccessor(obj); err == nil {
		t.ResourceVersion, t.Continue = l.GetResourceVersion(), l.GetContinue()
	} else if o, err := meta.Accessor(obj); err == nil {
		t.ResourceVersion = o.GetResourceVersion()
	}
	return t, nil
}
