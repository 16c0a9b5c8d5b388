package engine_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/celeval"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

const celRules = `  - name: cel
    match: {any: [{resources: {kinds: [Pod]}}]}
    celPreconditions:
    - name: not-system
      expression: "object.metadata.namespace != 'kube-system'"
    validate:
      message: "the rule's message"
      cel:
        variables:
        - name: containers
          expression: "object.spec.containers + object.spec.?initContainers.orValue([])"
        expressions:
        - expression: "variables.containers.all(c, !c.image.endsWith(':latest'))"
          messageExpression: "'image ' + variables.containers.filter(c, c.image.endsWith(':latest'))[0].image + ' uses latest'"
        - expression: "has(object.metadata.labels) && 'app' in object.metadata.labels"
          message: "label app is required"
        - expression: "object.spec.containers.all(c, c.securityContext.privileged == false)"
        - expression: "size(object.spec.containers) < 3"
`

func TestValidateCEL(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, policyYAML(celRules))
	tests := map[string]struct {
		pod    string
		op     string
		status engine.Status
		msg    string
	}{
		"passes": {pod: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {app: a}}, spec: {containers: [{name: c, image: "nginx:1", securityContext: {privileged: false}}]}}`,
			status: engine.StatusPass, msg: "Validation rule 'cel' passed."},
		"messageExpression": {pod: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {app: a}}, spec: {containers: [{name: c, image: "nginx:latest"}]}}`,
			status: engine.StatusFail, msg: "image nginx:latest uses latest"},
		"variables read initContainers": {pod: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {app: a}}, spec: {initContainers: [{name: i, image: "busybox:latest"}], containers: [{name: c, image: "nginx:1"}]}}`,
			status: engine.StatusFail, msg: "image busybox:latest uses latest"},
		"static message": {pod: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x}, spec: {containers: [{name: c, image: "nginx:1"}]}}`,
			status: engine.StatusFail, msg: "label app is required"},
		"error, as the API server words it": {pod: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {app: a}}, spec: {containers: [{name: c, image: "nginx:1"}]}}`,
			status: engine.StatusFail, msg: "expression 'object.spec.containers.all(c, c.securityContext.privileged == false)' resulted in error: no such key: securityContext"},
		"no message: the rule's": {pod: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {app: a}}, spec: {containers: [{name: a, image: "a:1", securityContext: {privileged: false}}, {name: b, image: "b:1", securityContext: {privileged: false}}, {name: c, image: "c:1", securityContext: {privileged: false}}]}}`,
			status: engine.StatusFail, msg: "the rule's message"},
		"celPreconditions": {pod: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: kube-system}, spec: {containers: [{name: c, image: "nginx:latest"}]}}`,
			status: engine.StatusSkip, msg: "cel preconditions not met"},
		"DELETE: object is null": {pod: `{apiVersion: v1, kind: Pod, metadata: {name: a, namespace: x, labels: {app: a}}, spec: {containers: [{name: c, image: "nginx:1"}]}}`,
			op: engine.OpDelete, status: engine.StatusFail, msg: "expression 'object.metadata.namespace != 'kube-system'' resulted in error: no such key: metadata"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			req := &engine.Request{Operation: engine.OpCreate, Object: obj(t, tc.pod)}
			if tc.op == engine.OpDelete {
				req = &engine.Request{Operation: engine.OpDelete, OldObject: obj(t, tc.pod)}
			}
			rr := statuses(t, eng, p, req)["cel"]
			if rr.Status != tc.status || rr.Message != tc.msg {
				t.Fatalf("%s %q, want %s %q", rr.Status, rr.Message, tc.status, tc.msg)
			}
		})
	}
}

// validate.cel rules have autogen rules for Pod controllers, their paths
// rewritten as Kyverno rewrites them (object.spec → object.spec.template.spec).
func TestValidateCELAutogen(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, policyYAML(`  - name: no-latest
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      cel:
        expressions:
        - expression: "object.spec.containers.all(c, !c.image.endsWith(':latest')) && object.metadata.name != 'forbidden'"
          message: "no latest"
`))
	deploy := obj(t, `{apiVersion: apps/v1, kind: Deployment, metadata: {name: d, namespace: x}, spec: {template: {metadata: {name: forbidden}, spec: {containers: [{name: c, image: "nginx:1"}]}}}}`)
	if rr := statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: deploy})["autogen-no-latest"]; rr.Status != engine.StatusFail || rr.Message != "no latest" {
		t.Fatalf("deployment: %s %q", rr.Status, rr.Message)
	}
	cron := obj(t, `{apiVersion: batch/v1, kind: CronJob, metadata: {name: c, namespace: x}, spec: {jobTemplate: {spec: {template: {metadata: {name: ok}, spec: {containers: [{name: c, image: "nginx:1"}]}}}}}}`)
	if rr := statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: cron})["autogen-cronjob-no-latest"]; rr.Status != engine.StatusPass {
		t.Fatalf("cronjob: %s %q", rr.Status, rr.Message)
	}
}

// A CEL expression that does not compile makes the policy invalid, with
// the expression's path and CEL's words: the webhook refuses it.
func TestValidateCELCompileError(t *testing.T) {
	eng := newEngine(t)
	docs, err := policy.Parse([]byte(policyYAML(`  - name: broken
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      cel:
        expressions:
        - expression: "object.spec.containers.all(c, c.image"
        - expression: "'not a bool'"
`)), "test")
	if err != nil {
		t.Fatal(err)
	}
	_, err = eng.Compile(docs.Policies[0])
	if !errors.Is(err, celeval.ErrCompile) {
		t.Fatalf("error %v, want ErrCompile", err)
	}
	for _, want := range []string{"spec.rules[0] (broken)", "validate.cel.expressions[0].expression", "Syntax error", "validate.cel.expressions[1].expression", "must evaluate to bool but got string"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error does not say %q:\n%v", want, err)
		}
	}
}

// An expression that would run for ever fails the rule with the cost
// limit's error, within the request's time.
func TestValidateCELCostLimit(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, policyYAML(`  - name: forever
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      cel:
        expressions:
        - expression: "[1,2,3,4,5,6,7,8,9,10].all(a, [1,2,3,4,5,6,7,8,9,10].all(b, [1,2,3,4,5,6,7,8,9,10].all(c, [1,2,3,4,5,6,7,8,9,10].all(d, [1,2,3,4,5,6,7,8,9,10].all(e, [1,2,3,4,5,6,7,8,9,10].all(f, a+b+c+d+e+f > 0))))))"
`))
	resps, _ := eng.Apply(context.Background(), &engine.Request{Operation: engine.OpCreate, Object: obj(t, podTpl)}, &engine.Set{Policies: []*engine.Policy{p}})
	rr := resps[0].Rules[0]
	if rr.Status != engine.StatusFail || !strings.Contains(rr.Message, "exceeded the cost limit") {
		t.Fatalf("%s %q", rr.Status, rr.Message)
	}
}

// paramKind and paramRef that cannot select params make the policy
// invalid, each problem named with its path.
func TestValidateCELParamsInvalid(t *testing.T) {
	eng := newEngine(t)
	for _, c := range []struct{ cel, want string }{
		{"paramKind: {apiVersion: v1, kind: ConfigMap}", "validate.cel.paramRef: required with paramKind"},
		{"paramRef: {name: x}", "validate.cel.paramKind: required with paramRef"},
		{"paramKind: {apiVersion: v1}\n        paramRef: {name: x}", "validate.cel.paramKind.kind: required"},
		{"paramKind: {apiVersion: v1, kind: ConfigMap}\n        paramRef: {}", "exactly one of name and selector"},
		{"paramKind: {apiVersion: v1, kind: ConfigMap}\n        paramRef: {name: x, selector: {}}", "exactly one of name and selector"},
		{"paramKind: {apiVersion: v1, kind: ConfigMap}\n        paramRef: {name: x, parameterNotFoundAction: Ignore}", `parameterNotFoundAction: "Ignore" is not Allow or Deny`},
	} {
		docs, err := policy.Parse([]byte(policyYAML(`  - name: params
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      cel:
        `+c.cel+`
        expressions: [{expression: "params != null"}]
`)), "test")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := eng.Compile(docs.Policies[0]); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.cel, err, c.want)
		}
	}
}
