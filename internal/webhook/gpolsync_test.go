package webhook

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	evt "github.com/verdict-dev/verdict/internal/bus"
)

// syncTeams is a synchronized GeneratingPolicy on the Namespaces that
// have not opted out (CREATE and UPDATE: not DELETE).
const syncTeams = `apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata: {name: team-settings}
spec:
  evaluation: {synchronize: {enabled: true}}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [namespaces]}]
  matchConditions:
  - name: opted-in
    expression: "object.metadata.?labels['opt-out'].orValue('') != 'true'"
  generate:
  - expression: "generator.Apply(object.metadata.name, [])"
`

// The work a synchronized GeneratingPolicy's triggers queue besides
// their creation: an update that leaves the trigger matching is applied
// again; one that makes it stop matching is queued too (the generator
// finds it no longer triggered and deletes its downstream); a delete,
// which the policy does not select, queues the removal of the deleted
// object's downstream when the object, as stored, triggered it. A
// Namespace that never matched queues nothing.
func TestGeneratingPolicySynchronizeWork(t *testing.T) {
	in := namespaceObj("team-a")
	out := namespaceObj("team-a")
	out["metadata"].(map[string]any)["labels"] = map[string]any{"opt-out": "true"}
	namespaces := func(r *admissionv1.AdmissionRequest) {
		r.Resource = metav1.GroupVersionResource{Version: "v1", Resource: "namespaces"}
	}
	update := func(old, cur map[string]any) *admissionv1.AdmissionReview {
		raw, err := json.Marshal(old)
		if err != nil {
			t.Fatal(err)
		}
		return reviewOf(t, admissionv1.Update, cur, namespaces, func(r *admissionv1.AdmissionRequest) { r.OldObject = runtime.RawExtension{Raw: raw} })
	}
	for name, tc := range map[string]struct {
		review *admissionv1.AdmissionReview
		want   evt.WorkAction // "" for no item
	}{
		"a creation":                          {reviewOf(t, admissionv1.Create, in, namespaces), evt.WorkApply},
		"an update that keeps it matching":    {update(in, in), evt.WorkApply},
		"an update that makes it stop":        {update(in, out), evt.WorkApply},
		"an update of one that never matched": {update(out, out), ""},
		"a delete of a trigger":               {reviewOf(t, admissionv1.Delete, in, namespaces), evt.WorkDeleteDownstream},
		"a delete of one that never matched":  {reviewOf(t, admissionv1.Delete, out, namespaces), ""},
	} {
		t.Run(name, func(t *testing.T) {
			sink := &MemoryWorkSink{}
			h := newHarness(t, staticSource(t, syncTeams), testConfig(), WithWorkSink(sink))
			if resp := h.admit(PathValidate, tc.review); !resp.Allowed {
				t.Fatalf("denied: %+v", resp.Result)
			}
			items := sink.Items()
			if tc.want == "" {
				if len(items) != 0 {
					t.Fatalf("items %+v, want none", items)
				}
				return
			}
			if len(items) != 1 || items[0].Act() != tc.want || items[0].Rule != "team-settings" || items[0].Policy.Kind != "GeneratingPolicy" || items[0].Trigger.UID != "ns-uid-team-a" {
				t.Fatalf("items %+v, want one %s", items, tc.want)
			}
		})
	}
}
