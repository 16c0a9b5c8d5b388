package engine_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// memoryBomb is finding 5 of issue 28: forty strings of 16 MB in one
// context entry, each within JMESPath's bound on one string; the webhook's
// RSS reached 1.34 GB on one review of an ordinary ConfigMap.
const memoryBomb = "split(pad_left('', `40`, ','), ',')[*].pad_left('a', `16000000`, 'x')"

func contextEntry(jmesPath string) map[string]any {
	return map[string]any{
		"context": []any{map[string]any{"name": "big", "variable": map[string]any{"jmesPath": jmesPath}}},
		"validate": map[string]any{"deny": map[string]any{"conditions": map[string]any{
			"any": []any{map[string]any{"key": "{{ length(big) }}", "operator": "Equals", "value": -1}},
		}}},
	}
}

func foreachEntry(jmesPath string) map[string]any {
	return map[string]any{"validate": map[string]any{"foreach": []any{map[string]any{
		"list":    "request.object.data | keys(@)",
		"context": []any{map[string]any{"name": "big", "variable": map[string]any{"jmesPath": jmesPath}}},
		"deny": map[string]any{"conditions": map[string]any{
			"any": []any{map[string]any{"key": "{{ length(big) }}", "operator": "Equals", "value": -1}},
		}},
	}}}}
}

// TestMemoryBudget evaluates the bomb, and its spread over a foreach and
// over a rule's conditions, in a tenant's namespaced Policy: each stops
// its rule with the memory budget's error having allocated about the
// budget, where it allocated 640 MB and more before. A rule's budget
// starts afresh for the next rule.
func TestMemoryBudget(t *testing.T) {
	spent := "evaluation stopped: limit exceeded: memory budget of 67108864 bytes spent: "
	tests := map[string]struct {
		rule     map[string]any
		opts     []engine.Option
		status   engine.Status
		prefix   string
		maxAlloc uint64
	}{
		"the bomb in a context entry": {
			rule: contextEntry(memoryBomb), status: engine.StatusError, prefix: spent, maxAlloc: 2 * engine.DefaultMemoryBudget,
		},
		"the bomb under a smaller budget": {
			rule: contextEntry(memoryBomb), opts: []engine.Option{engine.WithMemoryBudget(1 << 20)},
			status: engine.StatusError, prefix: "evaluation stopped: limit exceeded: memory budget of 1048576 bytes spent: ", maxAlloc: 16 << 20,
		},
		"one string of 10 MB per foreach element": {
			rule: foreachEntry("pad_left('a', `10000000`, 'x')"), status: engine.StatusError, prefix: spent, maxAlloc: 2 * engine.DefaultMemoryBudget,
		},
		"strings of 10 MB in deny conditions": {
			rule: map[string]any{"validate": map[string]any{"deny": map[string]any{"conditions": map[string]any{
				"all": []any{
					map[string]any{"key": "{{ length(pad_left('a', `10000000`, 'x')) }}", "operator": "Equals", "value": 10_000_000},
					map[string]any{"key": "{{ length(pad_left('a', `10000000`, 'y')) }}", "operator": "Equals", "value": 10_000_000},
					map[string]any{"key": "{{ length(pad_left('a', `10000000`, 'z')) }}", "operator": "Equals", "value": 10_000_000},
					map[string]any{"key": "{{ length(pad_left('a', `10000000`, 'w')) }}", "operator": "Equals", "value": 10_000_000},
				},
			}}}},
			status: engine.StatusError, prefix: spent, maxAlloc: 2 * engine.DefaultMemoryBudget,
		},
		"within the budget": {
			rule: contextEntry("split(pad_left('', `40`, ','), ',')[*].pad_left('a', `100000`, 'x')"), status: engine.StatusPass, maxAlloc: 32 << 20,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			eng := newEngine(t, tc.opts...)
			set := &engine.Set{Policies: []*engine.Policy{compile(t, eng, tenantPolicy(t, tc.rule))}}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			req := &engine.Request{Operation: engine.OpCreate, Object: blobConfigMap("small", map[string]any{"a": "1", "b": "2", "c": "3", "d": "4", "e": "5"})}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			resps, _ := eng.Apply(ctx, req, set)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %d MiB", alloc>>20)
			if alloc > tc.maxAlloc {
				t.Errorf("allocated %d MiB, want at most %d MiB", alloc>>20, tc.maxAlloc>>20)
			}
			if len(resps) != 1 || len(resps[0].Rules) != 1 {
				t.Fatalf("responses: %+v", resps)
			}
			rr := resps[0].Rules[0]
			if rr.Status != tc.status || !strings.HasPrefix(rr.Message, tc.prefix) {
				t.Errorf("%s %.300q, want %s %q...", rr.Status, rr.Message, tc.status, tc.prefix)
			}
		})
	}
}

// TestMemoryBudgetPerRule runs two rules that each allocate most of the
// budget: the second has its own.
func TestMemoryBudgetPerRule(t *testing.T) {
	eng := newEngine(t, engine.WithMemoryBudget(48<<20))
	rule := func(name string) string {
		return name + `: context: [{name: big, variable: {jmesPath: "pad_left('a', ` + "`" + `10000000` + "`" + `, 'x')"}}]
    validate: {deny: {conditions: {any: [{key: "{{ length(big) }}", operator: Equals, value: -1}]}}}`
	}
	p := compile(t, eng, cmPolicy("two", rule("first"), rule("second")))
	got := statuses(t, eng, p, &engine.Request{Operation: engine.OpCreate, Object: configMap(3)})
	for _, name := range []string{"first", "second"} {
		if rr := got[name]; rr.Status != engine.StatusPass {
			t.Errorf("%s: %s %q, want pass", name, rr.Status, rr.Message)
		}
	}
	if _, err := engine.New(engine.WithMemoryBudget(0)); !errors.Is(err, engine.ErrInvalidOption) {
		t.Errorf("WithMemoryBudget(0): error = %v, want ErrInvalidOption", err)
	}
}

// denyLength is a deny rule on the length of variable v, with the given
// context entries.
func denyLength(entries ...any) map[string]any {
	return map[string]any{
		"context": entries,
		"validate": map[string]any{"deny": map[string]any{"conditions": map[string]any{
			"any": []any{map[string]any{"key": "{{ length(v) }}", "operator": "Equals", "value": -1}},
		}}},
	}
}

// TestContextMemoryBudget is finding 5 of issue 28 for what context
// entries load rather than compute: an apiCall's answer, a ConfigMap, an
// image's data, and the text a variable's value builds from the request
// were not charged to the rule's memory budget, so a rule could hold or
// build hundreds of MB (a foreach loading an answer per element, a value
// of 200 copies of a 1 MB field). Each entry's data (jmespath.Size) and
// each substitution's new text, lists and maps now count: the rule stops
// with the memory budget's error, having allocated about the budget.
func TestContextMemoryBudget(t *testing.T) {
	mb := strings.Repeat("x", 1<<20)
	megabytes := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = mb
		}
		return out
	}
	loader := mapLoader{
		cms: map[string]map[string]any{"tenant/big": {"data": map[string]any{"blob": mb}}},
		api: map[string]any{
			"/api/v1/namespaces/tenant/configmaps": map[string]any{"items": megabytes(8)},
			"/api/v1/namespaces/tenant/secrets":    map[string]any{"items": megabytes(1)[:0]},
		},
	}
	apiCall := func(name, path string) map[string]any {
		return map[string]any{"name": name, "apiCall": map[string]any{"urlPath": path}}
	}
	configMap := func(name string) map[string]any {
		return map[string]any{"name": name, "configMap": map[string]any{"name": "big", "namespace": "tenant"}}
	}
	value := func(name string, v any) map[string]any {
		return map[string]any{"name": name, "variable": map[string]any{"value": v}}
	}
	copies := make([]any, 200)
	for i := range copies {
		copies[i] = "x{{ request.object.data.blob }}"
	}
	spent := func(budget int64) string {
		return fmt.Sprintf("evaluation stopped: limit exceeded: memory budget of %d bytes spent: ", budget)
	}
	small := []engine.Option{engine.WithMemoryBudget(4 << 20)}
	tests := map[string]struct {
		rule     map[string]any
		opts     []engine.Option
		status   engine.Status
		prefix   string
		maxAlloc uint64
	}{
		"an apiCall answer of 8 MB": {
			rule: denyLength(apiCall("v", "/api/v1/namespaces/tenant/configmaps")), opts: small,
			status: engine.StatusError, prefix: spent(4 << 20),
		},
		"ten apiCall answers of 8 MB": {
			rule: denyLength(
				apiCall("a", "/api/v1/namespaces/tenant/configmaps"), apiCall("b", "/api/v1/namespaces/tenant/configmaps"),
				apiCall("c", "/api/v1/namespaces/tenant/configmaps"), apiCall("d", "/api/v1/namespaces/tenant/configmaps"),
				apiCall("e", "/api/v1/namespaces/tenant/configmaps"), apiCall("f", "/api/v1/namespaces/tenant/configmaps"),
				apiCall("g", "/api/v1/namespaces/tenant/configmaps"), apiCall("h", "/api/v1/namespaces/tenant/configmaps"),
				apiCall("i", "/api/v1/namespaces/tenant/configmaps"), apiCall("v", "/api/v1/namespaces/tenant/configmaps"),
			),
			status: engine.StatusError, prefix: spent(engine.DefaultMemoryBudget),
		},
		"five ConfigMaps of 1 MB": {
			rule:   denyLength(configMap("a"), configMap("b"), configMap("c"), configMap("d"), configMap("v")),
			opts:   small,
			status: engine.StatusError, prefix: spent(4 << 20),
		},
		"an apiCall answer per foreach element": {
			rule: map[string]any{"validate": map[string]any{"foreach": []any{map[string]any{
				"list":    "request.object.data | keys(@)",
				"context": []any{apiCall("v", "/api/v1/namespaces/tenant/configmaps")},
				"deny": map[string]any{"conditions": map[string]any{
					"any": []any{map[string]any{"key": "{{ length(v) }}", "operator": "Equals", "value": -1}},
				}},
			}}}},
			status: engine.StatusError, prefix: spent(engine.DefaultMemoryBudget),
		},
		"a value of 200 copies of a 1 MB field": {
			rule:   denyLength(value("v", copies)),
			status: engine.StatusError, prefix: spent(engine.DefaultMemoryBudget), maxAlloc: 2 * engine.DefaultMemoryBudget,
		},
		"a value of one text of 200 copies of a 1 MB field": {
			rule:   denyLength(value("v", strings.Repeat("{{ request.object.data.blob }}", 200))),
			status: engine.StatusError, prefix: spent(engine.DefaultMemoryBudget), maxAlloc: 2 * engine.DefaultMemoryBudget,
		},
		"within the budget": {
			rule:   denyLength(apiCall("a", "/api/v1/namespaces/tenant/secrets"), configMap("b"), value("v", copies[:10])),
			status: engine.StatusPass,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			eng := newEngine(t, append([]engine.Option{engine.WithContextLoader(loader)}, tc.opts...)...)
			set := &engine.Set{Policies: []*engine.Policy{compile(t, eng, tenantPolicy(t, tc.rule))}}
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			keys := map[string]any{}
			for i := range 40 {
				keys[fmt.Sprintf("k%02d", i)] = "v"
			}
			req := &engine.Request{Operation: engine.OpCreate, Object: blobConfigMap(mb, keys)}
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			resps, _ := eng.Apply(ctx, req, set)
			runtime.ReadMemStats(&after)
			alloc := after.TotalAlloc - before.TotalAlloc
			t.Logf("allocated %d MiB", alloc>>20)
			if tc.maxAlloc > 0 && alloc > tc.maxAlloc {
				t.Errorf("allocated %d MiB, want at most %d MiB", alloc>>20, tc.maxAlloc>>20)
			}
			if len(resps) != 1 || len(resps[0].Rules) != 1 {
				t.Fatalf("responses: %+v", resps)
			}
			rr := resps[0].Rules[0]
			if rr.Status != tc.status || !strings.HasPrefix(rr.Message, tc.prefix) {
				t.Errorf("%s %.300q, want %s %q...", rr.Status, rr.Message, tc.status, tc.prefix)
			}
		})
	}
}
