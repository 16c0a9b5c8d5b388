package engine_test

import (
	"context"
	"errors"
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
