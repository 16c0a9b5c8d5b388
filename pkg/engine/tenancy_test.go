package engine_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// recordingSource serves every context source and resource read from
// memory and records what reached it, so a test sees that a refused read
// never got to the source (the services' API clients, with Verdict's
// privileges).
type recordingSource struct {
	mu    sync.Mutex
	calls []string
	objs  memLister
}

func (s *recordingSource) record(call string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, call)
}

func (s *recordingSource) ConfigMap(_ context.Context, ns, name string) (map[string]any, error) {
	s.record("configMap " + ns + "/" + name)
	return map[string]any{"data": map[string]any{"secret": "of " + ns}}, nil
}

func (s *recordingSource) APICall(_ context.Context, c *policy.APICall) (any, error) {
	method := strings.ToUpper(c.Method)
	if method == "" {
		method = "GET"
	}
	if c.Service != nil {
		s.record("service " + method + " " + c.Service.URL + " caBundle=" + c.Service.CABundle)
	} else {
		s.record("apiCall " + method + " " + c.URLPath)
	}
	return map[string]any{"data": map[string]any{"secret": "from " + c.URLPath}}, nil
}

func (s *recordingSource) GlobalReference(_ context.Context, name string) (any, error) {
	s.record("globalReference " + name)
	return map[string]any{"secret": "global"}, nil
}

func (s *recordingSource) ImageData(context.Context, string) (any, error) {
	return nil, engine.ErrNotAvailable
}

func (s *recordingSource) GetResource(ctx context.Context, apiVersion, kind, ns, name string) (map[string]any, error) {
	s.record("get " + kind + " " + ns + "/" + name)
	return s.objs.GetResource(ctx, apiVersion, kind, ns, name)
}

func (s *recordingSource) ListResources(ctx context.Context, apiVersion, kind, ns string, sel *policy.LabelSelector) ([]map[string]any, error) {
	s.record("list " + kind + " " + ns)
	return s.objs.ListResources(ctx, apiVersion, kind, ns, sel)
}

func (*recordingSource) KindFor(_ context.Context, _, resource string) (string, error) {
	switch resource {
	case "configmaps":
		return "ConfigMap", nil
	case "secrets":
		return "Secret", nil
	case "clusterroles":
		return "ClusterRole", nil
	}
	return "", engine.ErrNotFound
}

func (*recordingSource) Namespaced(_ context.Context, _, kind string) (bool, error) {
	return kind != "ClusterRole" && kind != "Namespace", nil
}

func (s *recordingSource) reached() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

// tenantConfigMap is what the tenant's policies are evaluated on: a
// ConfigMap in team-a whose labels steer the policies' variables, as a
// tenant who writes both could.
const tenantConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: probe
  namespace: team-a
  labels: {victim: team-b, climb: "..", cm: team-a}
data: {k: v}
`

func kindPolicy(kind, rule string) string {
	return `apiVersion: kyverno.io/v1
kind: ` + kind + `
metadata: {name: probe, namespace: team-a}
spec:
  validationFailureAction: Enforce
  rules:
  - name: r
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
` + rule
}

const leakDeny = `    validate:
      message: "leaked {{ leak }}"
      deny: {conditions: {any: [{key: "{{ leak }}", operator: NotEquals, value: ""}]}}
`

// TestNamespacedPolicyReadsOnlyItsNamespace: every way a namespaced
// policy reads the cluster (configMap and apiCall entries, global
// references, CEL's resource functions) is refused before it reaches the
// source when it names another namespace or a cluster-wide path, with
// variables the tenant controls, and is an error of the rule (never a
// default); reads of its own namespace go through. A ClusterPolicy is
// not confined, but may POST only reviews.
func TestNamespacedPolicyReadsOnlyItsNamespace(t *testing.T) {
	tests := map[string]struct {
		policy string
		// reached is what the source must see (nil: nothing).
		reached []string
		// refused is a substring of the rule's error; "" means the rule
		// ran (its deny fires on the leaked value).
		refused string
	}{
		"configMap in another namespace": {
			policy: kindPolicy("Policy", `    context:
    - name: leak
      configMap: {name: db, namespace: "{{ request.object.metadata.labels.victim }}"}
`+leakDeny),
			refused: "configMap entry db names namespace team-b",
		},
		"configMap without a namespace reads its own": {
			policy: kindPolicy("Policy", `    context:
    - name: leak
      configMap: {name: db}
`+leakDeny),
			reached: []string{"configMap team-a/db"},
		},
		"apiCall into another namespace": {
			policy: kindPolicy("Policy", `    context:
    - name: leak
      apiCall: {urlPath: "/api/v1/namespaces/{{ request.object.metadata.labels.victim }}/configmaps/db"}
`+leakDeny),
			refused: "names namespace team-b",
		},
		"apiCall climbing out of its namespace": {
			policy: kindPolicy("Policy", `    context:
    - name: leak
      apiCall: {urlPath: "/api/v1/namespaces/team-a/{{ request.object.metadata.labels.climb }}/verdict/secrets/verdict-webhook-ca"}
`+leakDeny),
			refused: "names namespace verdict",
		},
		"apiCall to a cluster-wide list": {
			policy: kindPolicy("Policy", `    context:
    - name: leak
      apiCall: {urlPath: "/api/v1/{{ 'secrets' }}"}
`+leakDeny),
			refused: "does not name namespace team-a",
		},
		"apiCall refused even with a default": {
			policy: kindPolicy("Policy", `    context:
    - name: leak
      apiCall:
        urlPath: "/api/v1/namespaces/{{ request.object.metadata.labels.victim }}/secrets/db"
        default: fallback
`+leakDeny),
			refused: "names namespace team-b",
		},
		"apiCall POST creating an object": {
			policy: kindPolicy("Policy", `    context:
    - name: leak
      apiCall:
        method: POST
        urlPath: "/api/v1/namespaces/{{ request.object.metadata.labels.cm }}/resourcequotas"
        data: [{key: spec, value: {hard: {pods: "0"}}}]
`+leakDeny),
			refused: "may POST only a review",
		},
		"apiCall in its own namespace": {
			policy: kindPolicy("Policy", `    context:
    - name: leak
      apiCall: {urlPath: "/api/v1/namespaces/{{ request.object.metadata.labels.cm }}/configmaps/db", jmesPath: data.secret}
`+leakDeny),
			reached: []string{"apiCall GET /api/v1/namespaces/team-a/configmaps/db"},
		},
		"CEL globalContext": {
			policy: kindPolicy("Policy", `    validate:
      cel:
        expressions:
        - expression: "globalContext.Get('everything', '') == null"
`),
			refused: "may not read global context entries",
		},
		"ClusterPolicy reads any namespace": {
			policy: kindPolicy("ClusterPolicy", `    context:
    - name: leak
      apiCall: {urlPath: "/api/v1/namespaces/{{ request.object.metadata.labels.victim }}/configmaps/db", jmesPath: data.secret}
`+leakDeny),
			reached: []string{"apiCall GET /api/v1/namespaces/team-b/configmaps/db"},
		},
		"ClusterPolicy POST creating an object": {
			policy: kindPolicy("ClusterPolicy", `    context:
    - name: leak
      apiCall:
        method: POST
        urlPath: "/api/v1/namespaces/{{ request.object.metadata.labels.victim }}/resourcequotas"
        data: [{key: spec, value: {hard: {pods: "0"}}}]
`+leakDeny),
			refused: "may POST only a review",
		},
		"ClusterPolicy POST of a review": {
			policy: kindPolicy("ClusterPolicy", `    context:
    - name: leak
      apiCall:
        method: POST
        urlPath: "/apis/authorization.k8s.io/v1/{{ 'subjectaccessreviews' }}"
        data: [{key: spec, value: {user: someone}}]
        jmesPath: data.secret
`+leakDeny),
			reached: []string{"apiCall POST /apis/authorization.k8s.io/v1/subjectaccessreviews"},
		},
		"CEL resource.Get in another namespace": {
			policy: kindPolicy("Policy", `    validate:
      cel:
        expressions:
        - expression: "resource.Get('v1', 'configmaps', object.metadata.labels.victim, 'db').data.secret == ''"
`),
			refused: "names namespace team-b",
		},
		"CEL resource.List of a cluster-scoped kind": {
			policy: kindPolicy("Policy", `    validate:
      cel:
        expressions:
        - expression: "size(resource.List('rbac.authorization.k8s.io/v1', 'clusterroles', '').items) == 0"
`),
			refused: "ClusterRole is cluster-scoped",
		},
		"CEL resource.Post creating an object": {
			policy: kindPolicy("ClusterPolicy", `    validate:
      cel:
        expressions:
        - expression: "resource.Post('v1', 'resourcequotas', object.metadata.labels.victim, {'spec': {'hard': {'pods': '0'}}}).status == null"
`),
			refused: "may POST only a review",
		},
		"CEL resource.Post of a review": {
			policy: kindPolicy("ClusterPolicy", `    validate:
      cel:
        expressions:
        - expression: "dyn(resource.Post('authorization.k8s.io/v1', 'subjectaccessreviews', {'spec': {'user': 'someone'}})) != null"
`),
			reached: []string{"apiCall POST /apis/authorization.k8s.io/v1/subjectaccessreviews"},
		},
		"CEL resource.Post of a review by a namespaced policy": {
			policy: kindPolicy("Policy", `    validate:
      cel:
        expressions:
        - expression: "dyn(resource.post('authorization.k8s.io/v1', 'subjectaccessreviews', {'spec': {'user': 'someone'}})) != null"
`),
			refused: "may POST only a LocalSubjectAccessReview",
		},
		"CEL resource.List without a namespace lists its own": {
			policy: kindPolicy("Policy", `    validate:
      cel:
        expressions:
        - expression: "size(resource.List('v1', 'secrets', '').items) == 0"
`),
			reached: []string{"list Secret team-a"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			src := &recordingSource{}
			eng := newEngine(t, engine.WithContextLoader(src), engine.WithResourceLister(src))
			p := compile(t, eng, tc.policy)
			rr := statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: obj(t, tenantConfigMap)})["r"]
			if tc.refused != "" {
				// A classic rule's refused read is an error; a CEL
				// expression's, a failure (as the API server's CEL
				// admission treats an evaluation error).
				if (rr.Status != engine.StatusError && rr.Status != engine.StatusFail) || !strings.Contains(rr.Message, tc.refused) {
					t.Fatalf("status %s %q, want an error with %q", rr.Status, rr.Message, tc.refused)
				}
				if rr.Status == engine.StatusError && !rr.Refused {
					t.Fatal("a refusal's error is not marked Refused: a worker would retry it")
				}
			} else if rr.Status == engine.StatusError {
				t.Fatalf("status %s %q, want the read to go through", rr.Status, rr.Message)
			}
			if got := src.reached(); strings.Join(got, "\n") != strings.Join(tc.reached, "\n") {
				t.Fatalf("the source saw %q, want %q", got, tc.reached)
			}
		})
	}
}

// TestNamespacedPolicyClonesOnlyItsNamespace: a namespaced Policy's
// generate rule cannot clone, or list to clone, from another namespace,
// even when the source's namespace is a variable.
func TestNamespacedPolicyClonesOnlyItsNamespace(t *testing.T) {
	tests := map[string]string{
		"clone": `    generate:
      apiVersion: v1
      kind: ConfigMap
      name: copy
      namespace: team-a
      clone: {namespace: "{{ request.object.metadata.labels.victim }}", name: db}
`,
		"cloneList": `    generate:
      namespace: team-a
      cloneList:
        namespace: "{{ request.object.metadata.labels.victim }}"
        kinds: [v1/Secret]
`,
	}
	for name, rule := range tests {
		t.Run(name, func(t *testing.T) {
			src := &recordingSource{objs: memLister{obj(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: db, namespace: team-b}\ndata: {password: hunter2}\n")}}
			eng := newEngine(t, engine.WithResourceLister(src))
			p := compile(t, eng, kindPolicy("Policy", rule))
			resp := eng.Generate(t.Context(), &engine.Request{Operation: engine.OpCreate, Object: obj(t, tenantConfigMap)}, p, nil)
			if len(resp.Rules) != 1 {
				t.Fatalf("%d rule responses", len(resp.Rules))
			}
			for _, rr := range resp.Rules {
				{
					if rr.Status != engine.StatusError || !rr.Refused || !strings.Contains(rr.Message, "names namespace team-b") || len(rr.Generated) != 0 {
						t.Fatalf("status %s %q, generated %d: want a refusal", rr.Status, rr.Message, len(rr.Generated))
					}
					for _, g := range rr.Generated {
						if document.String(g, "data", "password") != "" {
							t.Fatal("the other namespace's data was copied")
						}
					}
				}
			}
			if got := src.reached(); len(got) != 0 {
				t.Fatalf("the source saw %q", got)
			}
		})
	}
}

// TestCELHTTPClient: http.Client(caBundle) makes the calls of its
// result trust that bundle (the service call carries it to the loader,
// which dials with it); http's own calls carry none.
func TestCELHTTPClient(t *testing.T) {
	src := &recordingSource{}
	eng := newEngine(t, engine.WithContextLoader(src), engine.WithResourceLister(src))
	p := compile(t, eng, kindPolicy("ClusterPolicy", `    validate:
      cel:
        expressions:
        - expression: "dyn(http.Client('PEM-BUNDLE').Get('https://svc.example/a')) != null && dyn(http.get('https://svc.example/b')) != null"
`))
	rr := statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: obj(t, tenantConfigMap)})["r"]
	if rr.Status == engine.StatusError {
		t.Fatalf("%s %q", rr.Status, rr.Message)
	}
	want := []string{"service GET https://svc.example/a caBundle=PEM-BUNDLE", "service GET https://svc.example/b caBundle="}
	if got := src.reached(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("the loader saw %q, want %q", got, want)
	}
}
