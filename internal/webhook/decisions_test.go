package webhook

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	evt "github.com/verdict-dev/verdict/internal/bus"
)

// TestDecisionsRecorded: with the admission log on, every answered
// request is recorded once, with its endpoint, requester, outcome, the
// policies and rules that denied, warned or mutated and their messages,
// a denial's message and the patch, exactly as answered; the object
// itself is never in it.
func TestDecisionsRecorded(t *testing.T) {
	sink := &memoryDecisionSink{}
	h := newHarness(t, staticSource(t, enforcePrivileged, auditLatest, mutateLabels), testConfig(), WithDecisionSink(sink))
	latest := func(p map[string]any) {
		p["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "registry.example.com/app:latest"
	}
	type want struct {
		outcome  string
		findings []Finding
	}
	for name, tc := range map[string]struct {
		path string
		pod  map[string]any
		want want
	}{
		"denied": {path: PathValidate, pod: pod("bad", privileged), want: want{evt.DecisionDenied, []Finding{
			{Policy: "disallow-privileged", Rule: "privileged-containers", Action: evt.ActionDeny,
				Message: "validation error: Privileged mode is disallowed. rule privileged-containers failed at path /spec/containers/0/securityContext/privileged/"},
		}}},
		"warned": {path: PathValidate, pod: pod("old", latest), want: want{evt.DecisionWarned, []Finding{
			{Policy: "disallow-latest", Rule: "no-latest", Action: evt.ActionWarn,
				Message: "validation error: Using a mutable image tag is not allowed. rule no-latest failed at path /spec/containers/0/image/"},
		}}},
		"allowed": {path: PathValidate, pod: pod("good"), want: want{outcome: evt.DecisionAllowed}},
		"patched": {path: PathMutate, pod: pod("plain"), want: want{evt.DecisionPatched, []Finding{
			{Policy: "add-labels", Rule: "team-label", Action: evt.ActionMutate, Message: "mutated resource"},
			{Policy: "pull-policy", Rule: "always-pull", Action: evt.ActionMutate, Message: "mutated resource"},
		}}},
	} {
		t.Run(name, func(t *testing.T) {
			ar := reviewOf(t, admissionv1.Create, tc.pod)
			resp := h.admit(tc.path, ar)
			got := sink.take()
			if len(got) != 1 {
				t.Fatalf("%d decisions recorded, want 1", len(got))
			}
			d := got[0]
			if d.Outcome != tc.want.outcome || !reflect.DeepEqual(d.Findings, tc.want.findings) {
				t.Fatalf("outcome %s, findings\n%+v\nwant %s\n%+v", d.Outcome, d.Findings, tc.want.outcome, tc.want.findings)
			}
			req := ar.Request
			wantRes := evt.DecisionResource{Version: "v1", Kind: "Pod", Namespace: "default", Name: req.Name, UID: "uid-" + req.Name}
			wantUser := evt.DecisionUser{Username: "alice", UID: "u-1", Groups: []string{"dev", "system:authenticated"}}
			// The harness's client presents no certificate: unverified.
			if d.RequestUID != string(req.UID) || d.Operation != "CREATE" || d.Resource != wantRes || !reflect.DeepEqual(d.User, wantUser) || d.Time.IsZero() || d.Verified {
				t.Fatalf("decision %+v", d)
			}
			if wantWebhook := map[string]string{PathValidate: "validate", PathMutate: "mutate"}[tc.path]; d.Webhook != wantWebhook {
				t.Errorf("webhook %q, want %q", d.Webhook, wantWebhook)
			}
			switch {
			case !resp.Allowed && (resp.Result == nil || d.Message != resp.Result.Message):
				t.Errorf("message %q, answered %v", d.Message, resp.Result)
			case resp.Allowed && d.Message != "":
				t.Errorf("an admitted request's decision has message %q", d.Message)
			}
			if string(d.Patch) != string(resp.Patch) {
				t.Errorf("patch %s, answered %s", d.Patch, resp.Patch)
			}
			// It makes a message, and the message holds no part of the
			// object beyond its name.
			m, err := evt.DecisionMessage(d)
			if err != nil {
				t.Fatal(err)
			}
			var raw map[string]any
			if err := json.Unmarshal(m.Data, &raw); err != nil {
				t.Fatal(err)
			}
			if _, ok := raw["object"]; ok || strings.Contains(string(m.Data), "registry.example.com") {
				t.Errorf("the decision holds the object: %s", m.Data)
			}
		})
	}
}

// TestDecisionObjects: with objects recorded, an admitted object of a
// selected kind and namespace is in its decision, redacted by path (the
// request's own object untouched); a denied one, another namespace's, a
// policy's validation and a Secret (even under "*") are not.
func TestDecisionObjects(t *testing.T) {
	sink := &memoryDecisionSink{}
	cfg := testConfig(func(c *Config) {
		c.DecisionObjects = DecisionObjects{Kinds: []string{"*"}, Namespaces: []string{"default"},
			Redact: []string{"spec.containers[*].env", "metadata.annotations", "spec.missing.field"}}
	})
	h := newHarness(t, staticSource(t, enforcePrivileged), cfg, WithDecisionSink(sink))
	withEnv := func(p map[string]any) {
		p["metadata"].(map[string]any)["annotations"] = map[string]any{"token": "t0p-s3cret"}
		p["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["env"] = []any{map[string]any{"name": "PASSWORD", "value": "hunter2"}}
	}
	ar := reviewOf(t, admissionv1.Create, pod("recorded", withEnv))
	if resp := h.admit(PathValidate, ar); !resp.Allowed {
		t.Fatal("denied")
	}
	d := sink.take()[0]
	var obj map[string]any
	if err := json.Unmarshal(d.Object, &obj); err != nil {
		t.Fatalf("object %s: %v", d.Object, err)
	}
	c := obj["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	if _, ok := c["env"]; ok || c["image"] != "registry.example.com/app:v1" || obj["metadata"].(map[string]any)["name"] != "recorded" {
		t.Fatalf("recorded object %s", d.Object)
	}
	if _, ok := obj["metadata"].(map[string]any)["annotations"]; ok || strings.Contains(string(d.Object), "hunter2") {
		t.Fatalf("redacted fields recorded: %s", d.Object)
	}

	secret := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "namespace": "default"}, "data": map[string]any{"k": "c2VjcmV0"}}
	for name, ar := range map[string]*admissionv1.AdmissionReview{
		"denied":          reviewOf(t, admissionv1.Create, pod("bad", privileged)),
		"other namespace": reviewOf(t, admissionv1.Create, pod("elsewhere", inNamespace("team"))),
		"a Secret": reviewOf(t, admissionv1.Create, secret, func(r *admissionv1.AdmissionRequest) {
			r.Resource.Resource = "secrets"
		}),
	} {
		h.admit(PathValidate, ar)
		got := sink.take()
		switch {
		case len(got) != 1:
			t.Errorf("%s: %d decisions, want 1", name, len(got))
		case got[0].Object != nil:
			t.Errorf("%s: object recorded: %s", name, got[0].Object)
		}
	}

	for _, bad := range []DecisionObjects{
		{Kinds: []string{"Secret"}},
		{Namespaces: []string{"a"}},
		{Kinds: []string{"Pod"}, Redact: []string{"spec..x"}},
		{Kinds: []string{"Pod"}, Redact: []string{"spec.containers[*]"}},
	} {
		if _, err := New(testConfig(func(c *Config) { c.DecisionObjects = bad })); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}
