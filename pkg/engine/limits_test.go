package engine_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// configMap returns a ConfigMap with n data keys.
func configMap(n int) map[string]any {
	data := make(map[string]any, n)
	for i := range n {
		data[fmt.Sprintf("key-%05d", i)] = fmt.Sprintf("value-%d", i)
	}
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "ConfigMap",
		"metadata":   map[string]any{"name": "big", "namespace": "prod"},
		"data":       data,
	}
}

// cmPolicy is a policy of the given rules on ConfigMaps; rules are listed
// as "name: body" where body is the YAML of the rule after its match.
func cmPolicy(name string, rules ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: %s}\nspec:\n  validationFailureAction: Enforce\n  rules:\n", name)
	for _, r := range rules {
		n, body, _ := strings.Cut(r, ": ")
		fmt.Fprintf(&b, "  - name: %s\n    match: {any: [{resources: {kinds: [ConfigMap]}}]}\n    %s\n", n, body)
	}
	return b.String()
}

const (
	// nestedForEach denies a ConfigMap with a key equal to another key's
	// value: for each key, for each key. Over 10,000 keys that is 10^8
	// inner iterations, minutes of CPU.
	nestedForEach = `nested: validate: {foreach: [{list: "request.object.data", foreach: [{list: "request.object.data", deny: {conditions: {any: [{key: "{{ element0.key }}", operator: Equals, value: "{{ element1.value }}"}]}}}]}]}`
	// flatForEach denies a ConfigMap with a key named "forbidden".
	flatForEach = `flat: validate: {foreach: [{list: "request.object.data", deny: {conditions: {any: [{key: "{{ element.key }}", operator: Equals, value: forbidden}]}}}]}`
	// namePattern checks the ConfigMap's name.
	namePattern = `name: validate: {pattern: {metadata: {name: "?*"}}}`
	// mutateForEach annotates the ConfigMap once per key.
	mutateForEach = `annotate: mutate: {foreach: [{list: "request.object.data", patchesJson6902: "[{\"op\": \"add\", \"path\": \"/metadata/labels\", \"value\": {\"seen\": \"{{ element.key }}\"}}]"}]}`
	// generateForEach generates one ConfigMap per key.
	generateForEach = `copies: generate: {foreach: [{list: "request.object.data", apiVersion: v1, kind: ConfigMap, name: "copy-{{ elementIndex }}", namespace: prod, data: {data: {k: "{{ element.key }}"}}}]}`
	// slowContext reads a ConfigMap.
	slowContext = `slow: context: [{name: cm, configMap: {name: settings, namespace: prod}}]
    validate: {deny: {conditions: {any: [{key: "{{ cm.data.x || '' }}", operator: Equals, value: "y"}]}}}`
	// quadraticVariable counts, in a context variable, the keys equal to
	// some key: n^2 expression steps.
	quadraticVariable = `quadratic: context: [{name: n, variable: {jmesPath: "length(keys(request.object.data)[?contains(keys($.request.object.data), @)])"}}]
    validate: {deny: {conditions: {any: [{key: "{{ n }}", operator: Equals, value: -1}]}}}`
)

// waitingLoader serves ConfigMaps once the caller's context ends: a slow
// API server.
type waitingLoader struct{}

func (waitingLoader) ConfigMap(ctx context.Context, _, _ string) (map[string]any, error) {
	<-ctx.Done()
	return nil, ctx.Err()
}

func (waitingLoader) APICall(context.Context, *policy.APICall) (any, error) {
	return nil, engine.ErrNotAvailable
}

func (waitingLoader) GlobalReference(context.Context, string) (any, error) {
	return nil, engine.ErrNotAvailable
}

func (waitingLoader) ImageData(context.Context, string) (any, error) {
	return nil, engine.ErrNotAvailable
}

// evalResult is what one evaluation gave, and how long it took.
type evalResult struct {
	rules map[string]engine.RuleResponse
	took  time.Duration
}

// applyWithin runs Apply on its own goroutine and fails the test when it
// has not returned after wait: on an unbounded engine the evaluations
// below run for minutes.
func applyWithin(t *testing.T, ctx context.Context, eng *engine.Engine, set *engine.Set, req *engine.Request, wait time.Duration) evalResult {
	t.Helper()
	done := make(chan evalResult, 1)
	go func() {
		start := time.Now()
		resps, _ := eng.Apply(ctx, req, set)
		res := evalResult{rules: map[string]engine.RuleResponse{}, took: time.Since(start)}
		for _, r := range resps {
			for _, rr := range r.Rules {
				res.rules[r.Policy.Name()+"/"+rr.Name] = rr
			}
		}
		done <- res
	}()
	select {
	case res := <-done:
		return res
	case <-time.After(wait):
		t.Fatalf("evaluation still running after %s", wait)
		return evalResult{}
	}
}

func TestBoundedEvaluation(t *testing.T) {
	const deadline = 100 * time.Millisecond
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	type want struct {
		status engine.Status
		prefix string
	}
	tests := map[string]struct {
		opts     []engine.Option
		policies []string
		keys     int
		// timeout, when set, is the request's deadline.
		timeout time.Duration
		ctx     context.Context
		want    map[string]want
		// maxTook, when set, bounds how long the evaluation may take.
		maxTook time.Duration
	}{
		"nested foreach stops at the deadline, later rules and policies are errors": {
			opts:     []engine.Option{engine.WithWorkBudget(1 << 40)},
			policies: []string{cmPolicy("first", nestedForEach, namePattern), cmPolicy("second", namePattern)},
			keys:     10_000,
			timeout:  deadline,
			want: map[string]want{
				"first/nested": {engine.StatusError, "evaluation stopped: request deadline exceeded after "},
				"first/name":   {engine.StatusError, "evaluation stopped: request deadline exceeded after "},
				"second/name":  {engine.StatusError, "evaluation stopped: request deadline exceeded after "},
			},
			maxTook: 2 * deadline,
		},
		"nested foreach without a deadline stops at the work budget": {
			opts:     []engine.Option{engine.WithWorkBudget(100_000)},
			policies: []string{cmPolicy("first", nestedForEach, namePattern)},
			keys:     10_000,
			want: map[string]want{
				"first/nested": {engine.StatusError, "evaluation stopped: limit exceeded: work budget of 100000 steps spent"},
				"first/name":   {engine.StatusError, "evaluation stopped: limit exceeded: work budget of 100000 steps spent"},
			},
		},
		"context loader past the deadline": {
			opts:     []engine.Option{engine.WithContextLoader(waitingLoader{})},
			policies: []string{cmPolicy("first", slowContext, namePattern)},
			keys:     3,
			timeout:  20 * time.Millisecond,
			want: map[string]want{
				"first/slow": {engine.StatusError, "evaluation stopped: request deadline exceeded after "},
				"first/name": {engine.StatusError, "evaluation stopped: request deadline exceeded after "},
			},
		},
		"canceled request": {
			policies: []string{cmPolicy("first", flatForEach, namePattern)},
			keys:     3,
			ctx:      canceled,
			want: map[string]want{
				"first/flat": {engine.StatusError, "evaluation stopped: request canceled after "},
				"first/name": {engine.StatusError, "evaluation stopped: request canceled after "},
			},
		},
		"validate foreach list over the limit": {
			opts:     []engine.Option{engine.WithMaxForEachElements(100)},
			policies: []string{cmPolicy("first", flatForEach, namePattern)},
			keys:     101,
			want: map[string]want{
				"first/flat": {engine.StatusError, "evaluation stopped: limit exceeded: foreach list request.object.data has 101 elements, more than the limit of 100"},
				"first/name": {engine.StatusPass, ""},
			},
		},
		"validate foreach list at the limit": {
			opts:     []engine.Option{engine.WithMaxForEachElements(100)},
			policies: []string{cmPolicy("first", flatForEach)},
			keys:     100,
			want:     map[string]want{"first/flat": {engine.StatusPass, ""}},
		},
		"mutate foreach list over the limit": {
			opts:     []engine.Option{engine.WithMaxForEachElements(10)},
			policies: []string{cmPolicy("first", mutateForEach)},
			keys:     11,
			want: map[string]want{
				"first/annotate": {engine.StatusError, "evaluation stopped: limit exceeded: foreach list request.object.data has 11 elements"},
			},
		},
		"generate foreach list over the limit": {
			opts:     []engine.Option{engine.WithMaxForEachElements(10)},
			policies: []string{cmPolicy("first", generateForEach)},
			keys:     11,
			want: map[string]want{
				"first/copies": {engine.StatusError, "evaluation stopped: limit exceeded: foreach list request.object.data has 11 elements"},
			},
		},
		"nesting over the limit": {
			opts:     []engine.Option{engine.WithMaxForEachDepth(1)},
			policies: []string{cmPolicy("first", nestedForEach, flatForEach)},
			keys:     3,
			want: map[string]want{
				"first/nested": {engine.StatusError, "evaluation stopped: limit exceeded: foreach nested deeper than the limit of 1"},
				"first/flat":   {engine.StatusPass, ""},
			},
		},
		"work budget spans policies": {
			opts:     []engine.Option{engine.WithWorkBudget(150)},
			policies: []string{cmPolicy("first", flatForEach), cmPolicy("second", flatForEach), cmPolicy("third", namePattern)},
			keys:     50,
			want: map[string]want{
				"first/flat":  {engine.StatusPass, ""},
				"second/flat": {engine.StatusError, "evaluation stopped: limit exceeded: work budget of 150 steps spent"},
				"third/name":  {engine.StatusError, "evaluation stopped: limit exceeded: work budget of 150 steps spent"},
			},
		},
		"expression over its step limit": {
			opts:     []engine.Option{engine.WithMaxExpressionSteps(10_000)},
			policies: []string{cmPolicy("first", quadraticVariable, namePattern)},
			keys:     200,
			want: map[string]want{
				"first/quadratic": {engine.StatusError, "evaluation stopped: limit exceeded: expression over the step limit of 10000: "},
				"first/name":      {engine.StatusPass, ""},
			},
		},
		"expression within its step limit": {
			policies: []string{cmPolicy("first", quadraticVariable)},
			keys:     200,
			want:     map[string]want{"first/quadratic": {engine.StatusPass, ""}},
		},
		"nested foreach on a small object with defaults and a deadline": {
			policies: []string{cmPolicy("first", nestedForEach, flatForEach, namePattern, mutateForEach, generateForEach)},
			keys:     50,
			timeout:  10 * time.Second,
			want: map[string]want{
				"first/nested":   {engine.StatusPass, ""},
				"first/flat":     {engine.StatusPass, ""},
				"first/name":     {engine.StatusPass, ""},
				"first/annotate": {engine.StatusPass, ""},
				"first/copies":   {engine.StatusPass, ""},
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			eng := newEngine(t, tc.opts...)
			set := &engine.Set{}
			for _, p := range tc.policies {
				set.Policies = append(set.Policies, compile(t, eng, p))
			}
			ctx := context.Background()
			if tc.ctx != nil {
				ctx = tc.ctx
			}
			if tc.timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			req := &engine.Request{Operation: engine.OpCreate, Object: configMap(tc.keys)}
			res := applyWithin(t, ctx, eng, set, req, 20*time.Second)
			t.Logf("took %s", res.took)
			if tc.maxTook > 0 && res.took > tc.maxTook {
				t.Errorf("took %s, want less than %s", res.took, tc.maxTook)
			}
			for rule, w := range tc.want {
				rr, ok := res.rules[rule]
				if !ok {
					t.Errorf("%s: no result", rule)
					continue
				}
				if rr.Status != w.status || !strings.HasPrefix(rr.Message, w.prefix) {
					t.Errorf("%s: %s %q, want %s %q...", rule, rr.Status, rr.Message, w.status, w.prefix)
				}
			}
			if len(res.rules) != len(tc.want) {
				t.Errorf("%d results, want %d: %v", len(res.rules), len(tc.want), res.rules)
			}
		})
	}
}

// TestRequestAcrossCalls passes one Request to several calls, as the
// webhook does: a context bounds the call it is passed to, while the work
// budget spans every call.
func TestRequestAcrossCalls(t *testing.T) {
	canceled, cancel := context.WithCancel(t.Context())
	cancel()
	eng := newEngine(t, engine.WithWorkBudget(150))
	first := compile(t, eng, cmPolicy("first", flatForEach))
	second := compile(t, eng, cmPolicy("second", flatForEach))
	third := compile(t, eng, cmPolicy("third", namePattern))
	req := &engine.Request{Operation: engine.OpCreate, Object: configMap(50)}
	steps := []struct {
		ctx    context.Context
		p      *engine.Policy
		status engine.Status
		prefix string
	}{
		{canceled, first, engine.StatusError, "evaluation stopped: request canceled after 0 steps"},
		{t.Context(), first, engine.StatusPass, ""},
		{t.Context(), second, engine.StatusError, "evaluation stopped: limit exceeded: work budget of 150 steps spent"},
		{t.Context(), third, engine.StatusError, "evaluation stopped: limit exceeded: work budget of 150 steps spent"},
	}
	for i, st := range steps {
		resp := eng.Validate(st.ctx, req, st.p, nil)
		if len(resp.Rules) != 1 {
			t.Fatalf("step %d: %d rules, want 1", i, len(resp.Rules))
		}
		if rr := resp.Rules[0]; rr.Status != st.status || !strings.HasPrefix(rr.Message, st.prefix) {
			t.Errorf("step %d (%s): %s %q, want %s %q...", i, st.p.Name(), rr.Status, rr.Message, st.status, st.prefix)
		}
	}
}

func TestLimitOptions(t *testing.T) {
	tests := map[string]engine.Option{
		"zero foreach elements":  engine.WithMaxForEachElements(0),
		"negative foreach depth": engine.WithMaxForEachDepth(-1),
		"zero work budget":       engine.WithWorkBudget(0),
		"zero expression steps":  engine.WithMaxExpressionSteps(0),
	}
	for name, opt := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := engine.New(opt); !errors.Is(err, engine.ErrInvalidOption) {
				t.Fatalf("error = %v, want one wrapping ErrInvalidOption", err)
			}
		})
	}
}

// BenchmarkForEach measures a validate foreach with a deny condition over
// a ConfigMap of 1,000 keys, where the per-element checks of the deadline
// and work budget run: one op is one ConfigMap.
func BenchmarkForEach(b *testing.B) {
	eng := newEngine(b)
	set := &engine.Set{Policies: []*engine.Policy{compile(b, eng, cmPolicy("first", flatForEach))}}
	cm := configMap(1000)
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		resps, _ := eng.Apply(ctx, &engine.Request{Operation: engine.OpCreate, Object: cm}, set)
		if rr := resps[0].Rules[0]; rr.Status != engine.StatusPass {
			b.Fatalf("%s: %s", rr.Status, rr.Message)
		}
	}
}
