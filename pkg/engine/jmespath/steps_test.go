package jmespath

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/jmespath-community/go-jmespath/pkg/interpreter"
	"github.com/jmespath-community/go-jmespath/pkg/parsing"
)

// stepsDoc is a small document with lists inside lists.
const stepsDoc = `{
  "items": [
    {"name": "a", "tags": ["x", "y"], "ports": [{"n": 1}, {"n": 2}], "meta": {"k": "v"}},
    {"name": "b", "tags": [], "ports": [{"n": 3}], "meta": {"k": "w"}},
    {"name": "c", "tags": ["x"], "ports": [], "meta": {}}
  ],
  "allowed": ["a", "c"],
  "s": "abcdef",
  "m": {"only": [1, 2, 3]}
}`

// TestInstrumentKeepsResults compares metered queries with the library's
// interpreter on the uninstrumented tree: charging steps must not change
// any result.
func TestInstrumentKeepsResults(t *testing.T) {
	i := newTestInterpreter(t)
	doc := mustJSON(t, stepsDoc)
	tests := map[string]struct {
		expr    string
		metered bool
	}{
		"plain path":               {expr: "items[0].name"},
		"top-level projection":     {expr: "items[*].name"},
		"top-level filter":         {expr: "items[?name == 'a'].tags"},
		"top-level function":       {expr: "length(items)"},
		"nested projection":        {expr: "items[*].ports[*].n", metered: true},
		"flatten of a projection":  {expr: "items[*].tags[]"},
		"flatten inside":           {expr: "items[*].[tags[]]", metered: true},
		"flatten of projections":   {expr: "items[].ports[].n"},
		"filter with function":     {expr: "items[?contains($.allowed, name)].name", metered: true},
		"filter over nested list":  {expr: "items[?length(ports[?n > `1`]) > `0`].name", metered: true},
		"object projection inside": {expr: "items[*].meta.*", metered: true},
		"object projection":        {expr: "m.*"},
		"slice inside":             {expr: "items[*].tags[0:1]", metered: true},
		"string slice inside":      {expr: "items[*].name[0:1]", metered: true},
		"string slice":             {expr: "s[1:3]"},
		"expression reference":     {expr: "sort_by(items, &length(tags))[*].name", metered: true},
		"map":                      {expr: "map(&ports[*].n, items)", metered: true},
		"let in a projection":      {expr: "items[*].[let $t = tags in $t[?@ == 'x']]", metered: true},
		"multi-select":             {expr: "items[*].[name, tags[0]]"},
		"pipe after projection":    {expr: "items[*].ports[] | [0]"},
		"root inside":              {expr: "items[*].length($.items[*])", metered: true},
		"null left of projection":  {expr: "missing[*].x[*]", metered: true},
		"not a list":               {expr: "items[*].name[*]", metered: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			q, err := i.Compile(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if got := q.(*query).metered; got != tc.metered {
				t.Errorf("metered = %v, want %v", got, tc.metered)
			}
			got, err := q.Search(doc)
			if err != nil {
				t.Fatal(err)
			}
			node, err := parsing.NewParser().Parse(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			want, err := interpreter.NewInterpreter(doc, i.caller, nil).Execute(node, doc)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %#v, want %#v", got, want)
			}
		})
	}
}

// bigList is a document with a list of n strings.
func bigList(n int) map[string]any {
	list := make([]any, n)
	for k := range list {
		list[k] = fmt.Sprintf("item-%d", k)
	}
	return map[string]any{"list": list}
}

func TestStepLimit(t *testing.T) {
	const n = 2000 // quadratic expressions below do about n*n = 4e6 steps
	doc := bigList(n)
	doc["allowed"] = doc["list"].([]any)[:400]
	tests := map[string]struct {
		expr    string
		limit   int64
		want    any
		wantErr error
	}{
		"quadratic filter within the limit":   {expr: "length(list[?contains($.list, @)])", limit: 1e7, want: 2000.0},
		"quadratic filter within the default": {expr: "length(list[?contains($.allowed, @)])", want: 400.0},
		"quadratic filter over the limit":     {expr: "length(list[?contains($.list, @)])", limit: 1e6, wantErr: ErrStepLimit},
		"nested projection over the limit":    {expr: "length(list[*].length($.list[*]))", limit: 1e6, wantErr: ErrStepLimit},
		"flatten, error dropped by the interpreter": {
			expr: "length(list[*].[$.list[] | [0]])", limit: 1e5, wantErr: ErrStepLimit,
		},
		"expression reference over the limit": {expr: "length(map(&sort($.list), list))", limit: 1e6, wantErr: ErrStepLimit},
		"linear over a small limit":           {expr: "length(list[*])", limit: 10, want: 2000.0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var opts []Option
			if tc.limit > 0 {
				opts = append(opts, WithStepLimit(tc.limit))
			}
			i := newTestInterpreter(t, opts...)
			start := time.Now()
			got, err := i.Search(tc.expr, doc)
			t.Logf("%s: %v", tc.expr, time.Since(start))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || !errors.Is(err, ErrEvaluation) {
					t.Fatalf("error = %v (result %#v), want one wrapping %v and ErrEvaluation", err, got, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func TestSearchContext(t *testing.T) {
	i := newTestInterpreter(t, WithStepLimit(1e12))
	doc := bigList(20000) // 4e8 steps: tens of seconds without a deadline
	const expr = "length(list[?contains($.list, @)])"
	q, err := i.Compile(expr)
	if err != nil {
		t.Fatal(err)
	}
	canceled, cancel := context.WithCancel(context.Background())
	cancel()
	tests := map[string]struct {
		ctx     func(t *testing.T) context.Context
		wantErr error
	}{
		"canceled before": {ctx: func(*testing.T) context.Context { return canceled }, wantErr: context.Canceled},
		"deadline during": {
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
				t.Cleanup(cancel)
				return ctx
			},
			wantErr: context.DeadlineExceeded,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			start := time.Now()
			_, err := q.SearchContext(tc.ctx(t), doc)
			took := time.Since(start)
			if !errors.Is(err, tc.wantErr) || !errors.Is(err, ErrEvaluation) {
				t.Fatalf("error = %v, want one wrapping %v and ErrEvaluation", err, tc.wantErr)
			}
			if took > time.Second {
				t.Fatalf("took %s, want it to stop at the deadline", took)
			}
		})
	}
	if got, err := q.SearchContext(context.Background(), bigList(10)); err != nil || got != 10.0 {
		t.Fatalf("small search = %v, %v; want 10", got, err)
	}
}

func TestWithStepLimitValidates(t *testing.T) {
	for _, n := range []int64{0, -1} {
		if _, err := New(WithStepLimit(n)); !errors.Is(err, ErrInvalidOption) {
			t.Fatalf("WithStepLimit(%d): error = %v, want ErrInvalidOption", n, err)
		}
	}
}

// BenchmarkMeteredQuery measures a query with a function inside a filter,
// which counts its steps.
func BenchmarkMeteredQuery(b *testing.B) {
	i := newTestInterpreter(b)
	doc := mustJSON(b, admissionReview)
	q, err := i.Compile("request.object.spec.containers[?contains(image, 'nginx')].name")
	if err != nil {
		b.Fatal(err)
	}
	if !strings.Contains(q.(*query).expr, "contains") || !q.(*query).metered {
		b.Fatal("query is not metered")
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := q.Search(doc); err != nil {
			b.Fatal(err)
		}
	}
}
