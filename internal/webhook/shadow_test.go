package webhook

import (
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// In shadow mode an Enforce policy's failure allows the request, with no
// warning, no patch and no work queued, and its result is published as
// it would have been; the answer the webhook would have given is
// counted.
func TestShadowNeverChangesAnAnswer(t *testing.T) {
	src := staticSource(t, enforcePrivileged, auditLatest, brokenMutation("Fail"), generateNetpol)
	h := newHarness(t, src, testConfig(func(c *Config) { c.Shadow = true }))

	bad := pod("bad", privileged, hostPod)
	for _, path := range []string{PathValidate, PathValidateCluster} {
		resp := h.admit(path, reviewOf(t, admissionv1.Create, bad))
		if !resp.Allowed || len(resp.Warnings) > 0 || resp.Patch != nil || resp.Result != nil {
			t.Fatalf("%s: shadow answer %+v, want allowed with nothing else", path, resp)
		}
	}
	resp := h.admit(PathMutate, reviewOf(t, admissionv1.Create, bad))
	if !resp.Allowed || resp.Patch != nil || len(resp.Warnings) > 0 {
		t.Fatalf("mutate: shadow answer %+v, want allowed unchanged", resp)
	}
	if resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, namespaceObj("team"))); !resp.Allowed {
		t.Fatalf("namespace: %+v", resp)
	}
	if items := h.work.Items(); len(items) != 0 {
		t.Errorf("a shadow queued work: %+v", items)
	}

	// The denied request's results are published, the failure included.
	failed := map[string]bool{}
	for _, ev := range h.results.Events() {
		for _, r := range ev.Rules {
			if r.Status == engine.StatusFail {
				failed[ev.Policy.Key+"/"+r.Name] = true
			}
		}
	}
	if !failed["disallow-privileged/privileged-containers"] || !failed["disallow-latest/no-latest"] {
		t.Errorf("failures published: %v", failed)
	}
	if got := counter(t, h.reg, "verdict_webhook_shadow_decisions_total", map[string]string{"outcome": "denied"}); got != 2 {
		t.Errorf("shadow denials counted %v, want 2", got)
	}
}
