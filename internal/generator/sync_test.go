package generator

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

func withManagers(entries ...metav1.ManagedFieldsEntry) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetManagedFields(entries)
	return u
}

func entry(manager string, op metav1.ManagedFieldsOperationType, at time.Time, fields string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, Time: &metav1.Time{Time: at}, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(fields)}
}

func TestChangedByOthers(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)
	ours := entry(FieldManager, metav1.ManagedFieldsOperationApply, t0, `{"f:data":{}}`)
	oursLater := entry(FieldManager, metav1.ManagedFieldsOperationApply, t0.Add(time.Minute), `{"f:data":{"f:a":{}}}`)
	edit := entry("kubectl-edit", metav1.ManagedFieldsOperationUpdate, t0.Add(time.Minute), `{"f:data":{"f:tier":{}}}`)
	editAgain := entry("kubectl-edit", metav1.ManagedFieldsOperationUpdate, t0.Add(2*time.Minute), `{"f:data":{"f:tier":{}}}`)
	tests := map[string]struct {
		old, cur *unstructured.Unstructured
		want     bool
	}{
		"the generator's own apply":        {withManagers(ours), withManagers(oursLater), false},
		"another manager appears":          {withManagers(ours), withManagers(ours, edit), true},
		"another manager writes again":     {withManagers(ours, edit), withManagers(ours, editAgain), true},
		"ours changes, the other does not": {withManagers(ours, edit), withManagers(oursLater, edit), false},
		"another manager's entry removed":  {withManagers(ours, edit), withManagers(oursLater), false},
		"no managed fields":                {withManagers(), withManagers(), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := changedByOthers(tc.old, tc.cur); got != tc.want {
				t.Fatalf("changedByOthers = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestTriggerOfLabels(t *testing.T) {
	l := Labels("", "p", "r", Trigger{GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: "team", Name: "web", UID: "u-1"})
	got, ok := triggerOf(l)
	if !ok || got.APIVersion != "apps/v1" || got.Kind != "Deployment" || got.Namespace != "team" || got.Name != "web" || got.UID != "u-1" {
		t.Fatalf("triggerOf = %+v, %v", got, ok)
	}
	core, ok := triggerOf(Labels("", "p", "r", Trigger{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: "team", UID: "u-2"}))
	if !ok || core.APIVersion != "v1" || core.Namespace != "" {
		t.Fatalf("core trigger = %+v, %v", core, ok)
	}
	delete(l, LabelTriggerUID)
	if _, ok := triggerOf(l); ok {
		t.Fatal("labels without a trigger uid name a trigger")
	}
}

func TestDownstreamSelector(t *testing.T) {
	sel, err := labels.Parse(downstreamSelector(policy.KindPolicy, "team", "p", "r", "u-1"))
	if err != nil {
		t.Fatal(err)
	}
	mine := labels.Set(Labels("team", "p", "r", Trigger{GVK: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: "n", UID: "u-1"}))
	if !sel.Matches(mine) {
		t.Fatalf("%s does not select %v", sel, mine)
	}
	for name, other := range map[string]labels.Set{
		"another trigger":        labels.Set(Labels("team", "p", "r", Trigger{Name: "n", UID: "u-2"})),
		"another rule":           labels.Set(Labels("team", "p", "other", Trigger{Name: "n", UID: "u-1"})),
		"a cluster policy":       labels.Set(Labels("", "p", "r", Trigger{Name: "n", UID: "u-1"})),
		"not managed by verdict": {LabelPolicyName: "p", LabelPolicyNamespace: "team", LabelRuleName: "r", LabelTriggerUID: "u-1"},
	} {
		if sel.Matches(other) {
			t.Errorf("%s: %s selects %v", name, sel, other)
		}
	}
	all, _ := labels.Parse(downstreamSelector(policy.KindClusterPolicy, "", "p", "r", ""))
	if !all.Matches(labels.Set(Labels("", "p", "r", Trigger{Name: "a", UID: "1"}))) || !all.Matches(labels.Set(Labels("", "p", "r", Trigger{Name: "b", UID: "2"}))) {
		t.Fatal("the rule's selector misses one of its triggers")
	}

	// A GeneratingPolicy and a ClusterPolicy of one name (and rule name)
	// never select each other's downstream.
	gpolLabels := labels.Set(Labels("", "p", "p", Trigger{Name: "a", UID: "1"}))
	gpolLabels[LabelPolicyKind] = policy.KindGeneratingPolicy
	cpolLabels := labels.Set(Labels("", "p", "p", Trigger{Name: "a", UID: "1"}))
	gsel, _ := labels.Parse(downstreamSelector(policy.KindGeneratingPolicy, "", "p", "p", ""))
	csel, _ := labels.Parse(downstreamSelector(policy.KindClusterPolicy, "", "p", "p", ""))
	if !gsel.Matches(gpolLabels) || gsel.Matches(cpolLabels) || !csel.Matches(cpolLabels) || csel.Matches(gpolLabels) {
		t.Fatalf("kinds not kept apart: %s / %s", gsel, csel)
	}
}
