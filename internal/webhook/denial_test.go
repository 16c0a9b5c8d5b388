package webhook

import (
	"errors"
	"net/http"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/verdict-dev/verdict/internal/testkit/golden"
)

// Two Enforce policies of several rules, for a request that breaks rules
// of both: the denial lists every failed rule of each (not the passing
// ones), and folds the long message at 80 columns.
const enforceLabels = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-labels}
spec:
  validationFailureAction: Enforce
  rules:
  - name: check-team
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: label team is required
      pattern: {metadata: {labels: {team: "?*"}}}
  - name: check-owner
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: >-
        label owner is required: every Pod names the team member to page
        when it misbehaves, as an email address.
      pattern: {metadata: {labels: {owner: "?*"}}}
  - name: check-name
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: the name is required
      pattern: {metadata: {name: "?*"}}
`

const enforceHost = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: disallow-host-namespaces}
spec:
  validationFailureAction: Enforce
  rules:
  - name: host-network
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: hostNetwork is disallowed.
      pattern: {spec: {=(hostNetwork): "false"}}
  - name: host-pid
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: hostPID is disallowed.
      pattern: {spec: {=(hostPID): "false"}}
  - name: host-ipc
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: hostIPC is disallowed.
      pattern: {spec: {=(hostIPC): "false"}}
`

// brokenMutation is a policy with a mutate rule that cannot apply, under
// the failure policy fp.
func brokenMutation(fp string) string {
	return `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: broken}
spec:
  failurePolicy: ` + fp + `
  rules:
  - name: remove-missing
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
      patchesJson6902: |-
        - op: replace
          path: /spec/notThere/x
          value: 1
  - name: add-label
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
      patchStrategicMerge: {metadata: {labels: {broken: "yes"}}}
`
}

// hostPod shares the host's network and PID namespaces and uses a mutable
// image tag.
func hostPod(p map[string]any) {
	spec := p["spec"].(map[string]any)
	spec["hostNetwork"] = true
	spec["hostPID"] = true
	spec["containers"].([]any)[0].(map[string]any)["image"] = "nginx:latest"
}

// TestDenialMessages pins, with golden files under testdata/denial, the
// message of every denial the webhook answers: what kubectl shows after
// "admission webhook ... denied the request:".
func TestDenialMessages(t *testing.T) {
	errQueueDown := errors.New("jetstream: no responders")
	tests := map[string]struct {
		policies []string
		path     string
		object   map[string]any
		cfg      func(*Config)
		work     *MemoryWorkSink
	}{
		"blocked-one-policy": {
			policies: []string{enforcePrivileged, auditLatest},
			path:     PathValidate,
			object:   pod("bad", privileged),
		},
		"blocked-two-policies": {
			// The Audit policy's failure is a warning, not in the denial.
			policies: []string{enforceLabels, enforceHost, auditLatest, enforcePrivileged},
			path:     PathValidate,
			object:   pod("host", hostPod),
		},
		"mutation-failure": {
			policies: []string{brokenMutation("Fail"), mutateLabels},
			path:     PathMutate,
			object:   pod("web"),
		},
		"generate-work-error": {
			policies: []string{generateNetpol},
			path:     PathValidate,
			object:   namespaceObj("team-b"),
			cfg:      func(c *Config) { c.OnWorkPublishFailure = WorkFailureDeny },
			work:     &MemoryWorkSink{Fail: errQueueDown},
		},
		"generate-work-timeout": {
			policies: []string{generateNetpol},
			path:     PathValidate,
			object:   namespaceObj("team-b"),
			cfg: func(c *Config) {
				c.OnWorkPublishFailure = WorkFailureDeny
				c.WorkPublishTimeout = 50 * time.Millisecond
			},
			work: &MemoryWorkSink{Delay: time.Minute},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var mods []func(*Config)
			if tc.cfg != nil {
				mods = append(mods, tc.cfg)
			}
			var opts []Option
			if tc.work != nil {
				opts = append(opts, WithWorkSink(tc.work))
			}
			h := newHarness(t, staticSource(t, tc.policies...), testConfig(mods...), opts...)
			resp := h.admit(tc.path, reviewOf(t, admissionv1.Create, tc.object))
			if resp.Allowed || resp.Result == nil {
				t.Fatalf("request admitted: %+v", resp)
			}
			if resp.Result.Code != http.StatusForbidden || len(resp.Warnings) != 0 {
				t.Errorf("code %d, warnings %q; want %d and none", resp.Result.Code, resp.Warnings, http.StatusForbidden)
			}
			golden.Assert(t, "testdata/denial/"+name+".txt", []byte(resp.Result.Message))
		})
	}
}
