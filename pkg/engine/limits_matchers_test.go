package engine_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// tenantPolicy is a namespaced Policy of one rule on ConfigMaps, written
// as JSON (a YAML document) so that long patterns need no escaping.
func tenantPolicy(t *testing.T, rule map[string]any) string {
	t.Helper()
	rule["name"] = "attack"
	rule["match"] = map[string]any{"any": []any{map[string]any{"resources": map[string]any{"kinds": []any{"ConfigMap"}}}}}
	p := map[string]any{
		"apiVersion": "kyverno.io/v1",
		"kind":       "Policy",
		"metadata":   map[string]any{"name": "tenant-policy", "namespace": "tenant"},
		"spec":       map[string]any{"validationFailureAction": "Enforce", "rules": []any{rule}},
	}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// blobConfigMap is a ConfigMap in the tenant's namespace holding blob.
func blobConfigMap(blob string, extra map[string]any) map[string]any {
	data := map[string]any{"blob": blob}
	for k, v := range extra {
		data[k] = v
	}
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": "big", "namespace": "tenant"},
		"data":       data,
	}
}

func validatePattern(p any) map[string]any {
	return map[string]any{"validate": map[string]any{"pattern": map[string]any{"data": p}}}
}

func denyWhen(key any, op string, value any) map[string]any {
	return map[string]any{"validate": map[string]any{"deny": map[string]any{"conditions": map[string]any{
		"any": []any{map[string]any{"key": key, "operator": op, "value": value}},
	}}}}
}

// TestBoundedMatchers is finding 4 of issue 28: a tenant's namespaced
// Policy with a validate pattern of one `*` and 40,000 characters against
// a 500 KB ConfigMap held a core for minutes in the wildcard matcher,
// which never looked at the deadline. Every matcher a policy reaches is
// now linear in its input (the `*` and 40,000 characters: a millisecond)
// or charged to the work budget before it runs (a `?` between two `*`,
// set operators between long lists), so each case answers, right or
// stopped, well within the bound of applyWithin.
func TestBoundedMatchers(t *testing.T) {
	blob := strings.Repeat("x", 500_000)
	long := "*" + strings.Repeat("x", 39_999) + "y"
	longMatching := "*" + strings.Repeat("x", 40_000)
	questions := "*" + strings.Repeat("x?", 20_000) + "y*"
	budgetSpent := "evaluation stopped: limit exceeded: work budget of 1000000 steps spent"
	manyKeys := make([]any, 20_000)
	manyValues := make([]any, 20_000)
	for i := range manyKeys {
		manyKeys[i] = strings.Repeat("k", 20) + "-" + string(rune('a'+i%26))
		manyValues[i] = "*" + strings.Repeat("v", 20) + "?*"
	}
	tests := map[string]struct {
		rule   map[string]any
		extra  map[string]any
		status engine.Status
		prefix string
	}{
		"pattern: one star and 40,000 characters": {
			rule:   validatePattern(map[string]any{"blob": long}),
			status: engine.StatusFail,
			prefix: "validation error: rule attack failed at path /data/blob/",
		},
		"pattern: one star and 40,000 characters that match": {
			rule:   validatePattern(map[string]any{"blob": longMatching}),
			status: engine.StatusPass,
		},
		"pattern: 40,000 characters between two stars": {
			rule:   validatePattern(map[string]any{"blob": long + "*"}),
			status: engine.StatusFail,
			prefix: "validation error: rule attack failed at path /data/blob/",
		},
		"pattern: 3,000 alternatives, each read against 500 KB": {
			rule:   validatePattern(map[string]any{"blob": strings.Repeat(long[:199]+"y|", 3_000) + "y"}),
			status: engine.StatusError,
			prefix: budgetSpent,
		},
		"pattern: a ? between two stars": {
			rule:   validatePattern(map[string]any{"blob": questions}),
			status: engine.StatusError,
			prefix: budgetSpent,
		},
		"pattern: a ? between two stars under a conditional anchor": {
			rule:   validatePattern(map[string]any{"(blob)": questions, "other": "x"}),
			status: engine.StatusError,
			prefix: budgetSpent,
		},
		"deny: Equals one star and 40,000 characters": {
			rule:   denyWhen("{{ request.object.data.blob }}", "Equals", long),
			status: engine.StatusPass,
		},
		"deny: Equals a ? between two stars": {
			rule:   denyWhen("{{ request.object.data.blob }}", "Equals", questions),
			status: engine.StatusError,
			prefix: budgetSpent,
		},
		"deny: AnyIn between two lists of 20,000 wildcards": {
			rule:   denyWhen(manyKeys, "AnyIn", manyValues),
			status: engine.StatusError,
			prefix: budgetSpent,
		},
		"deny: AnyIn a short list": {
			rule:   denyWhen(manyKeys[:10], "AnyIn", []any{"*-z"}),
			status: engine.StatusPass,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			eng := newEngine(t)
			set := &engine.Set{Policies: []*engine.Policy{compile(t, eng, tenantPolicy(t, tc.rule))}}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			req := &engine.Request{Operation: engine.OpCreate, Object: blobConfigMap(blob, tc.extra)}
			res := applyWithin(t, ctx, eng, set, req, 15*time.Second)
			t.Logf("took %s", res.took)
			rr, ok := res.rules["tenant-policy/attack"]
			if !ok {
				t.Fatalf("no result: %v", res.rules)
			}
			if rr.Status != tc.status || !strings.HasPrefix(rr.Message, tc.prefix) {
				t.Errorf("%s %.200q, want %s %q...", rr.Status, rr.Message, tc.status, tc.prefix)
			}
		})
	}
}

// matchPolicy is a policy of one rule whose match (and exclude, when
// set) block is given, validating that the resource has a name: a
// ClusterPolicy when namespace is empty, else a namespaced Policy. It is
// read as the cluster's informers read it (a long key is no YAML).
func matchPolicy(t *testing.T, eng *engine.Engine, namespace string, rule map[string]any) *engine.Policy {
	t.Helper()
	rule["name"] = "attack"
	if rule["validate"] == nil && rule["mutate"] == nil {
		rule["validate"] = map[string]any{"pattern": map[string]any{"metadata": map[string]any{"name": "?*"}}}
	}
	meta := map[string]any{"name": "tenant-policy"}
	kind := "ClusterPolicy"
	if namespace != "" {
		meta["namespace"], kind = namespace, "Policy"
	}
	pol, err := policy.PolicyFromObject(map[string]any{
		"apiVersion": "kyverno.io/v1",
		"kind":       kind,
		"metadata":   meta,
		"spec":       map[string]any{"validationFailureAction": "Enforce", "rules": []any{rule}},
	})
	if err != nil {
		t.Fatal(err)
	}
	p, err := eng.Compile(pol)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// resources is a match block's any list of one resource description.
func resources(rd map[string]any) map[string]any {
	if rd["kinds"] == nil {
		rd["kinds"] = []any{"ConfigMap"}
	}
	return map[string]any{"any": []any{map[string]any{"resources": rd}}}
}

// userBlock is a match block's any list of one filter with user info.
func userBlock(ui map[string]any) map[string]any {
	ui["resources"] = map[string]any{"kinds": []any{"ConfigMap"}}
	return map[string]any{"any": []any{ui}}
}

// annotatedMap is a small ConfigMap in namespace whose metadata also
// holds meta.
func annotatedMap(namespace string, meta map[string]any) map[string]any {
	m := map[string]any{"name": "big", "namespace": namespace}
	for k, v := range meta {
		m[k] = v
	}
	return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": m, "data": map[string]any{"k": "v"}}
}

// TestBoundedMatchBlocks is finding 4 of issue 28 where a rule is
// selected: a tenant's wildcard with a `?` between two `*` (40,000
// characters) against a 256 KB annotation value, label, name or user
// took the matcher O(pattern x value) before any rule ran, the work
// budget never asked. Every wildcard of match and exclude blocks,
// exceptions, failure action overrides, podSecurity exclusions and
// mutate targets is now charged (wildcard.Cost) before it runs: the
// rule stops with the budget's error, and a short wildcard still
// matches as before.
func TestBoundedMatchBlocks(t *testing.T) {
	long := strings.Repeat("x", 256<<10)
	questions := "*" + strings.Repeat("x?", 20_000) + "y*"
	short := "*x?x*"
	budgetSpent := "evaluation stopped: limit exceeded: work budget of 1000000 steps spent"
	tenantMap := annotatedMap("tenant", map[string]any{"annotations": map[string]any{"big": long}, "labels": map[string]any{"app": long}})
	longUser := engine.UserInfo{Username: long, Groups: []string{long}, ClusterRoles: []string{long}, Roles: []string{long}}
	exception := func(match map[string]any) *policy.Exception {
		ex, err := policy.ExceptionFromObject(map[string]any{
			"apiVersion": "kyverno.io/v2", "kind": "PolicyException",
			"metadata": map[string]any{"name": "exc", "namespace": "tenant"},
			"spec":     map[string]any{"exceptions": []any{map[string]any{"policyName": "tenant-policy", "ruleNames": []any{"attack"}}}, "match": match},
		})
		if err != nil {
			t.Fatal(err)
		}
		return ex
	}
	privileged := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "tenant"},
		"spec": map[string]any{"containers": []any{map[string]any{
			"name": "c", "image": long, "securityContext": map[string]any{"privileged": true},
		}}},
	}
	podSecurity := func(images ...any) map[string]any {
		return map[string]any{
			"match":    resources(map[string]any{"kinds": []any{"Pod"}}),
			"validate": map[string]any{"podSecurity": map[string]any{"level": "baseline", "exclude": []any{map[string]any{"controlName": "Privileged Containers", "images": images}}}},
		}
	}
	targets := objects{annotatedMap("tenant", map[string]any{"name": long})}
	mutateTargets := func(name string) map[string]any {
		return map[string]any{
			"match": resources(map[string]any{}),
			"mutate": map[string]any{
				"targets":             []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": name}},
				"patchStrategicMerge": map[string]any{"metadata": map[string]any{"labels": map[string]any{"seen": "yes"}}},
			},
		}
	}
	tests := map[string]struct {
		namespace  string
		rule       map[string]any
		exceptions []*policy.Exception
		object     map[string]any
		user       engine.UserInfo
		existing   bool
		status     engine.Status
		prefix     string
	}{
		"match: annotation value": {
			rule: map[string]any{"match": resources(map[string]any{"annotations": map[string]any{"big": questions}})},
		},
		"match: annotation value, short": {
			rule:   map[string]any{"match": resources(map[string]any{"annotations": map[string]any{"big": short}})},
			status: engine.StatusPass,
		},
		"match: annotation key": {
			rule:   map[string]any{"match": resources(map[string]any{"annotations": map[string]any{questions: "*"}})},
			object: annotatedMap("tenant", map[string]any{"annotations": map[string]any{long: "v"}}),
		},
		"exclude: annotation value": {
			rule: map[string]any{"match": resources(map[string]any{}), "exclude": resources(map[string]any{"annotations": map[string]any{"big": questions}})},
		},
		"match: label selector": {
			rule: map[string]any{"match": resources(map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"app": questions}}})},
		},
		"match: label selector with a wildcard key": {
			rule: map[string]any{"match": resources(map[string]any{"selector": map[string]any{"matchLabels": map[string]any{"a*": questions}}})},
		},
		"match: names": {
			rule:   map[string]any{"match": resources(map[string]any{"names": []any{questions}})},
			object: annotatedMap("tenant", map[string]any{"name": long}),
		},
		"match: user": {
			rule: map[string]any{"match": userBlock(map[string]any{"subjects": []any{map[string]any{"kind": "User", "name": questions}}})},
			user: longUser,
		},
		"match: group": {
			rule: map[string]any{"match": userBlock(map[string]any{"subjects": []any{map[string]any{"kind": "Group", "name": questions}}})},
			user: longUser,
		},
		"match: cluster role": {
			rule: map[string]any{"match": userBlock(map[string]any{"clusterRoles": []any{questions}})},
			user: longUser,
		},
		"exclude: role": {
			rule: map[string]any{"match": resources(map[string]any{}), "exclude": userBlock(map[string]any{"roles": []any{questions}})},
			user: longUser,
		},
		"exception: annotation value": {
			rule:       map[string]any{"match": resources(map[string]any{})},
			exceptions: []*policy.Exception{exception(resources(map[string]any{"annotations": map[string]any{"big": questions}}))},
		},
		"failure action override: namespaces": {
			namespace: "-",
			rule: map[string]any{
				"match":    resources(map[string]any{}),
				"validate": map[string]any{"failureActionOverrides": []any{map[string]any{"action": "Audit", "namespaces": []any{questions}}}, "pattern": map[string]any{"metadata": map[string]any{"name": "?*"}}},
			},
			object: annotatedMap(long, nil),
		},
		"podSecurity: excluded images": {
			rule:   podSecurity(questions),
			object: privileged,
		},
		"podSecurity: excluded images, short": {
			rule:   podSecurity(short),
			object: privileged,
			status: engine.StatusPass,
		},
		"mutate targets: name": {
			rule:     mutateTargets(questions),
			existing: true,
		},
		"mutate targets: name, short": {
			rule:     mutateTargets(short),
			existing: true,
			status:   engine.StatusPass,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.status == "" {
				tc.status, tc.prefix = engine.StatusError, budgetSpent
			}
			ns := tc.namespace
			switch ns {
			case "":
				ns = "tenant"
			case "-":
				ns = ""
			}
			if tc.object == nil {
				tc.object = tenantMap
			}
			eng := newEngine(t, engine.WithResourceLister(targets))
			p := matchPolicy(t, eng, ns, tc.rule)
			set := &engine.Set{Policies: []*engine.Policy{p}, Exceptions: tc.exceptions}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			req := &engine.Request{Operation: engine.OpCreate, Object: tc.object, UserInfo: tc.user}
			var rr engine.RuleResponse
			if tc.existing {
				done := make(chan engine.Response, 1)
				go func() { done <- eng.MutateExisting(ctx, req, p, nil) }()
				select {
				case resp := <-done:
					if len(resp.Rules) != 1 {
						t.Fatalf("rules: %+v", resp.Rules)
					}
					rr = resp.Rules[0]
				case <-time.After(15 * time.Second):
					t.Fatal("evaluation still running after 15s")
				}
			} else {
				res := applyWithin(t, ctx, eng, set, req, 15*time.Second)
				t.Logf("took %s", res.took)
				var ok bool
				if rr, ok = res.rules["tenant-policy/attack"]; !ok {
					t.Fatalf("no result: %v", res.rules)
				}
			}
			if rr.Status != tc.status || !strings.HasPrefix(rr.Message, tc.prefix) {
				t.Errorf("%s %.200q, want %s %q...", rr.Status, rr.Message, tc.status, tc.prefix)
			}
		})
	}
}

// TestBoundedCleanupMatch: a tenant's CleanupPolicy whose match or
// exclude block holds the attack's wildcard, judged against a ConfigMap
// with a 256 KB annotation, answers the budget's error (the resource is
// kept) instead of holding the cleaner for the quadratic match.
func TestBoundedCleanupMatch(t *testing.T) {
	questions := "*" + strings.Repeat("x?", 20_000) + "y*"
	cm := annotatedMap("tenant", map[string]any{"annotations": map[string]any{"big": strings.Repeat("x", 256<<10)}})
	annotations := map[string]any{"annotations": map[string]any{"big": questions}}
	tests := map[string]map[string]any{
		"match":   {"match": resources(annotations)},
		"exclude": {"match": resources(map[string]any{}), "exclude": resources(annotations)},
	}
	for name, spec := range tests {
		t.Run(name, func(t *testing.T) {
			eng := newEngine(t)
			spec["schedule"] = "*/5 * * * *"
			raw, err := policy.CleanupPolicyFromObject(map[string]any{
				"apiVersion": "kyverno.io/v2", "kind": "CleanupPolicy",
				"metadata": map[string]any{"name": "c", "namespace": "tenant"},
				"spec":     spec,
			})
			if err != nil {
				t.Fatal(err)
			}
			p, err := eng.CompileCleanup(raw)
			if err != nil {
				t.Fatal(err)
			}
			run, err := eng.StartCleanup(t.Context(), p)
			if err != nil {
				t.Fatal(err)
			}
			type result struct {
				d   engine.CleanupDecision
				err error
			}
			done := make(chan result, 1)
			go func() {
				d, err := run.Decide(t.Context(), cm, nil)
				done <- result{d, err}
			}()
			select {
			case r := <-done:
				if r.d.Delete || !errors.Is(r.err, engine.ErrLimitExceeded) {
					t.Errorf("Decide = %+v, %v; want the work budget's error", r.d, r.err)
				}
			case <-time.After(15 * time.Second):
				t.Fatal("Decide still running after 15s")
			}
		})
	}
}

// mutateRule is a mutate rule on ConfigMaps with the given
// patchStrategicMerge overlay, or a foreach over the ConfigMap's keys
// applying it.
func mutateRule(overlay map[string]any, foreach bool) map[string]any {
	mutate := map[string]any{"patchStrategicMerge": overlay}
	if foreach {
		mutate = map[string]any{"foreach": []any{map[string]any{"list": "request.object.data | keys(@)", "patchStrategicMerge": overlay}}}
	}
	return map[string]any{"match": resources(map[string]any{"kinds": []any{"ConfigMap", "Pod"}}), "mutate": mutate}
}

// TestBoundedMutateAnchors is finding 4 of issue 28 in mutate patches:
// a conditional `(key)` or global `<(key)` anchor of a
// patchStrategicMerge, in a rule or a foreach, compared its value to the
// resource's with the wildcard matcher and no meter, so the attack's
// wildcard against a 500 KB value held a core for minutes. The anchors'
// comparisons (pattern.ValueCost), their walk over list elements and
// the metadata wildcards they expand are now charged to the request's
// work budget; a short anchor patches as before. The merge itself paired
// the elements of every associative list of the resource by scanning
// them: an ordinary patch on a Pod of 20,000 env entries ran past 15 s,
// and now takes a fraction of a second.
func TestBoundedMutateAnchors(t *testing.T) {
	blob := strings.Repeat("x", 500_000)
	questions := "*" + strings.Repeat("x?", 20_000) + "y*"
	budgetSpent := "evaluation stopped: limit exceeded: work budget of 1000000 steps spent"
	label := map[string]any{"metadata": map[string]any{"labels": map[string]any{"seen": "yes"}}}
	withLabel := func(m map[string]any) map[string]any {
		m["metadata"] = label["metadata"]
		return m
	}
	pod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "tenant"},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": blob}}},
	}
	env := make([]any, 20_000)
	for i := range env {
		env[i] = map[string]any{"name": fmt.Sprintf("E%d", i), "value": "v"}
	}
	envPod := map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "tenant"},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "nginx", "env": env}}},
	}
	nested := blobConfigMap("small", nil)
	nested["spec"] = map[string]any{"metadata": map[string]any{"annotations": map[string]any{blob: "v"}}}
	tests := map[string]struct {
		rule   map[string]any
		object map[string]any
		status engine.Status
		prefix string
	}{
		"conditional anchor": {
			rule: mutateRule(withLabel(map[string]any{"data": map[string]any{"(blob)": questions}}), false),
		},
		"conditional anchor, short": {
			rule:   mutateRule(withLabel(map[string]any{"data": map[string]any{"(blob)": "*x?x*"}}), false),
			status: engine.StatusPass,
		},
		"global anchor": {
			rule: mutateRule(withLabel(map[string]any{"data": map[string]any{"<(blob)": questions}}), false),
		},
		"conditional anchor in a foreach": {
			rule: mutateRule(withLabel(map[string]any{"data": map[string]any{"(blob)": questions}}), true),
		},
		"conditional anchor on list elements": {
			rule:   mutateRule(map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"(image)": questions, "imagePullPolicy": "Always"}}}}, false),
			object: pod,
		},
		"conditional anchor on list elements, short": {
			rule:   mutateRule(map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"(image)": "*x?x*", "imagePullPolicy": "Always"}}}}, false),
			object: pod,
			status: engine.StatusPass,
		},
		"a plain patch on a Pod of 20,000 env entries": {
			rule:   mutateRule(withLabel(map[string]any{}), false),
			object: envPod,
			status: engine.StatusPass,
		},
		"metadata wildcard under an anchor": {
			rule:   mutateRule(withLabel(map[string]any{"(spec)": map[string]any{"metadata": map[string]any{"annotations": map[string]any{questions: "?*"}}}}), false),
			object: nested,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tc.status == "" {
				tc.status, tc.prefix = engine.StatusError, budgetSpent
			}
			if tc.object == nil {
				tc.object = blobConfigMap(blob, nil)
			}
			eng := newEngine(t)
			set := &engine.Set{Policies: []*engine.Policy{matchPolicy(t, eng, "tenant", tc.rule)}}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			req := &engine.Request{Operation: engine.OpCreate, Object: tc.object}
			res := applyWithin(t, ctx, eng, set, req, 15*time.Second)
			t.Logf("took %s", res.took)
			rr, ok := res.rules["tenant-policy/attack"]
			if !ok {
				t.Fatalf("no result: %v", res.rules)
			}
			if rr.Status != tc.status || !strings.HasPrefix(rr.Message, tc.prefix) {
				t.Errorf("%s %.200q, want %s %q...", rr.Status, rr.Message, tc.status, tc.prefix)
			}
		})
	}
}

// TestBoundedForEachPatches: a foreach patching each container walks the
// whole Pod for each, and a step was counted per element only, so an
// ordinary "set imagePullPolicy on every container" policy took over two
// minutes on a tenant's Pod of 5,000 containers. Each patch now charges
// the resource it walks (patch.StrategicMergeMetered's nodes,
// patch.JSON6902Metered's bytes): the rule stops with the work budget's
// error in about a second, and a Pod of ordinary size is patched as
// before.
func TestBoundedForEachPatches(t *testing.T) {
	pod := func(n int) map[string]any {
		cs := make([]any, n)
		for i := range cs {
			cs[i] = map[string]any{"name": fmt.Sprintf("c%d", i), "image": "nginx"}
		}
		return map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "p", "namespace": "tenant"},
			"spec":     map[string]any{"containers": cs},
		}
	}
	strategic := map[string]any{"spec": map[string]any{"containers": []any{map[string]any{"name": "{{ element.name }}", "imagePullPolicy": "Always"}}}}
	jsonPatch := `[{"op": "add", "path": "/spec/containers/{{ elementIndex }}/imagePullPolicy", "value": "Always"}]`
	foreach := func(patch string, v any) map[string]any {
		return map[string]any{
			"match":  resources(map[string]any{"kinds": []any{"Pod"}}),
			"mutate": map[string]any{"foreach": []any{map[string]any{"list": "request.object.spec.containers", patch: v}}},
		}
	}
	budgetSpent := "evaluation stopped: limit exceeded: work budget of 1000000 steps spent"
	tests := map[string]struct {
		rule   map[string]any
		pod    map[string]any
		status engine.Status
		prefix string
	}{
		"strategic merge per container of 5,000": {rule: foreach("patchStrategicMerge", strategic), pod: pod(5_000), status: engine.StatusError, prefix: budgetSpent},
		"JSON patch per container of 5,000":      {rule: foreach("patchesJson6902", jsonPatch), pod: pod(5_000), status: engine.StatusError, prefix: budgetSpent},
		"strategic merge per container of 20":    {rule: foreach("patchStrategicMerge", strategic), pod: pod(20), status: engine.StatusPass},
		"JSON patch per container of 20":         {rule: foreach("patchesJson6902", jsonPatch), pod: pod(20), status: engine.StatusPass},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			eng := newEngine(t)
			set := &engine.Set{Policies: []*engine.Policy{matchPolicy(t, eng, "tenant", tc.rule)}}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			res := applyWithin(t, ctx, eng, set, &engine.Request{Operation: engine.OpCreate, Object: tc.pod}, 15*time.Second)
			t.Logf("took %s", res.took)
			rr, ok := res.rules["tenant-policy/attack"]
			if !ok {
				t.Fatalf("no result: %v", res.rules)
			}
			if rr.Status != tc.status || !strings.HasPrefix(rr.Message, tc.prefix) {
				t.Errorf("%s %.200q, want %s %q...", rr.Status, rr.Message, tc.status, tc.prefix)
			}
		})
	}
}
