package engine_test

import (
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// TestDeleteSkipsPatterns: on a DELETE, pattern, anyPattern and
// podSecurity rules give no result at all (Kyverno's validation handlers
// return none: there is no new state to check), while deny rules decide,
// with the deleted object as request.oldObject.
func TestDeleteSkipsPatterns(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  validationFailureAction: Enforce
  rules:
  - name: labelled
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {message: needs a label, pattern: {metadata: {labels: {team: "?*"}}}}
  - name: any-labelled
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {message: needs a label, anyPattern: [{metadata: {labels: {team: "?*"}}}]}
  - name: keep-prod
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate:
      message: "{{ request.oldObject.metadata.name }} is production"
      deny:
        conditions:
          all:
          - {key: "{{ request.operation }}", operator: Equals, value: DELETE}
          - {key: "{{ request.oldObject.metadata.labels.env || '' }}", operator: Equals, value: prod}
`)
	cm := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: settings, namespace: default, labels: {env: prod}}}`)
	got := statuses(t, eng, p, &engine.Request{Operation: engine.OpDelete, OldObject: cm})
	if len(got) != 1 || got["keep-prod"].Status != engine.StatusFail || got["keep-prod"].Message != "settings is production" {
		t.Fatalf("DELETE: %+v, want only keep-prod failing", got)
	}
	got = statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: cm})
	if got["labelled"].Status != engine.StatusFail || got["any-labelled"].Status != engine.StatusFail || got["keep-prod"].Status != engine.StatusPass {
		t.Fatalf("CREATE: %+v", got)
	}
	// A policy whose every rule gives no result on the DELETE has no rules
	// in its response.
	resps, _ := eng.Apply(t.Context(), &engine.Request{Operation: engine.OpDelete, OldObject: cm}, &engine.Set{Policies: []*engine.Policy{compile(t, eng, `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: q}
spec:
  rules:
  - name: labelled
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {pattern: {metadata: {labels: {team: "?*"}}}}
`)}})
	for _, r := range resps {
		if r.Rules != nil {
			t.Fatalf("DELETE of a pattern-only policy: %+v", r.Rules)
		}
	}
}

// TestSubresources: kind selectors with a subresource (Pod/exec,
// Deployment/scale) match a request on that subresource of that kind, as
// Kyverno's CheckKind does with the parent's kind; a plain kind selector
// does not, except that a rule on Pods sees pods/ephemeralcontainers.
func TestSubresources(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: exec
    match: {any: [{resources: {kinds: [Pod/exec]}}]}
    validate: {deny: {conditions: {any: [{key: "{{ request.object.container }}", operator: Equals, value: nginx}]}}}
  - name: scale
    match: {any: [{resources: {kinds: [apps/v1/Deployment/scale]}}]}
    validate: {deny: {conditions: {any: [{key: "{{ request.object.spec.replicas }}", operator: GreaterThan, value: 4}]}}}
  - name: any-sub
    match: {any: [{resources: {kinds: ["*/scale"]}}]}
    validate: {deny: {}}
  - name: pods
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {deny: {}}
`)
	pod := engine.GroupVersionKind{Version: "v1", Kind: "Pod"}
	deploy := engine.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	exec := obj(t, `{apiVersion: v1, kind: PodExecOptions, container: nginx, command: [sh]}`)
	scale := obj(t, `{apiVersion: autoscaling/v1, kind: Scale, metadata: {name: web, namespace: default}, spec: {replicas: 10}}`)
	tests := map[string]struct {
		req  *engine.Request
		want map[string]engine.Status
	}{
		"pods/exec": {
			req:  &engine.Request{Operation: engine.OpConnect, Object: exec, SubResource: "exec", ParentKind: pod},
			want: map[string]engine.Status{"exec": engine.StatusFail},
		},
		"deployments/scale": {
			req:  &engine.Request{Operation: engine.OpUpdate, Object: scale, SubResource: "scale", ParentKind: deploy},
			want: map[string]engine.Status{"scale": engine.StatusFail, "any-sub": engine.StatusFail},
		},
		"the object's own kind without a parent": {
			req:  &engine.Request{Operation: engine.OpUpdate, Object: scale, SubResource: "scale"},
			want: map[string]engine.Status{"any-sub": engine.StatusFail},
		},
		"pods/ephemeralcontainers is seen by a rule on Pods": {
			req:  &engine.Request{Operation: engine.OpUpdate, Object: obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: a}}`), SubResource: "ephemeralcontainers", ParentKind: pod},
			want: map[string]engine.Status{"pods": engine.StatusFail},
		},
		"a Pod itself": {
			req:  &engine.Request{Operation: engine.OpCreate, Object: obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: a}}`)},
			want: map[string]engine.Status{"pods": engine.StatusFail},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := statuses(t, eng, p, tc.req)
			if len(got) != len(tc.want) {
				t.Fatalf("rules %v, want %v", got, tc.want)
			}
			for rule, st := range tc.want {
				if got[rule].Status != st {
					t.Fatalf("rule %s: %+v, want %s", rule, got[rule], st)
				}
			}
		})
	}
}

// TestRequestNamespaceAndName: request.namespace is the request's, else
// the resource's (empty for a cluster-scoped one, never unresolved);
// request.name is the request's when given.
func TestRequestNamespaceAndName(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: show
    match: {any: [{resources: {kinds: ["*"]}}]}
    validate:
      message: "ns={{ request.namespace }} name={{ request.name || 'none' }}"
      deny: {}
`)
	cm := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: c, namespace: team}}`)
	ns := obj(t, `{apiVersion: v1, kind: Namespace, metadata: {name: team}}`)
	for _, tc := range []struct {
		req  *engine.Request
		want string
	}{
		{&engine.Request{Operation: engine.OpCreate, Object: cm}, "ns=team name=none"},
		{&engine.Request{Operation: engine.OpCreate, Object: ns}, "ns= name=none"},
		{&engine.Request{Operation: engine.OpCreate, Object: cm, Namespace: "other", Name: "c"}, "ns=other name=c"},
	} {
		got := statuses(t, eng, p, tc.req)
		if got["show"].Message != tc.want {
			t.Errorf("%+v: %q, want %q", tc.req, got["show"].Message, tc.want)
		}
	}
}

// TestAutogenNeedsBareKinds: as Kyverno's CanAutoGen, autogen applies to
// rules on kinds written as "Pod" (or a controller), not to Pod/exec.
func TestAutogenNeedsBareKinds(t *testing.T) {
	for kinds, want := range map[string]bool{"[Pod]": true, "[Pod/exec]": false, "[Deployment]": true, "[ConfigMap]": false} {
		docs, err := policy.Parse([]byte(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: `+kinds+`}}]}
    validate: {deny: {}}
`), "test")
		if err != nil {
			t.Fatal(err)
		}
		if got := engine.AutogenControllers(docs.Policies[0]) != nil; got != want {
			t.Errorf("kinds %s: autogen %v, want %v", kinds, got, want)
		}
	}
}

// TestForEachElements: as Kyverno's validateElements, null elements are
// passed over, elementScope: true over elements that are not objects is an
// error (whatever the foreach checks), and per-element values given by the
// caller replace the foreach's context entries of the same name.
func TestForEachElements(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: scoped-strings
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      foreach:
      - list: request.object.spec.containers[].image
        elementScope: true
        deny: {conditions: {all: [{key: "{{ element }}", operator: NotEquals, value: ghcr.io}]}}
  - name: nulls
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      foreach:
      - list: "request.object.spec.containers[].securityContext"
        deny: {conditions: {all: [{key: "{{ element.privileged }}", operator: Equals, value: true}]}}
  - name: values
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "{{ element.name }} is listed"
      foreach:
      - list: request.object.spec.containers
        context:
        - name: listed
          variable: {value: "no"}
        deny: {conditions: {all: [{key: "{{ listed }}", operator: Equals, value: "yes"}]}}
`)
	pod := obj(t, `{apiVersion: v1, kind: Pod, metadata: {name: a}, spec: {containers: [{name: one, image: nginx}, {name: two, image: redis, securityContext: {privileged: false}}]}}`)
	req := &engine.Request{Operation: engine.OpCreate, Object: pod}
	got := statuses(t, eng, p, req)
	if got["scoped-strings"].Status != engine.StatusError || !strings.Contains(got["scoped-strings"].Message, "elementScope=true") {
		t.Errorf("scoped-strings: %+v", got["scoped-strings"])
	}
	if got["nulls"].Status != engine.StatusPass {
		t.Errorf("nulls: %+v (the first container's null securityContext is passed over)", got["nulls"])
	}
	if got["values"].Status != engine.StatusPass {
		t.Errorf("values without per-element values: %+v", got["values"])
	}
	req = &engine.Request{Operation: engine.OpCreate, Object: pod, ForEachValues: func(policy, rule string, i int) map[string]any {
		if rule == "values" && i == 1 {
			return map[string]any{"listed": "yes"}
		}
		return nil
	}}
	got = statuses(t, eng, p, req)
	if got["values"].Status != engine.StatusFail || got["values"].Message != "two is listed" {
		t.Errorf("values with element 1 listed: %+v", got["values"])
	}
}
