package engine_test

import (
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

const vpolYAML = `apiVersion: policies.kyverno.io/v1alpha1
kind: ValidatingPolicy
metadata: {name: vp}
spec:
  validationActions: [Deny]
  matchConstraints:
    namespaceSelector:
      matchExpressions: [{key: skip, operator: DoesNotExist}]
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [pods]
  matchConditions:
  - name: not-system
    expression: "object.metadata.namespace != 'kube-system'"
  variables:
  - name: images
    expression: "object.spec.containers.map(c, c.image)"
  validations:
  - expression: "variables.images.all(i, !i.endsWith(':latest'))"
    messageExpression: "'latest: ' + variables.images.filter(i, i.endsWith(':latest')).join(', ')"
  - expression: "has(object.metadata.labels) && 'app' in object.metadata.labels"
    message: "label app is required"
  - expression: "object.spec.containers.all(c, c.securityContext.privileged == false)"
  - expression: "size(object.spec.containers) < 3"
`

func vpolResult(t *testing.T, eng *engine.Engine, p *engine.Policy, req *engine.Request) (engine.RuleResponse, bool) {
	t.Helper()
	resps, _ := eng.Apply(t.Context(), req, &engine.Set{Policies: []*engine.Policy{p}})
	for _, r := range resps {
		if len(r.Rules) > 0 {
			return r.Rules[0], true
		}
	}
	return engine.RuleResponse{}, false
}

func TestValidatingPolicy(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, vpolYAML)
	if p.Raw.Spec.ValidationFailureAction != "Enforce" {
		t.Fatalf("validationActions Deny: failure action %q", p.Raw.Spec.ValidationFailureAction)
	}
	tests := map[string]struct {
		obj     string
		op      string
		nsLabel map[string]string
		status  engine.Status
		msg     string // "" with status "": no result (not selected)
	}{
		"passes": {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {app: a}}, spec: {containers: [{name: c, image: "nginx:1", securityContext: {privileged: false}}]}}`,
			status: engine.StatusPass, msg: "success"},
		"messageExpression": {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {app: a}}, spec: {containers: [{name: c, image: "nginx:latest"}, {name: d, image: "redis:latest"}]}}`,
			status: engine.StatusFail, msg: "latest: nginx:latest, redis:latest"},
		"message": {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x}, spec: {containers: [{name: c, image: "nginx:1"}]}}`,
			status: engine.StatusFail, msg: "label app is required"},
		"an error is an error, in CEL's words": {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {app: a}}, spec: {containers: [{name: c, image: "nginx:1"}]}}`,
			status: engine.StatusError, msg: "error: no such key: securityContext"},
		"no message": {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {app: a}}, spec: {containers: [{name: a, image: "a:1", securityContext: {privileged: false}}, {name: b, image: "b:1", securityContext: {privileged: false}}, {name: c, image: "c:1", securityContext: {privileged: false}}]}}`,
			status: engine.StatusFail, msg: "CEL expression validation failed at index 3"},
		"matchConditions false: skip": {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: kube-system}, spec: {containers: [{name: c, image: "nginx:latest"}]}}`,
			status: engine.StatusSkip, msg: "skip"},
		"operation not selected": {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x}, spec: {containers: [{name: c, image: "nginx:latest"}]}}`,
			op: engine.OpDelete},
		"namespace selector": {obj: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x}, spec: {containers: [{name: c, image: "nginx:latest"}]}}`,
			nsLabel: map[string]string{"skip": "yes"}},
		"other resource": {obj: `{apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: x}}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := &engine.Request{Operation: tc.op, Object: obj(t, tc.obj), NamespaceLabels: tc.nsLabel}
			if tc.op == engine.OpDelete {
				req.Object, req.OldObject = nil, obj(t, tc.obj)
			}
			rr, ok := vpolResult(t, eng, p, req)
			if tc.status == "" {
				if ok {
					t.Fatalf("not selected, but %s %q", rr.Status, rr.Message)
				}
				return
			}
			if !ok || rr.Status != tc.status || rr.Message != tc.msg || rr.Name != "" {
				t.Fatalf("%q %s %q, want %s %q", rr.Name, rr.Status, rr.Message, tc.status, tc.msg)
			}
		})
	}
}

// A match condition that ends in an error is an error under
// failurePolicy Fail, a skip under Ignore.
func TestValidatingPolicyMatchErrors(t *testing.T) {
	eng := newEngine(t)
	y := strings.Replace(vpolYAML, `"object.metadata.namespace != 'kube-system'"`, `"object.metadata.missing == 1"`, 1)
	pod := `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x}, spec: {containers: [{name: c, image: "nginx:1"}]}}`
	rr, _ := vpolResult(t, eng, compile(t, eng, y), &engine.Request{Object: obj(t, pod)})
	if rr.Status != engine.StatusError || rr.Name != "evaluation" || !strings.Contains(rr.Message, "no such key: missing") {
		t.Fatalf("Fail: %q %s %q", rr.Name, rr.Status, rr.Message)
	}
	y = strings.Replace(y, "validationActions: [Deny]", "validationActions: [Audit]\n  failurePolicy: Ignore", 1)
	p := compile(t, eng, y)
	if p.Raw.Spec.ValidationFailureAction != "Audit" {
		t.Fatalf("failure action %q", p.Raw.Spec.ValidationFailureAction)
	}
	if rr, _ := vpolResult(t, eng, p, &engine.Request{Object: obj(t, pod)}); rr.Status != engine.StatusSkip {
		t.Fatalf("Ignore: %s %q", rr.Status, rr.Message)
	}
}

// A policy on Pods applies to the pod templates of controllers, with
// object.spec and object.metadata rewritten (object.metadata.namespace
// kept: a template has none), as Kyverno's CEL autogen does; a listed
// set of controllers limits it, an empty list turns it off.
func TestValidatingPolicyAutogen(t *testing.T) {
	eng := newEngine(t)
	y := vpolYAML
	p := compile(t, eng, y)
	if len(p.Rules) != 3 {
		t.Fatalf("%d rules, want the policy and two autogen variants", len(p.Rules))
	}
	deploy := `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: x}, spec: {template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: "nginx:latest"}]}}}}`
	if rr, _ := vpolResult(t, eng, p, &engine.Request{Object: obj(t, deploy)}); rr.Status != engine.StatusFail || rr.Message != "latest: nginx:latest" {
		t.Fatalf("deployment: %s %q", rr.Status, rr.Message)
	}
	// object.metadata.namespace is still the controller's.
	inSystem := strings.Replace(deploy, "namespace: x", "namespace: kube-system", 1)
	if rr, _ := vpolResult(t, eng, p, &engine.Request{Object: obj(t, inSystem)}); rr.Status != engine.StatusSkip {
		t.Fatalf("deployment in kube-system: %s %q", rr.Status, rr.Message)
	}
	cron := `{apiVersion: batch/v1, kind: CronJob, metadata: {name: c, namespace: x}, spec: {jobTemplate: {spec: {template: {metadata: {labels: {app: a}}, spec: {containers: [{name: c, image: "nginx:1", securityContext: {privileged: false}}]}}}}}}`
	if rr, _ := vpolResult(t, eng, p, &engine.Request{Object: obj(t, cron)}); rr.Status != engine.StatusPass {
		t.Fatalf("cronjob: %s %q", rr.Status, rr.Message)
	}
	only := compile(t, eng, strings.Replace(y, "  validationActions:", "  autogen: {podControllers: {controllers: [cronjobs]}}\n  validationActions:", 1))
	if _, ok := vpolResult(t, eng, only, &engine.Request{Object: obj(t, deploy)}); ok {
		t.Fatal("controllers [cronjobs]: a Deployment is checked")
	}
	if rr, _ := vpolResult(t, eng, only, &engine.Request{Object: obj(t, cron)}); rr.Status != engine.StatusPass {
		t.Fatalf("controllers [cronjobs]: cronjob %s %q", rr.Status, rr.Message)
	}
	none := compile(t, eng, strings.Replace(y, "  validationActions:", "  autogen: {podControllers: {controllers: []}}\n  validationActions:", 1))
	if len(none.Rules) != 1 {
		t.Fatalf("controllers []: %d rules", len(none.Rules))
	}
}

// A background scan asks which kinds a policy selects: a ValidatingPolicy
// answers from its matchConstraints (and autogen variants).
func TestValidatingPolicySelectsKind(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, vpolYAML)
	for _, tc := range []struct {
		group, version, kind string
		want                 engine.KindMatch
	}{
		{"", "v1", "Pod", engine.KindNamed},
		{"apps", "v1", "Deployment", engine.KindNamed},
		{"batch", "v1", "CronJob", engine.KindNamed},
		{"", "v1", "ConfigMap", engine.KindNotSelected},
		{"apps", "v1beta1", "Deployment", engine.KindNotSelected},
	} {
		if got := p.SelectsKind(engine.TypeValidation, tc.group, tc.version, tc.kind); got != tc.want {
			t.Errorf("%s/%s %s: %v, want %v", tc.group, tc.version, tc.kind, got, tc.want)
		}
	}
	all := compile(t, eng, strings.Replace(vpolYAML, "resources: [pods]", `resources: ["*"]`, 1))
	if got := all.SelectsKind(engine.TypeValidation, "", "v1", "ConfigMap"); got != engine.KindByWildcard {
		t.Errorf("resources *: %v", got)
	}
}

// PolicyExceptions of policies.kyverno.io: one whose conditions hold
// exempts the request (a skip, or a pass with reportResult: pass); one
// with images only gives the policy exceptions.allowedImages.
func TestValidatingPolicyExceptions(t *testing.T) {
	eng := newEngine(t)
	docs, err := policy.Parse([]byte(`apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: no-latest}
spec:
  validationActions: [Deny]
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations:
  - expression: "object.spec.containers.all(c, !c.image.endsWith(':latest') || c.image in exceptions.allowedImages)"
    message: latest
---
apiVersion: policies.kyverno.io/v1alpha1
kind: PolicyException
metadata: {name: sandbox, namespace: sandbox}
spec:
  policyRefs: [{name: no-latest, kind: ValidatingPolicy}]
  matchConditions: [{name: ns, expression: "object.metadata.namespace == 'sandbox'"}]
---
apiVersion: policies.kyverno.io/v1alpha1
kind: PolicyException
metadata: {name: audited, namespace: audit}
spec:
  policyRefs: [{name: no-latest, kind: ValidatingPolicy}]
  reportResult: pass
  matchConditions: [{name: ns, expression: "object.metadata.namespace == 'audit'"}]
---
apiVersion: policies.kyverno.io/v1alpha1
kind: PolicyException
metadata: {name: busybox, namespace: tools}
spec:
  policyRefs: [{name: no-latest, kind: ValidatingPolicy}]
  images: ["busybox:latest"]
  matchConditions: [{name: ns, expression: "object.metadata.namespace == 'tools'"}]
---
apiVersion: policies.kyverno.io/v1alpha1
kind: PolicyException
metadata: {name: other}
spec:
  policyRefs: [{name: another-policy, kind: ValidatingPolicy}]
  matchConditions: [{name: all, expression: "true"}]
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	if len(docs.CELExceptions) != 4 {
		t.Fatalf("%d CEL exceptions", len(docs.CELExceptions))
	}
	p, err := eng.Compile(docs.Policies[0])
	if err != nil {
		t.Fatal(err)
	}
	if p, err = eng.WithCELExceptions(p, docs.CELExceptions); err != nil {
		t.Fatal(err)
	}
	pod := func(ns, image string) *engine.Request {
		return &engine.Request{Object: obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: `+ns+`}, spec: {containers: [{name: c, image: "`+image+`"}]}}`)}
	}
	for _, tc := range []struct {
		req            *engine.Request
		name, status   string
		msg, exception string
	}{
		{pod("prod", "nginx:latest"), "", "fail", "latest", ""},
		{pod("sandbox", "nginx:latest"), "exception", "skip", "rule is skipped due to policy exception: sandbox/sandbox", "sandbox/sandbox"},
		{pod("audit", "nginx:latest"), "exception", "pass", "rule is passed due to policy exception: audit/audited", "audit/audited"},
		{pod("tools", "busybox:latest"), "", "pass", "success", ""},
		{pod("tools", "nginx:latest"), "", "fail", "latest", ""},
	} {
		rr, _ := vpolResult(t, eng, p, tc.req)
		if rr.Name != tc.name || string(rr.Status) != tc.status || rr.Message != tc.msg || rr.Exception != tc.exception {
			t.Errorf("%s: %q %s %q (exception %q), want %q %s %q (%q)", tc.req.Object["metadata"], rr.Name, rr.Status, rr.Message, rr.Exception, tc.name, tc.status, tc.msg, tc.exception)
		}
	}
	// An exception whose condition does not compile is an error.
	bad := *docs.CELExceptions[0]
	bad.Spec.MatchConditions = []policy.MatchCondition{{Name: "x", Expression: "object.("}}
	if _, err := eng.WithCELExceptions(p, []*policy.CELException{&bad}); err == nil || !strings.Contains(err.Error(), "spec.matchConditions[0].expression") {
		t.Fatalf("uncompilable exception: %v", err)
	}
}

// A CEL PolicyException with expiresAt exempts until then, and not from
// that moment on, though it was compiled into the policy before: the
// engine's clock decides at each evaluation (Kyverno 1.19).
func TestCELExceptionExpires(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clock := now
	eng := newEngine(t, engine.WithClock(func() time.Time { return clock }))
	docs, err := policy.Parse([]byte(`apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: no-latest}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations:
  - expression: "object.spec.containers.all(c, !c.image.endsWith(':latest'))"
    message: latest
---
apiVersion: policies.kyverno.io/v1beta1
kind: PolicyException
metadata: {name: until-noon-tomorrow, namespace: sandbox}
spec:
  policyRefs: [{name: no-latest, kind: ValidatingPolicy}]
  expiresAt: "2026-11-28T12:00:00Z"
  matchConditions: [{name: ns, expression: "object.metadata.namespace == 'sandbox'"}]
`), "test")
	if err != nil {
		t.Fatal(err)
	}
	p, err := eng.Compile(docs.Policies[0])
	if err != nil {
		t.Fatal(err)
	}
	if p, err = eng.WithCELExceptions(p, docs.CELExceptions); err != nil {
		t.Fatal(err)
	}
	req := func() *engine.Request {
		return &engine.Request{Object: obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: sandbox}, spec: {containers: [{name: c, image: "nginx:latest"}]}}`)}
	}
	for _, tc := range []struct {
		at     time.Time
		status engine.Status
	}{
		{now, engine.StatusSkip},
		{now.Add(24*time.Hour - time.Second), engine.StatusSkip},
		{now.Add(24 * time.Hour), engine.StatusFail},
		{now.Add(48 * time.Hour), engine.StatusFail},
	} {
		clock = tc.at
		if rr, _ := vpolResult(t, eng, p, req()); rr.Status != tc.status {
			t.Errorf("at %s: %s %q, want %s", tc.at, rr.Status, rr.Message, tc.status)
		}
	}
}

// A ValidatingPolicy in JSON evaluation mode validates JSON payloads
// (object is the payload) and nothing else; no other policy applies to
// a payload.
func TestValidatingPolicyJSONMode(t *testing.T) {
	eng := newEngine(t)
	jsonPol := compile(t, eng, `apiVersion: policies.kyverno.io/v1beta1
kind: ValidatingPolicy
metadata: {name: no-curl}
spec:
  evaluation: {mode: JSON}
  validations:
  - expression: "!object.Stages.exists(s, s.Commands.exists(c, c.contains('curl')))"
    message: curl is not allowed
`)
	k8sPol := compile(t, eng, vpolYAML)
	classic := compile(t, eng, policyYAML(`  - name: any
    match: {any: [{resources: {kinds: ["*"]}}]}
    validate: {message: no, deny: {}}
`))
	payload := map[string]any{"Stages": []any{map[string]any{"Commands": []any{"RUN apt-get install curl"}}}}
	resps, _ := eng.Apply(t.Context(), &engine.Request{Object: payload, JSON: true}, &engine.Set{Policies: []*engine.Policy{jsonPol, k8sPol, classic}})
	if len(resps) != 1 || resps[0].Policy != jsonPol || resps[0].Rules[0].Status != engine.StatusFail || resps[0].Rules[0].Message != "curl is not allowed" {
		t.Fatalf("payload: %+v", resps)
	}
	pod := obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x}, spec: {containers: [{name: c, image: "nginx:1"}]}}`)
	if rr, ok := vpolResult(t, eng, jsonPol, &engine.Request{Object: pod}); ok {
		t.Fatalf("a JSON-mode policy applied to a Pod: %+v", rr)
	}
	if len(jsonPol.Rules) != 1 {
		t.Fatalf("%d rules: JSON payloads have no autogen", len(jsonPol.Rules))
	}
}
