package cleaner

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

func TestDeletingPolicySchedule(t *testing.T) {
	v, err := document.Decode([]byte(`
apiVersion: verdict.dev/v1
kind: NamespacedDeletingPolicy
metadata: {name: old, namespace: team, uid: u-2, generation: 4}
spec:
  schedule: "@every 3s"
  deletionPropagationPolicy: Orphan
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], resources: [configmaps], operations: ["*"]}]
  conditions: [{name: done, expression: "object.data.state == 'done'"}]
`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.CleanupPolicyFromObject(v.(map[string]any))
	if err != nil {
		t.Fatal(err)
	}
	if p.DPol == nil || p.Spec.DeletionPropagationPolicy == nil || *p.Spec.DeletionPropagationPolicy != "Orphan" {
		t.Fatalf("policy %+v: no deletion propagation policy", p)
	}
	s, err := PolicySchedule(p)
	if err != nil {
		t.Fatal(err)
	}
	if s.Kind != bus.WorkCleanup || s.Key != "NamespacedDeletingPolicy/team/old" || s.Spec != "@every 3s" {
		t.Fatalf("schedule %+v", s)
	}
	want := PolicyRef{Kind: policy.KindNamespacedDeletingPolicy, Namespace: "team", Name: "old", UID: "u-2", Generation: 4, Schedule: "@every 3s"}
	if ref := policyOfSchedule(s); ref == nil || *ref != want || ref.GVR(policycache.VerdictAPI) != NamespacedDeletingPolicies || ref.String() != "team/old" {
		t.Fatalf("policy of the schedule %+v", ref)
	}
	cluster := PolicyRef{Kind: policy.KindDeletingPolicy, Name: "old"}
	if cluster.ScheduleKey() != "DeletingPolicy/old" || cluster.GVR(policycache.VerdictAPI) != DeletingPolicies {
		t.Fatalf("DeletingPolicy ref: key %q, resource %v", cluster.ScheduleKey(), cluster.GVR(policycache.VerdictAPI))
	}
}

func TestDecodeDeletingPolicyTick(t *testing.T) {
	for body, want := range map[string]string{
		`{"action":"policy","policy":{"kind":"DeletingPolicy","name":"p","uid":"u"}}`:                              "",
		`{"action":"policy","policy":{"kind":"NamespacedDeletingPolicy","namespace":"team","name":"p","uid":"u"}}`: "",
		`{"action":"policy","policy":{"kind":"NamespacedDeletingPolicy","name":"p"}}`:                              "has no namespace",
		`{"action":"policy","policy":{"kind":"ValidatingPolicy","name":"p"}}`:                                      `"ValidatingPolicy" is not a kind of policy the cleaner runs`,
	} {
		_, err := DecodeTick([]byte(body))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: error %v, want %q", body, err, want)
		}
	}
}

// A DeletingPolicy's resource rules select by the resource discovery
// serves, not by a plural guessed from the kind (a CRD's Person may be
// served as people).
func TestSelectsByResource(t *testing.T) {
	kind := func(group, version, resource, k string) kubeutil.Kind {
		return kubeutil.Kind{GVR: schema.GroupVersionResource{Group: group, Version: version, Resource: resource}, GVK: schema.GroupVersionKind{Group: group, Version: version, Kind: k}, Namespaced: true, Deletable: true}
	}
	people, configMaps, deployments := kind("example.com", "v1", "people", "Person"), kind("", "v1", "configmaps", "ConfigMap"), kind("apps", "v1", "deployments", "Deployment")
	for _, tc := range []struct {
		sel  engine.KindSelector
		t    kubeutil.Kind
		want bool
	}{
		{engine.KindSelector{Group: "example.com", Version: "v1", Kind: "*", Resource: "people"}, people, true},
		{engine.KindSelector{Group: "example.com", Version: "v1", Kind: "*", Resource: "persons"}, people, false},
		{engine.KindSelector{Group: "", Version: "v1", Kind: "*", Resource: "people"}, configMaps, false},
		{engine.KindSelector{Group: "*", Version: "*", Kind: "*", Resource: "*"}, deployments, true},
		{engine.KindSelector{Group: "apps", Version: "v1", Kind: "*", Resource: "*"}, configMaps, false},
		{engine.KindSelector{Group: "", Version: "v2", Kind: "*", Resource: "configmaps"}, configMaps, false},
		{engine.ParseKindSelector("ConfigMap"), configMaps, true},
		{engine.ParseKindSelector("apps/v1/Deployment"), deployments, true},
		{engine.ParseKindSelector("apps/v1/Deployment"), configMaps, false},
	} {
		if got := selects(tc.sel, tc.t); got != tc.want {
			t.Errorf("%s selects %s: %v, want %v", selectorString(tc.sel), tc.t.GVR, got, tc.want)
		}
	}
	for sel, want := range map[engine.KindSelector]string{
		{Group: "", Version: "v1", Kind: "*", Resource: "configmaps"}:     "/v1/configmaps",
		{Group: "apps", Version: "*", Kind: "*", Resource: "deployments"}: "apps/*/deployments",
		engine.ParseKindSelector("ConfigMap"):                             "ConfigMap",
		engine.ParseKindSelector("apps/v1/Deployment"):                    "apps/v1/Deployment",
	} {
		if got := selectorString(sel); got != want {
			t.Errorf("selectorString(%+v) = %q, want %q", sel, got, want)
		}
	}
}
