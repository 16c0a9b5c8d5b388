package engine_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// fuzzPolicy builds a namespaced Policy of six rules from fuzz input: a
// validate pattern (value and anyPattern), a context entry with deny
// conditions, a foreach with its own context and condition, a
// conditional anchor over the same value, match and exclude blocks with
// the pattern value as an annotation's and a name's wildcard, and a
// mutate patch whose conditional anchor holds the pattern value.
func fuzzPolicy(patternValue, expr, condKey, condOp, condValue, list string) ([]byte, error) {
	deny := func(key, value any) map[string]any {
		return map[string]any{"conditions": map[string]any{"any": []any{map[string]any{"key": key, "operator": condOp, "value": value}}}}
	}
	match := map[string]any{"any": []any{map[string]any{"resources": map[string]any{"kinds": []any{"ConfigMap"}}}}}
	rules := []any{
		map[string]any{"name": "pattern", "match": match, "validate": map[string]any{
			"pattern": map[string]any{"data": map[string]any{"blob": patternValue}},
			"message": "{{ request.object.metadata.name }}",
		}},
		map[string]any{"name": "any-pattern", "match": match, "validate": map[string]any{
			"anyPattern": []any{
				map[string]any{"data": map[string]any{"(blob)": patternValue, "other": "?*"}},
				map[string]any{"data": map[string]any{"=(list)": patternValue}},
			},
		}},
		map[string]any{"name": "context", "match": match,
			"context":  []any{map[string]any{"name": "v", "variable": map[string]any{"jmesPath": expr}}},
			"validate": map[string]any{"deny": deny("{{ v }}", condValue)},
		},
		map[string]any{"name": "foreach", "match": match, "validate": map[string]any{"foreach": []any{map[string]any{
			"list":    list,
			"context": []any{map[string]any{"name": "w", "variable": map[string]any{"jmesPath": expr}}},
			"deny":    deny(condKey, condValue),
		}}}},
		map[string]any{"name": "match",
			"match":    map[string]any{"any": []any{map[string]any{"resources": map[string]any{"kinds": []any{"ConfigMap"}, "annotations": map[string]any{"blob": patternValue}}}}},
			"exclude":  map[string]any{"any": []any{map[string]any{"resources": map[string]any{"names": []any{patternValue}}}}},
			"validate": map[string]any{"pattern": map[string]any{"metadata": map[string]any{"name": "?*"}}},
		},
		map[string]any{"name": "mutate", "match": match, "mutate": map[string]any{
			"patchStrategicMerge": map[string]any{"data": map[string]any{"(blob)": patternValue, "mutated": "yes"}},
		}},
	}
	return json.Marshal(map[string]any{
		"apiVersion": "kyverno.io/v1",
		"kind":       "Policy",
		"metadata":   map[string]any{"name": "fuzz", "namespace": "tenant"},
		"spec":       map[string]any{"validationFailureAction": "Enforce", "rules": rules},
	})
}

// FuzzPolicyBudget builds whole policies from fuzz input (validate
// patterns, anyPattern and anchors, deny conditions of any operator,
// JMESPath context entries, foreach) and applies them to a ConfigMap under
// small limits: an evaluation never panics and returns within its bounds
// (checked on a generous clock: the limits below take milliseconds), and a
// rule the engine stopped is an error, never a pass, a failure or a skip.
func FuzzPolicyBudget(f *testing.F) {
	seeds := [][7]string{
		{"*" + strings.Repeat("x", 200) + "y", "split(pad_left('', `40`, ','), ',')[*].pad_left('a', `16000000`, 'x')", "{{ element }}", "AnyIn", "[\"a*\"]", "request.object.data | keys(@)", strings.Repeat("x", 2000)},
		{"*x?x?x?y*", "length(request.object.data.blob)", "{{ request.object.data.blob }}", "Equals", "*x?x?y*", "request.object.data.list", strings.Repeat("x", 5000)},
		{"a|b|>=3&<=5|1-10", "to_string(request.object)", "{{ w }}", "NotEquals", "{{ v }}", "split(request.object.data.blob, '')", "abc"},
		{"?*", "items(request.object.data, 'k', 'v')", "{{ element.k }}", "AllNotIn", "[\"x\", \"y*\"]", "items(request.object.data, 'k', 'v')", "value"},
		{"!*", "join('', [request.object.data.blob, request.object.data.blob])", "1Gi", "GreaterThan", "512Mi", "[`1`, `2`]", "1Gi"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], s[6])
	}
	eng, err := engine.New(
		engine.WithWorkBudget(20_000),
		engine.WithMaxExpressionSteps(20_000),
		engine.WithMemoryBudget(4<<20),
		engine.WithMaxForEachElements(1_000),
	)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, patternValue, expr, condKey, condOp, condValue, list, blob string) {
		doc, err := fuzzPolicy(patternValue, expr, condKey, condOp, condValue, list)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := policy.Parse(doc, "fuzz")
		if err != nil || len(docs.Policies) != 1 {
			return
		}
		p, err := eng.Compile(docs.Policies[0])
		if err != nil {
			return
		}
		cm := blobConfigMap(blob, map[string]any{"other": "o", "list": "[\"" + blob + "\"]"})
		cm["metadata"].(map[string]any)["annotations"] = map[string]any{"blob": blob}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
		defer cancel()
		req := &engine.Request{Operation: engine.OpCreate, Object: cm}
		res := applyWithin(t, ctx, eng, &engine.Set{Policies: []*engine.Policy{p}}, req, 30*time.Second)
		t.Logf("%d rules in %s", len(res.rules), res.took)
		for name, rr := range res.rules {
			if strings.HasPrefix(rr.Message, engine.StoppedPrefix) && rr.Status != engine.StatusError {
				t.Errorf("%s: stopped with status %s: %q", name, rr.Status, rr.Message)
			}
		}
	})
}
