package registrar

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit/golden"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

var table = StaticResolver{
	"Pod":                   {{Version: "v1", Resource: "pods", Namespaced: true}},
	"Deployment":            {{Group: "apps", Version: "v1", Resource: "deployments", Namespaced: true}},
	"DaemonSet":             {{Group: "apps", Version: "v1", Resource: "daemonsets", Namespaced: true}},
	"StatefulSet":           {{Group: "apps", Version: "v1", Resource: "statefulsets", Namespaced: true}},
	"ReplicaSet":            {{Group: "apps", Version: "v1", Resource: "replicasets", Namespaced: true}},
	"Job":                   {{Group: "batch", Version: "v1", Resource: "jobs", Namespaced: true}},
	"CronJob":               {{Group: "batch", Version: "v1", Resource: "cronjobs", Namespaced: true}},
	"ReplicationController": {{Version: "v1", Resource: "replicationcontrollers", Namespaced: true}},
	"Namespace":             {{Version: "v1", Resource: "namespaces"}},
	"ConfigMap":             {{Version: "v1", Resource: "configmaps", Namespaced: true}},
}

func compileAll(t *testing.T, docs ...string) []*engine.Policy {
	t.Helper()
	eng, err := engine.New()
	if err != nil {
		t.Fatal(err)
	}
	var out []*engine.Policy
	for _, d := range docs {
		parsed, err := policy.Parse([]byte(d), "test")
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parsed.Policies {
			cp, err := eng.Compile(p)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, cp)
		}
	}
	return out
}

const enforcePods = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: pods}
spec:
  webhookTimeoutSeconds: 15
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`

const ignoreMutate = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: labels}
spec:
  failurePolicy: Ignore
  rules:
  - name: m
    match: {any: [{resources: {kinds: [ConfigMap], operations: [CREATE]}}]}
    mutate: {patchStrategicMerge: {metadata: {labels: {+(a): b}}}}
  - name: ns
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate: {apiVersion: v1, kind: ConfigMap, name: x, namespace: "{{request.object.metadata.name}}", data: {}}
`

// TestBuild pins, with golden files under testdata/build, the
// configurations built for the policies above: the webhooks, their rules
// (through autogen, every Pod controller), failure policies, timeouts,
// client configuration, namespace selector and match condition.
func TestBuild(t *testing.T) {
	pols := compileAll(t, enforcePods, ignoreMutate)
	mut, val, err := Build(pols, table, Options{URL: "https://127.0.0.1:9443", CABundle: []byte("ca"), Filter: admissionfilter.New([]string{"verdict"}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	for path, obj := range map[string]any{
		"testdata/build/mutating.yaml":   mut,
		"testdata/build/validating.yaml": val,
	} {
		b, err := yaml.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		golden.Assert(t, path, b)
	}
}

// Whatever the policies select, every webhook (the policy-validation one
// included) skips the system namespaces, Verdict's and the configured
// ones, and carries the match condition that keeps the resources a
// cluster needs to heal itself away from it.
func TestBuildExcludesWhatTheClusterNeeds(t *testing.T) {
	everything := `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: everything}
spec:
  validationFailureAction: Enforce
  rules:
  - name: all
    match: {any: [{resources: {kinds: ["*"]}}]}
    validate: {message: no, deny: {}}
  - name: label
    match: {any: [{resources: {kinds: ["*"]}}]}
    mutate: {patchStrategicMerge: {metadata: {labels: {+(a): b}}}}
`
	// A ValidatingPolicy names resources itself: "*/*" too is kept away
	// from what the cluster needs (it makes the Ignore webhook).
	everythingVPol := `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: everything-cel}
spec:
  validationActions: [Deny]
  failurePolicy: Ignore
  matchConstraints: {resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*/*"]}]}
  validations: [{expression: "false"}]
`
	// A MutatingPolicy too (it makes the mutating Ignore webhook).
	everythingMPol := `
apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: everything-mutated}
spec:
  failurePolicy: Ignore
  reinvocationPolicy: IfNeeded
  matchConstraints: {resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*/*"]}]}
  mutations: [{patchType: JSONPatch, jsonPatch: {expression: "[]"}}]
`
	// An ImageValidatingPolicy on every resource (its digest mutation
	// makes the mutating Fail webhook).
	everythingIVPol := `
apiVersion: policies.kyverno.io/v1
kind: ImageValidatingPolicy
metadata: {name: everything-images}
spec:
  matchConstraints: {resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*"]}]}
  validations: [{expression: "true"}]
`
	filter := admissionfilter.New([]string{"verdict", "nats"}, []admissionfilter.Resource{{Group: "example.com", Resource: "widgets"}})
	// The same, whichever paths the webhooks point at (LegacyPaths: a
	// rolling upgrade from an earlier release).
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprintf("legacy paths %v", legacy), func(t *testing.T) {
			checkExcludes(t, compileAll(t, everything, everythingVPol, everythingMPol, everythingIVPol), Options{URL: "https://x", Filter: filter, LegacyPaths: legacy}, 5)
		})
	}
	// A synchronized GeneratingPolicy on every resource: its webhook (Fail)
	// and the Ignore webhook that receives its triggers' deletes both
	// skip what the cluster needs.
	everythingGPol := `
apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata: {name: everything-generated}
spec:
  evaluation: {synchronize: {enabled: true}}
  matchConstraints: {resourceRules: [{apiGroups: ["*"], apiVersions: ["*"], operations: [CREATE, UPDATE], resources: ["*"]}]}
  generate: [{expression: "generator.Apply(object.metadata.name, [])"}]
`
	t.Run("a synchronized GeneratingPolicy", func(t *testing.T) {
		checkExcludes(t, compileAll(t, everythingGPol), Options{URL: "https://x", Filter: filter}, 3)
	})
	// Candidates on every resource: the validating webhook failing open
	// that records their requests (and the policy webhook) skip the same.
	t.Run("candidates", func(t *testing.T) {
		checkExcludes(t, nil, Options{URL: "https://x", Filter: filter,
			Candidates: compileAll(t, everything, everythingVPol, everythingMPol, everythingIVPol, everythingGPol)}, 2)
	})
	// A shadow's one validating webhook (Ignore, no policy webhook) skips
	// the same.
	t.Run("shadow", func(t *testing.T) {
		checkExcludes(t, compileAll(t, everything, everythingVPol, everythingMPol, everythingIVPol), Options{URL: "https://x", Filter: filter, Shadow: true, API: policycache.KyvernoAPI}, 1)
	})
}

func checkExcludes(t *testing.T, pols []*engine.Policy, o Options, webhooks int) {
	t.Helper()
	filter := o.Filter
	mut, val, err := Build(pols, table, o)
	if err != nil {
		t.Fatal(err)
	}
	type hook struct {
		name  string
		ns    *metav1.LabelSelector
		mc    []admissionregistrationv1.MatchCondition
		rules []admissionregistrationv1.RuleWithOperations
	}
	var hooks []hook
	for _, w := range mut.Webhooks {
		hooks = append(hooks, hook{w.Name, w.NamespaceSelector, w.MatchConditions, w.Rules})
	}
	for _, w := range val.Webhooks {
		hooks = append(hooks, hook{w.Name, w.NamespaceSelector, w.MatchConditions, w.Rules})
	}
	if len(hooks) != webhooks {
		t.Fatalf("%d webhooks, want %d: %v", len(hooks), webhooks, hooks)
	}
	for _, h := range hooks {
		if len(h.ns.MatchExpressions) != 1 || strings.Join(h.ns.MatchExpressions[0].Values, ",") != "kube-node-lease,kube-public,kube-system,nats,verdict" ||
			h.ns.MatchExpressions[0].Operator != metav1.LabelSelectorOpNotIn {
			t.Errorf("%s: namespace selector %+v", h.name, h.ns)
		}
		// The condition where a rule could select an excluded resource;
		// none where none can (the API server would evaluate it, the
		// object converted, on every request for nothing).
		reaches := slices.ContainsFunc(h.rules, func(r admissionregistrationv1.RuleWithOperations) bool {
			return filter.Reaches(r.APIGroups, r.Resources)
		})
		switch {
		case !reaches && len(h.mc) != 0:
			t.Errorf("%s: rules %+v reach no excluded resource, yet match conditions %+v", h.name, h.rules, h.mc)
		case reaches && (len(h.mc) != 1 || h.mc[0].Name != admissionfilter.MatchConditionName || h.mc[0].Expression != filter.Expression()):
			t.Errorf("%s: match conditions %+v", h.name, h.mc)
		}
		for _, want := range []string{`"nodes"`, `"leases"`, `"events"`, `"tokenreviews"`, `"subjectaccessreviews"`, `"widgets"`} {
			if len(h.mc) == 1 && !strings.Contains(h.mc[0].Expression, want) {
				t.Errorf("%s: match condition lacks %s", h.name, want)
			}
		}
	}
}

func TestBuildDeterministic(t *testing.T) {
	pols := compileAll(t, enforcePods, ignoreMutate)
	_, a, _ := Build(pols, table, Options{URL: "https://x"})
	rev := []*engine.Policy{pols[1], pols[0]}
	for i := 0; i < 20; i++ {
		_, b, _ := Build(rev, table, Options{URL: "https://x"})
		if !reflect.DeepEqual(a.Webhooks, b.Webhooks) {
			t.Fatal("configuration depends on policy order or map iteration")
		}
	}
}

func TestBuildNoPolicies(t *testing.T) {
	mut, val, err := Build(nil, table, Options{URL: "https://x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(mut.Webhooks) != 0 || len(val.Webhooks) != 1 || val.Webhooks[0].Name != "policy.verdict.dev" {
		t.Fatalf("mutating %d, validating %v", len(mut.Webhooks), vnames(val.Webhooks))
	}
}

func TestResolveSelectors(t *testing.T) {
	tests := map[string]string{
		"Pod":                "/v1/pods",
		"v1/Pod":             "/v1/pods",
		"apps/v1/Deployment": "apps/v1/deployments",
		"Pod/exec":           "/v1/pods/exec",
		"*":                  "*/*/*",
		"Cron*":              "batch/v1/cronjobs",
		"v2/Pod":             "",
	}
	for sel, want := range tests {
		rs, err := table.Resolve(sel)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, r := range rs {
			s := r.Group + "/" + r.Version + "/" + r.Resource
			if r.Subresource != "" {
				s += "/" + r.Subresource
			}
			got = append(got, s)
		}
		if strings.Join(got, ",") != want {
			t.Errorf("%s: %v, want %s", sel, got, want)
		}
	}
}

func vnames(w []admissionregistrationv1.ValidatingWebhook) []string {
	var out []string
	for _, h := range w {
		out = append(out, h.Name)
	}
	return out
}

// A ValidatingPolicy's webhook rules are its matchConstraints' resource
// rules, and its autogen variants' (the Pod controllers), as written: no
// kind to resolve; failurePolicy and webhook timeout carry over.
func TestBuildValidatingPolicy(t *testing.T) {
	pols := compileAll(t, `apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: vp}
spec:
  validationActions: [Deny]
  failurePolicy: Ignore
  webhookConfiguration: {timeoutSeconds: 15}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [pods]
  validations: [{expression: "true"}]
`)
	_, val, err := Build(pols, table, Options{URL: "https://127.0.0.1:9443"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range val.Webhooks {
		if w.Name == "policy.verdict.dev" {
			continue
		}
		if *w.FailurePolicy != "Ignore" || *w.TimeoutSeconds != 15 {
			t.Errorf("webhook %s: failurePolicy %s, timeout %d", w.Name, *w.FailurePolicy, *w.TimeoutSeconds)
		}
		for _, r := range w.Rules {
			got = append(got, fmt.Sprintf("%v %v %v %v", r.APIGroups, r.APIVersions, r.Resources, r.Operations))
		}
	}
	want := []string{
		"[] [v1] [pods] [CREATE UPDATE]",
		"[apps] [v1] [daemonsets] [CREATE UPDATE]",
		"[apps] [v1] [deployments] [CREATE UPDATE]",
		"[apps] [v1] [replicasets] [CREATE UPDATE]",
		"[apps] [v1] [statefulsets] [CREATE UPDATE]",
		"[batch] [v1] [cronjobs] [CREATE UPDATE]",
		"[batch] [v1] [jobs] [CREATE UPDATE]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A MutatingPolicy registers on the mutating webhook: the resources of
// its matchConstraints and of its autogen variants (Deployments only,
// as its autogen says), with its failure policy.
func TestBuildMutatingPolicy(t *testing.T) {
	pols := compileAll(t, `apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: mp}
spec:
  failurePolicy: Ignore
  autogen: {podControllers: {controllers: [deployments]}}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [pods]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: "Object{metadata: Object.metadata{labels: {'a': 'b'}}}"}
`)
	mut, val, err := Build(pols, table, Options{URL: "https://127.0.0.1:9443"})
	if err != nil {
		t.Fatal(err)
	}
	if len(val.Webhooks) != 1 {
		t.Errorf("%d validating webhooks, want only the policy webhook", len(val.Webhooks))
	}
	var got []string
	for _, w := range mut.Webhooks {
		if *w.FailurePolicy != "Ignore" {
			t.Errorf("webhook %s: failurePolicy %s", w.Name, *w.FailurePolicy)
		}
		for _, r := range w.Rules {
			got = append(got, fmt.Sprintf("%v %v %v %v", r.APIGroups, r.APIVersions, r.Resources, r.Operations))
		}
	}
	want := []string{
		"[] [v1] [pods] [CREATE]",
		"[apps] [v1] [deployments] [CREATE]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A MutatingPolicy with reinvocationPolicy IfNeeded makes its webhook
// reinvoked when a later mutation changes the object; others stay Never,
// and a tenant's asking never makes another namespace's webhook
// reinvoked.
func TestBuildReinvocation(t *testing.T) {
	mpol := func(kind, ns, name, failurePolicy, reinvocation string) string {
		return `apiVersion: policies.kyverno.io/v1
kind: ` + kind + `
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  failurePolicy: ` + failurePolicy + `
  reinvocationPolicy: ` + reinvocation + `
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration: {expression: "Object{metadata: Object.metadata{labels: {'a': 'b'}}}"}
`
	}
	pols := compileAll(t,
		mpol("MutatingPolicy", "", "again", "Fail", "IfNeeded"),
		mpol("MutatingPolicy", "", "once", "Ignore", "Never"),
		mpol("NamespacedMutatingPolicy", "team-a", "again", "Fail", "IfNeeded"),
		mpol("NamespacedMutatingPolicy", "team-b", "once", "Fail", "Never"),
	)
	mut, _, err := Build(pols, table, Options{URL: "https://127.0.0.1:9443"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, w := range mut.Webhooks {
		got[w.Name] = string(*w.ReinvocationPolicy)
	}
	want := map[string]string{
		"mutate-fail.verdict.dev":           "IfNeeded",
		"mutate-ignore.verdict.dev":         "Never",
		"mutate-fail.team-a.ns.verdict.dev": "IfNeeded",
		"mutate-fail.team-b.ns.verdict.dev": "Never",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("reinvocation policies %v, want %v", got, want)
	}
}

// tenantPolicy is a namespaced Policy in ns on kinds, with a failure
// policy and a webhook timeout.
func tenantPolicy(ns, name, kinds, failurePolicy string, timeout int) string {
	return fmt.Sprintf(`apiVersion: verdict.dev/v1
kind: Policy
metadata: {name: %s, namespace: %s}
spec:
  failurePolicy: %s
  webhookTimeoutSeconds: %d
  rules:
  - name: r
    match: {any: [{resources: {kinds: %s}}]}
    validate: {message: no, deny: {}}
`, name, ns, failurePolicy, timeout, kinds)
}

// tenantHooks returns the validating webhooks that select namespaces
// by name (kubernetes.io/metadata.name In), by their namespaces.
func tenantHooks(t *testing.T, hooks []admissionregistrationv1.ValidatingWebhook) map[string]admissionregistrationv1.ValidatingWebhook {
	t.Helper()
	out := map[string]admissionregistrationv1.ValidatingWebhook{}
	for _, w := range hooks {
		for _, e := range w.NamespaceSelector.MatchExpressions {
			if e.Operator == metav1.LabelSelectorOpIn && e.Key == "kubernetes.io/metadata.name" {
				out[strings.Join(e.Values, ",")] = w
			}
		}
	}
	return out
}

// TestBuildConfinesNamespacedPolicies: a tenant's Policy (kinds ["*"],
// failurePolicy Fail, webhookTimeoutSeconds 30) changes neither the
// shared webhooks' rules nor their timeout: its rules go into a webhook
// of its own that selects its namespace only, for namespaced resources
// only, with its failure policy and its timeout capped. Tenants with
// the same needs share one webhook.
func TestBuildConfinesNamespacedPolicies(t *testing.T) {
	pols := compileAll(t, enforcePods,
		tenantPolicy("team-a", "everything", `["*"]`, "Fail", 30),
		tenantPolicy("team-c", "everything", `["*"]`, "Fail", 30),
		tenantPolicy("team-b", "cms", `[ConfigMap]`, "Ignore", 5),
		tenantPolicy("verdict", "inert", `["*"]`, "Fail", 30),
	)
	_, val, err := Build(pols, table, Options{URL: "https://x", Filter: admissionfilter.New([]string{"verdict"}, nil)})
	if err != nil {
		t.Fatal(err)
	}
	var shared *admissionregistrationv1.ValidatingWebhook
	for i, w := range val.Webhooks {
		if w.Name == "validate-fail.verdict.dev" {
			shared = &val.Webhooks[i]
		}
	}
	if shared == nil {
		t.Fatalf("no shared validate-fail webhook: %v", vnames(val.Webhooks))
	}
	if *shared.TimeoutSeconds != 15 {
		t.Errorf("shared webhook's timeout %d, want the cluster policy's 15", *shared.TimeoutSeconds)
	}
	for _, r := range shared.Rules {
		if r.Resources[0] == "*" || r.Resources[0] == "configmaps" {
			t.Errorf("shared webhook has a tenant's rule %v", r.Rule)
		}
	}
	for _, e := range shared.NamespaceSelector.MatchExpressions {
		if e.Operator != metav1.LabelSelectorOpNotIn {
			t.Errorf("shared webhook selects namespaces %+v", e)
		}
	}
	tenants := tenantHooks(t, val.Webhooks)
	for ns, want := range map[string]struct {
		fail      admissionregistrationv1.FailurePolicyType
		timeout   int32
		resources string
	}{
		"team-a,team-c": {fail: admissionregistrationv1.Fail, timeout: 10, resources: "*"},
		"team-b":        {fail: admissionregistrationv1.Ignore, timeout: 5, resources: "configmaps"},
	} {
		t.Run(ns, func(t *testing.T) {
			w, ok := tenants[ns]
			if !ok {
				t.Fatalf("no webhook for %s among %v", ns, vnames(val.Webhooks))
			}
			if *w.FailurePolicy != want.fail || *w.TimeoutSeconds != want.timeout {
				t.Errorf("failurePolicy %s, timeout %d; want %s, %d", *w.FailurePolicy, *w.TimeoutSeconds, want.fail, want.timeout)
			}
			if len(w.Rules) != 1 || strings.Join(w.Rules[0].Resources, ",") != want.resources || *w.Rules[0].Scope != admissionregistrationv1.NamespacedScope {
				t.Errorf("rules %+v, want %s of namespaced scope", w.Rules, want.resources)
			}
			excluded := false
			for _, e := range w.NamespaceSelector.MatchExpressions {
				excluded = excluded || (e.Operator == metav1.LabelSelectorOpNotIn && slices.Contains(e.Values, "kube-system"))
			}
			if !excluded {
				t.Errorf("namespace selector %+v does not skip the excluded namespaces", w.NamespaceSelector)
			}
			// A tenant's kinds: ["*"] never reaches what the cluster needs
			// to heal itself (Events and Leases are namespaced); a
			// tenant's ConfigMaps cannot, and need no condition.
			switch {
			case want.resources != "*" && len(w.MatchConditions) != 0:
				t.Errorf("match conditions %+v on a webhook of %s", w.MatchConditions, want.resources)
			case want.resources == "*" && (len(w.MatchConditions) != 1 || w.MatchConditions[0].Name != admissionfilter.MatchConditionName ||
				!strings.Contains(w.MatchConditions[0].Expression, `"events"`) || !strings.Contains(w.MatchConditions[0].Expression, `"leases"`)):
				t.Errorf("match conditions %+v do not skip what admissionfilter excludes", w.MatchConditions)
			}
		})
	}
	if len(tenants) != 2 {
		t.Errorf("tenant webhooks for %v; an excluded namespace's policy needs none", slices.Sorted(maps.Keys(tenants)))
	}
}

// TestBuildPointsEachWebhookAtItsPolicies: the shared webhooks call the
// cluster policies' endpoints and a tenant's webhooks its namespace's, so
// that a request in a tenant's namespace, which the API server sends
// through both, has each policy evaluated, its mutation applied and its
// results and work published once; no webhook calls the endpoints that
// evaluate every policy.
func TestBuildPointsEachWebhookAtItsPolicies(t *testing.T) {
	tenantMutate := `apiVersion: verdict.dev/v1
kind: Policy
metadata: {name: add-label, namespace: team}
spec:
  rules:
  - name: m
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    mutate: {patchStrategicMerge: {metadata: {labels: {+(team): "yes"}}}}
`
	pols := compileAll(t, enforcePods, ignoreMutate, tenantPolicy("team", "cms", `[ConfigMap]`, "Fail", 5), tenantMutate)
	mut, val, err := Build(pols, table, Options{URL: "https://x", GuardTTL: true})
	if err != nil {
		t.Fatal(err)
	}
	// Each webhook's URL, and the one it should have, by webhook.
	type hook struct {
		url  *string
		want string
	}
	tests := map[string]hook{}
	for _, w := range mut.Webhooks {
		want := PathMutateCluster
		if strings.HasSuffix(w.Name, ".ns.verdict.dev") {
			want = PathMutateNamespaced
		}
		tests["mutating "+w.Name] = hook{url: w.ClientConfig.URL, want: "https://x" + want}
	}
	for _, w := range val.Webhooks {
		want := PathValidateCluster
		switch {
		case strings.HasSuffix(w.Name, ".ns.verdict.dev"):
			want = PathValidateNamespaced
		case w.Name == "policy.verdict.dev":
			want = PathValidatePolicy
		case w.Name == "ttl.verdict.dev":
			want = PathValidateTTL
		}
		tests["validating "+w.Name] = hook{url: w.ClientConfig.URL, want: "https://x" + want}
	}
	for _, name := range []string{
		"mutating mutate-ignore.verdict.dev", "mutating mutate-fail.team.ns.verdict.dev",
		"validating validate-fail.verdict.dev", "validating validate-ignore.verdict.dev", "validating validate-fail.team.ns.verdict.dev",
	} {
		if _, ok := tests[name]; !ok {
			t.Fatalf("no %s among %v", name, slices.Sorted(maps.Keys(tests)))
		}
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.url == nil || *tc.url != tc.want {
				t.Fatalf("url %v, want %s", tc.url, tc.want)
			}
		})
	}
}

// TestBuildBoundsTenantWebhooks: however many tenants, with however
// many different needs, the configuration holds a bounded number of
// webhooks; each tenant's namespace is still selected with its own
// failure policy and timeout, and no tenant rule reaches a namespace
// that has no namespaced policy.
func TestBuildBoundsTenantWebhooks(t *testing.T) {
	kinds := []string{"Pod", "ConfigMap", "Job", "CronJob", "Deployment", "DaemonSet", "StatefulSet", "ReplicaSet"}
	var docs []string
	for i := range 300 {
		// 2^8 kind sets, two failure policies, timeouts 1 to 30.
		var ks []string
		for b, k := range kinds {
			if i&(1<<b) != 0 {
				ks = append(ks, k)
			}
		}
		if len(ks) == 0 {
			ks = []string{"Pod"}
		}
		fp := []string{"Fail", "Ignore"}[i%2]
		docs = append(docs, tenantPolicy(fmt.Sprintf("tenant-%03d", i), "p", "["+strings.Join(ks, ",")+"]", fp, 1+i%30))
	}
	_, val, err := Build(compileAll(t, docs...), table, Options{URL: "https://x"})
	if err != nil {
		t.Fatal(err)
	}
	if len(val.Webhooks) > MaxNamespacedWebhooks+3 {
		t.Fatalf("%d validating webhooks for 300 tenants, want at most %d", len(val.Webhooks), MaxNamespacedWebhooks+3)
	}
	seen := map[string]bool{}
	for nss, w := range tenantHooks(t, val.Webhooks) {
		for ns := range strings.SplitSeq(nss, ",") {
			var i int
			if _, err := fmt.Sscanf(ns, "tenant-%03d", &i); err != nil {
				t.Fatalf("webhook %s selects %s", w.Name, ns)
			}
			if seen[ns] {
				t.Errorf("%s selected by two webhooks", ns)
			}
			seen[ns] = true
			wantFail := i%2 == 0
			wantTimeout := min(int32(1+i%30), 10)
			if (*w.FailurePolicy == admissionregistrationv1.Fail) != wantFail || *w.TimeoutSeconds != wantTimeout {
				t.Errorf("%s: failurePolicy %s, timeout %d; want fail %v, %d", ns, *w.FailurePolicy, *w.TimeoutSeconds, wantFail, wantTimeout)
			}
		}
	}
	if len(seen) != 300 {
		t.Errorf("%d tenants selected, want 300", len(seen))
	}
}

// PathsOfRelease1 are the paths a webhook of a release before
// WebhookAPI 2 serves (a137295's internal/webhook mux); it answers 404
// to any other.
var PathsOfRelease1 = []string{PathMutate, PathValidate, PathValidatePolicy}

// TestBuildLegacyPaths: while a replica of the earlier release may be
// called, every webhook points at a path it serves; the shared webhooks
// evaluate every policy there, so a tenant's kinds join them (as that
// release registered them) with its timeout still capped, and the TTL
// webhook, whose path it does not serve, is left out.
func TestBuildLegacyPaths(t *testing.T) {
	pols := compileAll(t, enforcePods, ignoreMutate, tenantPolicy("team", "cms", `[ConfigMap]`, "Fail", 30))
	mut, val, err := Build(pols, table, Options{URL: "https://x", GuardTTL: true, LegacyPaths: true})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	check := func(name string, cc admissionregistrationv1.WebhookClientConfig) {
		names = append(names, name)
		if cc.URL == nil || !slices.Contains(PathsOfRelease1, strings.TrimPrefix(*cc.URL, "https://x")) {
			t.Errorf("%s points at %v: not a path of the earlier release %v", name, cc.URL, PathsOfRelease1)
		}
	}
	for _, w := range mut.Webhooks {
		check(w.Name, w.ClientConfig)
	}
	var shared *admissionregistrationv1.ValidatingWebhook
	for i, w := range val.Webhooks {
		check(w.Name, w.ClientConfig)
		if w.Name == "validate-fail.verdict.dev" {
			shared = &val.Webhooks[i]
		}
	}
	slices.Sort(names)
	if want := []string{"mutate-ignore.verdict.dev", "policy.verdict.dev", "validate-fail.verdict.dev", "validate-ignore.verdict.dev"}; !slices.Equal(names, want) {
		t.Fatalf("webhooks %v, want %v (no tenant or TTL webhook)", names, want)
	}
	var configMaps bool
	for _, r := range shared.Rules {
		configMaps = configMaps || slices.Contains(r.Resources, "configmaps")
	}
	if !configMaps {
		t.Error("the tenant's ConfigMaps are not in the shared webhook: its policy goes unenforced during the upgrade")
	}
	if *shared.TimeoutSeconds != 15 {
		t.Errorf("the shared webhook's timeout is %d s, want the cluster policy's 15 (the tenant's 30 capped at %d)", *shared.TimeoutSeconds, MaxNamespacedTimeoutSeconds)
	}
}

// A GeneratingPolicy registers the resources and operations of its
// matchConstraints on the validating webhook; a synchronized one also
// receives their deletes (a deleted trigger takes its downstream along),
// on the Ignore webhook: it only queues work and never denies, so no
// replica being down blocks a deletion. A policy without synchronize
// receives no deletes.
func TestBuildGeneratingPolicy(t *testing.T) {
	gpol := func(name string, sync bool) string {
		return fmt.Sprintf(`apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata: {name: %s}
spec:
  evaluation: {synchronize: {enabled: %t}}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [%s]
  generate: [{expression: "generator.Apply(object.metadata.name, [])"}]
`, name, sync, map[bool]string{true: "namespaces", false: "configmaps"}[sync])
	}
	_, val, err := Build(compileAll(t, gpol("synced", true), gpol("plain", false)), table, Options{URL: "https://127.0.0.1:9443"})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, w := range val.Webhooks {
		if w.Name == "policy.verdict.dev" {
			continue
		}
		for _, r := range w.Rules {
			got = append(got, fmt.Sprintf("%s: %v %v %v %v", *w.FailurePolicy, r.APIGroups, r.APIVersions, r.Resources, r.Operations))
		}
	}
	want := []string{
		"Fail: [] [v1] [configmaps] [CREATE UPDATE]",
		"Fail: [] [v1] [namespaces] [CREATE UPDATE]",
		"Ignore: [] [v1] [namespaces] [DELETE]",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("rules:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// A shadow's configurations can never change an answer: validating
// webhooks only, every one failurePolicy Ignore, for the rules whose
// results are reported; no mutating webhook, no policy-validation or TTL
// webhook.
func TestBuildShadow(t *testing.T) {
	pols := compileAll(t, enforcePods, ignoreMutate, tenantPolicy("team", "t", "[ConfigMap]", "Fail", 5))
	o := Options{URL: "https://x", Shadow: true, GuardTTL: true, API: policycache.KyvernoAPI}
	mut, val, err := Build(pols, table, o)
	if err != nil {
		t.Fatal(err)
	}
	if len(mut.Webhooks) != 0 {
		t.Errorf("a shadow registers mutating webhooks: %v", mut.Webhooks)
	}
	if got, want := vnames(val.Webhooks), []string{"validate-ignore.verdict.dev", "validate-ignore.team.ns.verdict.dev"}; !slices.Equal(got, want) {
		t.Errorf("validating webhooks %v, want %v", got, want)
	}
	for _, w := range val.Webhooks {
		if *w.FailurePolicy != admissionregistrationv1.Ignore {
			t.Errorf("webhook %s fails closed", w.Name)
		}
		for _, r := range w.Rules {
			if slices.Contains(r.Resources, "namespaces") {
				t.Errorf("webhook %s receives the generate rule's Namespaces", w.Name)
			}
		}
	}
}

// Owning Kyverno's kinds, the policy-validation webhook selects them in
// both of Kyverno's groups, at every version Kyverno serves.
func TestBuildPolicyWebhookOfKyvernoAPI(t *testing.T) {
	_, val, err := Build(nil, table, Options{URL: "https://x", API: policycache.KyvernoAPI})
	if err != nil {
		t.Fatal(err)
	}
	var hook *admissionregistrationv1.ValidatingWebhook
	for i := range val.Webhooks {
		if val.Webhooks[i].Name == "policy.verdict.dev" {
			hook = &val.Webhooks[i]
		}
	}
	if hook == nil {
		t.Fatal("no policy-validation webhook")
	}
	got := map[string]string{}
	for _, r := range hook.Rules {
		for _, g := range r.APIGroups {
			got[g] = strings.Join(r.APIVersions, ",") + ": " + strings.Join(r.Resources, ",")
		}
	}
	want := map[string]string{
		"kyverno.io":          "v1,v2,v2beta1: cleanuppolicies,clustercleanuppolicies,clusterpolicies,policies,policyexceptions",
		"policies.kyverno.io": "v1,v1alpha1,v1beta1: deletingpolicies,generatingpolicies,imagevalidatingpolicies,mutatingpolicies,namespaceddeletingpolicies,namespacedgeneratingpolicies,namespacedimagevalidatingpolicies,namespacedmutatingpolicies,namespacedvalidatingpolicies,policyexceptions,validatingpolicies",
	}
	if !maps.Equal(got, want) {
		t.Errorf("policy webhook rules\n got %v\nwant %v", got, want)
	}
}

// TestBuildCandidates (issue 34): a candidate's rules (here Enforce, on
// ConfigMaps, with failurePolicy Fail; a namespaced one on Pods) reach
// the validating webhooks that fail open only, its namespace's for the
// namespaced one, so the admission log records the requests they select
// and nothing of theirs can refuse one; a kind the API server does not
// serve leaves that rule out, not the configurations; a shadow registers
// none of them.
func TestBuildCandidates(t *testing.T) {
	cands := compileAll(t, `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: candidate, annotations: {verdict.dev/candidate: "true"}}
spec:
  failurePolicy: Fail
  validationFailureAction: Enforce
  rules:
  - name: cm
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {message: no, deny: {}}
  - name: widgets
    match: {any: [{resources: {kinds: [Widget]}}]}
    validate: {message: no, deny: {}}
`, tenantPolicy("team", "tenant-candidate", "[Pod]", "Fail", 10))
	mut, val, err := Build(nil, table, Options{URL: "https://x", Candidates: cands})
	if err != nil {
		t.Fatal(err)
	}
	if len(mut.Webhooks) != 0 {
		t.Fatalf("mutating webhooks for candidates: %v", mut.Webhooks)
	}
	var shared *admissionregistrationv1.ValidatingWebhook
	for i, w := range val.Webhooks {
		if *w.FailurePolicy == admissionregistrationv1.Fail && strings.HasPrefix(w.Name, "validate-") && w.Name != "validate-policy.verdict.dev" {
			for _, r := range w.Rules {
				if slices.Contains(r.Resources, "configmaps") || slices.Contains(r.Resources, "pods") {
					t.Errorf("webhook %s fails closed on a candidate's kinds: %v", w.Name, r.Resources)
				}
			}
		}
		if w.Name == "validate-ignore.verdict.dev" {
			shared = &val.Webhooks[i]
		}
	}
	if shared == nil || len(shared.Rules) != 1 || !slices.Equal(shared.Rules[0].Resources, []string{"configmaps"}) {
		t.Fatalf("the shared webhook failing open: %+v (webhooks %v)", shared, vnames(val.Webhooks))
	}
	tenant, ok := tenantHooks(t, val.Webhooks)["team"]
	if !ok || *tenant.FailurePolicy != admissionregistrationv1.Ignore || !slices.Contains(tenant.Rules[0].Resources, "pods") {
		t.Fatalf("team's webhook: %+v", tenant)
	}
	_, val, err = Build(nil, table, Options{URL: "https://x", Candidates: cands, Shadow: true})
	if err != nil || len(val.Webhooks) != 0 {
		t.Fatalf("a shadow's webhooks for candidates: %v, %v", vnames(val.Webhooks), err)
	}
}
