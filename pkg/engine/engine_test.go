package engine_test

import (
	"context"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// --- builders ---

func obj(t testing.TB, y string) map[string]any {
	t.Helper()
	docs, err := document.DecodeAll([]byte(y))
	if err != nil || len(docs) != 1 {
		t.Fatalf("decode resource: %v", err)
	}
	return docs[0].Object
}

func compile(t testing.TB, eng *engine.Engine, y string) *engine.Policy {
	t.Helper()
	docs, err := policy.Parse([]byte(y), "test")
	if err != nil {
		t.Fatalf("parse policy: %v", err)
	}
	if len(docs.Policies) != 1 {
		t.Fatalf("want one policy, got %d", len(docs.Policies))
	}
	cp, err := eng.Compile(docs.Policies[0])
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return cp
}

func newEngine(t testing.TB, opts ...engine.Option) *engine.Engine {
	t.Helper()
	eng, err := engine.New(opts...)
	if err != nil {
		t.Fatal(err)
	}
	return eng
}

// statuses runs Apply and returns "rule=status" for every rule response.
func statuses(t testing.TB, eng *engine.Engine, p *engine.Policy, req *engine.Request, exc ...*policy.Exception) map[string]engine.RuleResponse {
	t.Helper()
	resps, _ := eng.Apply(t.Context(), req, &engine.Set{Policies: []*engine.Policy{p}, Exceptions: exc})
	out := map[string]engine.RuleResponse{}
	for _, r := range resps {
		for _, rr := range r.Rules {
			out[rr.Name] = rr
		}
	}
	return out
}

const podTpl = `
apiVersion: v1
kind: Pod
metadata:
  name: web
  namespace: prod
  labels: {app: web}
  annotations: {team: payments}
spec:
  serviceAccountName: builder
  containers:
  - name: nginx
    image: nginx:1.25
  - name: sidecar
    image: ghcr.io/acme/proxy:latest
`

func policyYAML(rules string) string {
	return `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: p
spec:
  validationFailureAction: Enforce
  rules:
` + rules
}

func TestMatch(t *testing.T) {
	tests := map[string]struct {
		match   string
		exclude string
		req     func(*engine.Request)
		applies bool
	}{
		"kind":                  {match: `any: [{resources: {kinds: [Pod]}}]`, applies: true},
		"version and kind":      {match: `any: [{resources: {kinds: [v1/Pod]}}]`, applies: true},
		"group version kind":    {match: `any: [{resources: {kinds: [apps/v1/Deployment]}}]`, applies: false},
		"wildcard kind":         {match: `any: [{resources: {kinds: ["*"]}}]`, applies: true},
		"subresource needed":    {match: `any: [{resources: {kinds: [Pod/status]}}]`, applies: false},
		"subresource request":   {match: `any: [{resources: {kinds: [Pod/status]}}]`, req: func(r *engine.Request) { r.SubResource = "status" }, applies: true},
		"name wildcard":         {match: `any: [{resources: {kinds: [Pod], names: ["w?b"]}}]`, applies: true},
		"name mismatch":         {match: `any: [{resources: {kinds: [Pod], names: ["api-*"]}}]`, applies: false},
		"namespace":             {match: `any: [{resources: {kinds: [Pod], namespaces: ["pr*"]}}]`, applies: true},
		"annotations":           {match: `any: [{resources: {kinds: [Pod], annotations: {team: "pay*"}}}]`, applies: true},
		"selector":              {match: `any: [{resources: {kinds: [Pod], selector: {matchLabels: {app: web}}}}]`, applies: true},
		"selector expression":   {match: `any: [{resources: {kinds: [Pod], selector: {matchExpressions: [{key: app, operator: NotIn, values: [web]}]}}}]`, applies: false},
		"namespace selector":    {match: `any: [{resources: {kinds: [Pod], namespaceSelector: {matchLabels: {env: prod}}}}]`, req: func(r *engine.Request) { r.NamespaceLabels = map[string]string{"env": "prod"} }, applies: true},
		"namespace selector no": {match: `any: [{resources: {kinds: [Pod], namespaceSelector: {matchLabels: {env: prod}}}}]`, applies: false},
		"operation":             {match: `any: [{resources: {kinds: [Pod], operations: [UPDATE]}}]`, applies: false},
		"all filters":           {match: `all: [{resources: {kinds: [Pod]}}, {resources: {namespaces: [prod]}}]`, applies: true},
		"all filters one fails": {match: `all: [{resources: {kinds: [Pod]}}, {resources: {namespaces: [dev]}}]`, applies: false},
		"legacy inline":         {match: `resources: {kinds: [Pod]}`, applies: true},
		"subject user":          {match: `any: [{resources: {kinds: [Pod]}, subjects: [{kind: User, name: alice}]}]`, req: func(r *engine.Request) { r.UserInfo.Username = "alice" }, applies: true},
		"subject sa":            {match: `any: [{resources: {kinds: [Pod]}, subjects: [{kind: ServiceAccount, name: ci, namespace: tools}]}]`, req: func(r *engine.Request) { r.UserInfo.Username = "system:serviceaccount:tools:ci" }, applies: true},
		"cluster role":          {match: `any: [{resources: {kinds: [Pod]}, clusterRoles: [admin]}]`, req: func(r *engine.Request) { r.UserInfo.Username = "bob" }, applies: false},
		"cluster role held":     {match: `any: [{resources: {kinds: [Pod]}, clusterRoles: [admin]}]`, req: func(r *engine.Request) { r.UserInfo.ClusterRoles = []string{"admin"} }, applies: true},
		// As Kyverno: a request with no user at all (a background scan)
		// is not judged on the user part of a match block...
		"cluster role, no user": {match: `any: [{resources: {kinds: [Pod]}, clusterRoles: [admin]}]`, applies: true},
		"subject, no user":      {match: `any: [{resources: {kinds: [Pod]}, subjects: [{kind: User, name: alice}]}]`, applies: true},
		// ...a block of only user info selects nothing then...
		"only a subject, no user": {match: `any: [{subjects: [{kind: User, name: alice}]}]`, applies: false},
		// ...and exclude blocks keep it.
		"exclude subject, no user": {match: `any: [{resources: {kinds: [Pod]}}]`, exclude: `any: [{subjects: [{kind: User, name: alice}]}]`, applies: true},
		"exclude any":              {match: `any: [{resources: {kinds: [Pod]}}]`, exclude: `any: [{resources: {namespaces: [prod]}}]`, applies: false},
		"exclude all partial":      {match: `any: [{resources: {kinds: [Pod]}}]`, exclude: `all: [{resources: {namespaces: [prod]}}, {resources: {names: [api]}}]`, applies: true},
	}
	eng := newEngine(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rule := "  - name: r\n    match:\n      " + tc.match + "\n"
			if tc.exclude != "" {
				rule += "    exclude:\n      " + tc.exclude + "\n"
			}
			rule += "    validate:\n      pattern: {metadata: {name: \"?*\"}}\n"
			p := compile(t, eng, policyYAML(rule))
			req := &engine.Request{Operation: engine.OpCreate, Object: obj(t, podTpl)}
			if tc.req != nil {
				tc.req(req)
			}
			_, got := statuses(t, eng, p, req)["r"]
			if got != tc.applies {
				t.Fatalf("applies = %v, want %v", got, tc.applies)
			}
		})
	}
}

func TestValidateRules(t *testing.T) {
	tests := map[string]struct {
		rule    string
		want    engine.Status
		message string
	}{
		"pattern pass": {rule: `validate: {pattern: {spec: {containers: [{image: "*:*"}]}}}`, want: engine.StatusPass},
		"pattern fail message": {
			rule: `validate: {message: "no latest in {{ request.object.metadata.name }}", pattern: {spec: {containers: [{image: "!*:latest"}]}}}`,
			want: engine.StatusFail, message: "validation error: no latest in web. rule r failed at path /spec/containers/1/image/",
		},
		"anyPattern": {rule: `validate: {anyPattern: [{metadata: {labels: {app: api}}}, {metadata: {labels: {app: web}}}]}`, want: engine.StatusPass},
		"anyPattern fail": {
			rule: `validate: {message: m, anyPattern: [{metadata: {labels: {app: api}}}, {metadata: {labels: {app: db}}}]}`,
			want: engine.StatusFail, message: "validation error: m. rule r[0] failed at path /metadata/labels/app/ rule r[1] failed at path /metadata/labels/app/",
		},
		"deny": {
			rule: `validate: {message: "{{ request.object.metadata.name }} is denied", deny: {conditions: {any: [{key: "{{ request.object.metadata.labels.app }}", operator: Equals, value: web}]}}}`,
			want: engine.StatusFail, message: "web is denied",
		},
		"deny not met": {rule: `validate: {deny: {conditions: {all: [{key: "{{ request.operation }}", operator: Equals, value: DELETE}]}}}`, want: engine.StatusPass},
		"preconditions skip": {
			rule: "preconditions: {all: [{key: \"{{ request.object.metadata.namespace }}\", operator: AnyIn, value: [kube-system]}]}\n    validate: {pattern: {metadata: {name: x}}}",
			want: engine.StatusSkip,
		},
		"preconditions with a default for a missing field": {
			rule: "preconditions: {all: [{key: \"{{ request.object.spec.nodeName || '' }}\", operator: Equals, value: \"\"}]}\n    validate: {pattern: {metadata: {name: web}}}",
			want: engine.StatusPass,
		},
		"preconditions missing field is an error": {
			rule: "preconditions: {all: [{key: \"{{ request.object.spec.nodeName }}\", operator: Equals, value: \"\"}]}\n    validate: {pattern: {metadata: {name: web}}}",
			want: engine.StatusError,
		},
		"missing field in a pattern is an error": {
			rule: `validate: {pattern: {metadata: {name: "{{ request.object.spec.nodeName }}"}}}`,
			want: engine.StatusError,
		},
		"context variable on a missing field without default is an error": {
			rule: "context: [{name: n, variable: {jmesPath: request.object.spec.nodeName}}]\n    validate: {deny: {}}",
			want: engine.StatusError,
		},
		"preconditions failing expression is an error": {
			rule: "preconditions: {all: [{key: \"{{ base64_decode('%%%') }}\", operator: Equals, value: \"\"}]}\n    validate: {pattern: {metadata: {name: web}}}",
			want: engine.StatusError,
		},
		"foreach": {
			rule: `validate: {message: "bad {{ element.name }}", foreach: [{list: "request.object.spec.containers", pattern: {image: "!*:latest"}}]}`,
			want: engine.StatusFail,
		},
		"foreach preconditions": {
			rule: `validate: {foreach: [{list: "request.object.spec.containers", preconditions: {all: [{key: "{{ element.name }}", operator: Equals, value: nginx}]}, pattern: {image: "!*:latest"}}]}`,
			want: engine.StatusPass,
		},
		"foreach deny with index": {
			rule: `validate: {message: "index {{ elementIndex }}", foreach: [{list: "request.object.spec.containers", deny: {conditions: {any: [{key: "{{ element.image }}", operator: Equals, value: "*:latest"}]}}}]}`,
			want: engine.StatusFail, message: "index 1",
		},
		"nested foreach": {
			rule: `validate: {foreach: [{list: "request.object.spec.containers", foreach: [{list: "element.name | split(@, '')", deny: {conditions: {any: [{key: "{{ element }}", operator: Equals, value: "z"}]}}}]}]}`,
			want: engine.StatusPass,
		},
		"images variable": {
			rule: `validate: {deny: {conditions: {any: [{key: "{{ images.containers.sidecar.registry }}", operator: NotEquals, value: ghcr.io}]}}}`,
			want: engine.StatusPass,
		},
		"jmespath default": {
			rule: `validate: {deny: {conditions: {any: [{key: "{{ request.object.metadata.labels.missing || 'none' }}", operator: NotEquals, value: none}]}}}`,
			want: engine.StatusPass,
		},
		"context variable": {
			rule: "context: [{name: n, variable: {jmesPath: request.object.spec.containers | length(@)}}]\n    validate: {deny: {conditions: {any: [{key: \"{{ n }}\", operator: GreaterThan, value: 1}]}}}",
			want: engine.StatusFail,
		},
		"context variable default": {
			rule: "context: [{name: n, variable: {jmesPath: request.object.spec.nothing, default: 7}}]\n    validate: {deny: {conditions: {any: [{key: \"{{ n }}\", operator: Equals, value: 7}]}}}",
			want: engine.StatusFail,
		},
		"escaped variable": {
			rule: `validate: {message: "literal \\{{ x }}", deny: {}}`,
			want: engine.StatusFail, message: "literal {{ x }}",
		},
		"nested variable": {
			rule: "context: [{name: key, variable: {value: app}}]\n    validate: {message: \"{{ request.object.metadata.labels.{{ key }} }}\", deny: {}}",
			want: engine.StatusFail, message: "web",
		},
		"runtime error is an error result": {
			rule: `validate: {deny: {conditions: {any: [{key: "{{ to_number('x') }}", operator: Equals, value: 1}]}}}`,
			want: engine.StatusPass,
		},
		"bad variable in pattern is an error": {
			rule: `validate: {pattern: {metadata: {name: "{{ base64_decode('%%%') }}"}}}`,
			want: engine.StatusError,
		},
	}
	eng := newEngine(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := compile(t, eng, policyYAML("  - name: r\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    "+tc.rule+"\n"))
			rr, ok := statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: obj(t, podTpl)})["r"]
			if !ok {
				t.Fatal("rule did not apply")
			}
			if rr.Status != tc.want {
				t.Fatalf("status = %s (%s), want %s", rr.Status, rr.Message, tc.want)
			}
			if tc.message != "" && rr.Message != tc.message {
				t.Fatalf("message = %q, want %q", rr.Message, tc.message)
			}
		})
	}
}

func TestFailureAction(t *testing.T) {
	eng := newEngine(t)
	tests := map[string]struct {
		spec, validate string
		enforce        bool
	}{
		"default audit":            {spec: "", validate: "", enforce: false},
		"deprecated spec field":    {spec: "validationFailureAction: enforce", enforce: true},
		"rule overrides spec":      {spec: "validationFailureAction: Enforce", validate: "failureAction: Audit", enforce: false},
		"override by namespace":    {spec: "validationFailureAction: Enforce\n  validationFailureActionOverrides: [{action: Audit, namespaces: [prod]}]", enforce: false},
		"override other namespace": {spec: "validationFailureAction: Audit\n  validationFailureActionOverrides: [{action: Enforce, namespaces: [dev]}]", enforce: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			y := "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: p}\nspec:\n  " + tc.spec + "\n  rules:\n  - name: r\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    validate:\n      " + tc.validate + "\n      deny: {}\n"
			p := compile(t, eng, y)
			rr := statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: obj(t, podTpl)})["r"]
			if rr.Status != engine.StatusFail || rr.Enforce != tc.enforce {
				t.Fatalf("status %s enforce %v, want fail enforce %v", rr.Status, rr.Enforce, tc.enforce)
			}
		})
	}
}

func TestMutateThenValidate(t *testing.T) {
	eng := newEngine(t)
	mut := compile(t, eng, `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: add-label}
spec:
  rules:
  - name: add
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
      patchStrategicMerge:
        metadata:
          labels:
            +(owner): "{{ request.object.metadata.annotations.team }}"
  - name: json
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
      patchesJson6902: |-
        - op: add
          path: /metadata/labels/patched
          value: "yes"
  - name: each
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
      foreach:
      - list: request.object.spec.containers
        patchStrategicMerge:
          spec:
            containers:
            - name: "{{ element.name }}"
              imagePullPolicy: Always
`)
	val := compile(t, eng, `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: need-owner}
spec:
  rules:
  - name: owner
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      pattern: {metadata: {labels: {owner: payments, patched: "yes"}}, spec: {containers: [{imagePullPolicy: Always}]}}
`)
	req := &engine.Request{Operation: engine.OpCreate, Object: obj(t, podTpl)}
	// The validation policy comes first in the set: mutations still run
	// before it.
	resps, patched := eng.Apply(t.Context(), req, &engine.Set{Policies: []*engine.Policy{val, mut}})
	got := map[string]engine.Status{}
	for _, r := range resps {
		for _, rr := range r.Rules {
			got[rr.Name] = rr.Status
		}
	}
	for _, name := range []string{"add", "json", "each", "owner"} {
		if got[name] != engine.StatusPass {
			t.Errorf("rule %s: %s, want pass (all: %v)", name, got[name], got)
		}
	}
	if document.String(patched, "metadata", "labels", "owner") != "payments" {
		t.Errorf("patched owner label = %q", document.String(patched, "metadata", "labels", "owner"))
	}
	if document.String(req.Object, "metadata", "labels", "owner") != "" {
		t.Error("the request's object was modified in place")
	}
	// Mutating the already patched resource again changes nothing: skip.
	resps, _ = eng.Apply(t.Context(), &engine.Request{Operation: engine.OpCreate, Object: patched}, &engine.Set{Policies: []*engine.Policy{mut}})
	for _, r := range resps {
		for _, rr := range r.Rules {
			if rr.Name != "json" && rr.Status != engine.StatusSkip {
				t.Errorf("second pass rule %s: %s, want skip", rr.Name, rr.Status)
			}
		}
	}
}

func TestGenerate(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: netpol}
spec:
  rules:
  - name: default-deny
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate:
      apiVersion: networking.k8s.io/v1
      kind: NetworkPolicy
      name: default-deny
      namespace: "{{ request.object.metadata.name }}"
      synchronize: true
      data:
        spec: {podSelector: {}, policyTypes: [Ingress]}
`)
	rr := statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: obj(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-a}\n")})["default-deny"]
	if rr.Status != engine.StatusPass || len(rr.Generated) != 1 {
		t.Fatalf("status %s, generated %d", rr.Status, len(rr.Generated))
	}
	g := rr.Generated[0]
	if document.String(g, "metadata", "namespace") != "team-a" || document.String(g, "kind") != "NetworkPolicy" {
		t.Fatalf("generated %v", g)
	}
}

func TestAutogen(t *testing.T) {
	eng := newEngine(t)
	y := policyYAML(`  - name: no-latest
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "{{ request.object.metadata.name }}"
      pattern: {spec: {containers: [{image: "!*:latest"}]}}
`)
	p := compile(t, eng, y)
	var names []string
	for _, r := range p.Rules {
		names = append(names, r.Name)
	}
	if strings.Join(names, ",") != "no-latest,autogen-no-latest,autogen-cronjob-no-latest" {
		t.Fatalf("rules = %v", names)
	}
	deploy := obj(t, `apiVersion: apps/v1
kind: Deployment
metadata: {name: d, namespace: x}
spec:
  template:
    metadata: {name: tpl}
    spec:
      containers: [{name: c, image: "nginx:latest"}]
`)
	rr := statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: deploy})["autogen-no-latest"]
	if rr.Status != engine.StatusFail || !strings.Contains(rr.Message, "/spec/template/spec/containers/0/image/") || !strings.HasPrefix(rr.Message, "validation error: tpl.") {
		t.Fatalf("deployment: %s %q", rr.Status, rr.Message)
	}
	cron := obj(t, `apiVersion: batch/v1
kind: CronJob
metadata: {name: c, namespace: x}
spec:
  jobTemplate:
    spec:
      template:
        spec:
          containers: [{name: c, image: "nginx:1"}]
`)
	rr = statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: cron})["autogen-cronjob-no-latest"]
	if rr.Status != engine.StatusPass {
		t.Fatalf("cronjob: %s %q", rr.Status, rr.Message)
	}
	none := compile(t, eng, strings.Replace(y, "name: p\n", "name: p\n  annotations: {pod-policies.kyverno.io/autogen-controllers: none}\n", 1))
	if len(none.Rules) != 1 {
		t.Fatalf("autogen none: %d rules", len(none.Rules))
	}
	some := compile(t, eng, strings.Replace(y, "name: p\n", "name: p\n  annotations: {pod-policies.kyverno.io/autogen-controllers: Deployment}\n", 1))
	if len(some.Rules) != 2 || some.Rules[1].Name != "autogen-no-latest" {
		t.Fatalf("autogen Deployment: %d rules", len(some.Rules))
	}
}

func TestException(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, policyYAML("  - name: r\n    match: {any: [{resources: {kinds: [Pod]}}]}\n    validate: {deny: {}}\n"))
	docs, err := policy.Parse([]byte(`apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: allow-web, namespace: prod}
spec:
  exceptions: [{policyName: p, ruleNames: [r]}]
  match: {any: [{resources: {kinds: [Pod], names: [web]}}]}
`), "exc")
	if err != nil || len(docs.Exceptions) != 1 {
		t.Fatalf("parse exception: %v", err)
	}
	rr := statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: obj(t, podTpl)}, docs.Exceptions...)["r"]
	if rr.Status != engine.StatusSkip || rr.Exception != "prod/allow-web" {
		t.Fatalf("status %s exception %q", rr.Status, rr.Exception)
	}
}

// mapLoader serves context entries from memory.
type mapLoader struct {
	cms map[string]map[string]any
	api map[string]any
}

func (l mapLoader) ConfigMap(_ context.Context, ns, name string) (map[string]any, error) {
	if cm, ok := l.cms[ns+"/"+name]; ok {
		return cm, nil
	}
	return nil, engine.ErrNotAvailable
}

func (l mapLoader) APICall(_ context.Context, c *policy.APICall) (any, error) {
	if v, ok := l.api[c.URLPath]; ok {
		return v, nil
	}
	return nil, engine.ErrNotAvailable
}

func (mapLoader) GlobalReference(context.Context, string) (any, error) {
	return nil, engine.ErrNotAvailable
}
func (mapLoader) ImageData(context.Context, string) (any, error) { return nil, engine.ErrNotAvailable }

func TestContextLoaders(t *testing.T) {
	loader := mapLoader{
		cms: map[string]map[string]any{"kube-system/allowed": {"data": map[string]any{"registries": "ghcr.io,docker.io"}}},
		api: map[string]any{"/api/v1/namespaces/prod/pods": map[string]any{"items": []any{map[string]any{}, map[string]any{}}}},
	}
	eng := newEngine(t, engine.WithContextLoader(loader))
	p := compile(t, eng, policyYAML(`  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: allowed
      configMap: {name: allowed, namespace: kube-system}
    - name: count
      apiCall:
        urlPath: "/api/v1/namespaces/{{ request.object.metadata.namespace }}/pods"
        jmesPath: "items | length(@)"
    validate:
      message: "{{ count }} pods, registries {{ allowed.data.registries }}"
      deny:
        conditions:
          any:
          - key: "{{ images.containers.*.registry }}"
            operator: AnyNotIn
            value: "{{ allowed.data.registries | split(@, ',') }}"
`))
	rr := statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: obj(t, podTpl)})["r"]
	if rr.Status != engine.StatusPass {
		t.Fatalf("status %s: %s", rr.Status, rr.Message)
	}
}

func TestNoPanicOnOddInput(t *testing.T) {
	eng := newEngine(t)
	p := compile(t, eng, policyYAML(`  - name: r
    match: {any: [{resources: {kinds: ["*"]}}]}
    validate:
      foreach:
      - list: request.object.spec.containers
        pattern: {image: "!*:latest"}
`))
	for _, y := range []string{
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: 5}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [1, null, [2]]}\n",
		"apiVersion: v1\nkind: Pod\nmetadata: 7\n",
		"kind: Pod\n",
	} {
		rr := statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: obj(t, y)})["r"]
		if rr.Status == "" {
			t.Errorf("%q: no result", y)
		}
	}
}

// memLister serves resources from memory.
type memLister []map[string]any

func (l memLister) GetResource(_ context.Context, _, kind, ns, name string) (map[string]any, error) {
	for _, o := range l {
		if document.String(o, "kind") == kind && document.String(o, "metadata", "namespace") == ns && document.String(o, "metadata", "name") == name {
			return o, nil
		}
	}
	return nil, engine.ErrNotFound
}

func (l memLister) ListResources(_ context.Context, _, kind, ns string, sel *policy.LabelSelector) ([]map[string]any, error) {
	var out []map[string]any
	for _, o := range l {
		if document.String(o, "kind") == kind && document.String(o, "metadata", "namespace") == ns &&
			(sel == nil || engine.MatchSelector(sel, document.StringMap(o, "metadata", "labels"))) {
			out = append(out, o)
		}
	}
	return out, nil
}

func TestGenerateClone(t *testing.T) {
	lister := memLister{
		obj(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: regcred, namespace: default, uid: x1, resourceVersion: \"7\", labels: {sync: \"yes\"}}\ndata: {k: dg==}\n"),
		obj(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: other, namespace: default, labels: {sync: \"no\"}}\n"),
	}
	eng := newEngine(t, engine.WithResourceLister(lister))
	p := compile(t, eng, `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: sync-secrets}
spec:
  rules:
  - name: clone
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate:
      apiVersion: v1
      kind: Secret
      name: regcred
      namespace: "{{ request.object.metadata.name }}"
      clone: {namespace: default, name: regcred}
  - name: clone-list
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate:
      namespace: "{{ request.object.metadata.name }}"
      cloneList:
        namespace: default
        kinds: [v1/Secret]
        selector: {matchLabels: {sync: "yes"}}
`)
	got := statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: obj(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-b}\n")})
	for _, name := range []string{"clone", "clone-list"} {
		rr := got[name]
		if rr.Status != engine.StatusPass || len(rr.Generated) != 1 {
			t.Fatalf("%s: %s %q, %d generated", name, rr.Status, rr.Message, len(rr.Generated))
		}
		g := rr.Generated[0]
		if document.String(g, "metadata", "namespace") != "team-b" || document.String(g, "metadata", "name") != "regcred" ||
			document.String(g, "metadata", "uid") != "" || document.String(g, "data", "k") != "dg==" {
			t.Fatalf("%s generated %v", name, g)
		}
	}
	// Without a source the rule cannot clone: skip, with the reason.
	bare := newEngine(t)
	p2 := compile(t, bare, `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: sync-secrets}
spec:
  rules:
  - name: clone
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate: {apiVersion: v1, kind: Secret, name: regcred, namespace: x, clone: {namespace: default, name: regcred}}
`)
	rr := statuses(t, bare, p2, &engine.Request{Operation: engine.OpCreate, Object: obj(t, "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-b}\n")})["clone"]
	if rr.Status != engine.StatusSkip {
		t.Fatalf("no source: %s %q", rr.Status, rr.Message)
	}
}
