package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
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
