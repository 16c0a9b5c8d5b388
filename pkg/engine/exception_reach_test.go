package engine_test

import (
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// TestExceptionReach: an exception loaded from the cluster
// (ExceptionFromObject, not cluster-wide) exempts resources in its own
// namespace only; one its loader made cluster-wide exempts them in any
// namespace, as files' exceptions do. The same holds for the CEL
// PolicyException of policies.kyverno.io.
func TestExceptionReach(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, policyYAML("  - name: r\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    validate: {deny: {}}\n"))
	mp := compile(t, eng, mpolYAML)
	exception := func(ns string, clusterWide bool) *policy.Exception {
		e, err := policy.ExceptionFromObject(obj(t, `{apiVersion: kyverno.io/v2, kind: PolicyException, metadata: {name: e, namespace: `+ns+`},
  spec: {exceptions: [{policyName: p, ruleNames: [r]}], match: {any: [{resources: {kinds: [Pod]}}]}}}`))
		if err != nil {
			t.Fatal(err)
		}
		e.ClusterWide = clusterWide
		return e
	}
	celException := func(ns string, clusterWide bool) *policy.CELException {
		e, err := policy.CELExceptionFromObject(obj(t, `{apiVersion: policies.kyverno.io/v1beta1, kind: PolicyException, metadata: {name: e, namespace: `+ns+`},
  spec: {policyRefs: [{name: mp, kind: MutatingPolicy}], matchConditions: [{name: all, expression: "true"}]}}`))
		if err != nil {
			t.Fatal(err)
		}
		e.ClusterWide = clusterWide
		return e
	}
	pod := func(ns string) map[string]any {
		return obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: web, namespace: `+ns+`}, spec: {containers: [{name: c, image: nginx}]}}`)
	}
	for name, tc := range map[string]struct {
		exceptionNS string
		clusterWide bool
		podNS       string
		// podNS empty: the object has no namespace, the request has
		// requestNS.
		requestNS string
		exempt    bool
	}{
		"its own namespace":                      {exceptionNS: "team-a", podNS: "team-a", exempt: true},
		"another namespace":                      {exceptionNS: "team-b", podNS: "team-a"},
		"the request's namespace":                {exceptionNS: "team-a", requestNS: "team-a", exempt: true},
		"another request's namespace":            {exceptionNS: "team-b", requestNS: "team-a"},
		"cluster-wide, another namespace":        {exceptionNS: "policy-admin", clusterWide: true, podNS: "team-a", exempt: true},
		"cluster-wide, another request's":        {exceptionNS: "policy-admin", clusterWide: true, requestNS: "team-a", exempt: true},
		"cluster-wide, its own namespace, still": {exceptionNS: "policy-admin", clusterWide: true, podNS: "policy-admin", exempt: true},
	} {
		t.Run(name, func(t *testing.T) {
			req := &engine.Request{Operation: engine.OpCreate, Object: pod(tc.podNS), Namespace: tc.requestNS}
			if tc.podNS == "" {
				delete(req.Object["metadata"].(map[string]any), "namespace")
			}
			rr := statuses(t, eng, p, req, exception(tc.exceptionNS, tc.clusterWide))["r"]
			if exempt := rr.Status == engine.StatusSkip; exempt != tc.exempt {
				t.Errorf("classic: %s %q, want exempt %v", rr.Status, rr.Message, tc.exempt)
			}
			pe, err := eng.WithCELExceptions(mp, []*policy.CELException{celException(tc.exceptionNS, tc.clusterWide)})
			if err != nil {
				t.Fatal(err)
			}
			crr, _, _ := mpolApply(t, eng, pe, req)
			if exempt := crr.Status == engine.StatusSkip; exempt != tc.exempt {
				t.Errorf("CEL: %s %q, want exempt %v", crr.Status, crr.Message, tc.exempt)
			}
		})
	}
}
