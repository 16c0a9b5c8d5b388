package jmespath

import (
	"fmt"
	"math/rand"
	"reflect"
	"testing"

	"github.com/jmespath-community/go-jmespath/pkg/interpreter"
)

// interpret evaluates q with the library's interpreter only.
func interpret(q *query, data any) (any, error) {
	return interpreter.NewInterpreter(data, q.caller, nil).Execute(q.node, data)
}

// directInputs are documents the differential tests evaluate against:
// JSON values of every type, nulls inside objects and lists, nested
// lists, and values of Go types the interpreter reads through reflection.
func directInputs(t testing.TB) []any {
	t.Helper()
	docs := []string{
		`null`, `true`, `false`, `0`, `1.5`, `""`, `"text"`, `[]`, `{}`,
		`[null, 1, [2, [3]], [], "s", {"a": 1}]`,
		`{"a": null, "b": false, "c": "", "d": [], "e": {}, "f": 0}`,
		`{"a": {"b": {"c": [1, 2, null, [3, 4]]}}, "x": [{"b": 1}, {"b": null}, {"c": 2}, 5, [6]]}`,
		`{"request": {"operation": "CREATE", "object": {"spec": {
			"containers": [{"name": "a", "ports": [{"hostPort": 80}, {"containerPort": 1}],
				"securityContext": {"capabilities": {"add": ["NET_ADMIN"], "drop": ["ALL"]}}}],
			"initContainers": [{"name": "i", "securityContext": {"capabilities": {"drop": []}}}],
			"ephemeralContainers": null}}}}`,
		`{"request": {"operation": ""}, "element": {"securityContext": {"capabilities": {"add": [["x"], null, "y"], "drop": "ALL"}}}}`,
		`{"element": {"securityContext": null}, "a": [[[1]], [[2, 3]], []], "b": {"a": [{"a": [1]}, {"a": []}]}}`,
	}
	out := make([]any, 0, len(docs)+6)
	for _, d := range docs {
		out = append(out, mustJSON(t, d))
	}
	type holder struct{ A any }
	return append(out,
		holder{A: 1},
		&holder{A: "x"},
		[]string{"a", "b"},
		map[string]any{"a": []string{"x"}, "b": holder{A: 2}, "c": &holder{A: nil}},
		map[string]any{"a": []any{[]string{"y"}, 1}, "b": []int{}},
		int64(3),
	)
}

// directExpressions are hand-written expressions the direct evaluator
// handles, and some it does not.
var directExpressions = []string{
	"a", "a.b", "a.b.c", "a.b.c[0]", "a.b.c[-1]", "a.b.c[9]", "a.b.c[-9]", `"a"`, `a."b"`,
	"@", "@.a", "a[]", "a[][]", "a[].a", "a[].a[]", "a[*]", "a[*].b", "x[].b", "x[*].b", "x[]",
	"a || b", "a && b", "!a", "!!a", "a || b || c", "b || 'default'", "d || `[]`", "a.b || `{}`",
	"e || f", "f || e", "c && d", "b || c && d",
	"request.operation || 'BACKGROUND'", "request.operation",
	"request.object.spec.[ephemeralContainers, initContainers, containers][]",
	"request.object.spec.[ephemeralContainers, initContainers, containers][].ports[].hostPort",
	"request.object.spec.[ephemeralContainers, initContainers, containers][].securityContext.capabilities.add[]",
	"element.securityContext.capabilities.add[] || `[]`",
	"element.securityContext.capabilities.drop[] || `[]`",
	"[a, b]", "[a, b][]", "[a, [b, c]][]", "a.[b, c]", "a | b", "a[] | [0]", "a | [0]", "[0]", "[-1]",
	"`null`", "`1`", "'s'", "`[1, [2]]`[]",
	// Not handled: functions, filters, slices, hashes, comparisons.
	"length(a)", "a[?b]", "a[0:2]", "{x: a}", "a == b", "a[0:1].b", "a.*", "$", "keys(@)[] || ''",
}

// randomExpression builds an expression of the kinds compileDirect
// handles, depth levels deep at most.
func randomExpression(r *rand.Rand, depth int) string {
	atoms := []string{"a", "b", "c", "d", "e", "f", "x", "@", "`null`", "`[]`", "`[1]`", "''", "'s'", "`false`", `"a"`}
	if depth == 0 {
		return atoms[r.Intn(len(atoms))]
	}
	sub := func() string { return randomExpression(r, depth-1) }
	field := func() string { return []string{"a", "b", "c", "x", `"a"`}[r.Intn(5)] }
	switch r.Intn(12) {
	case 0:
		return sub() + "." + field()
	case 1:
		return sub() + "[]"
	case 2:
		return sub() + "[*]." + field()
	case 3:
		return fmt.Sprintf("%s[%d]", sub(), r.Intn(5)-2)
	case 4:
		return "(" + sub() + " || " + sub() + ")"
	case 5:
		return "(" + sub() + " && " + sub() + ")"
	case 6:
		return "!" + sub()
	case 7:
		return "[" + sub() + ", " + sub() + "]"
	case 8:
		return sub() + " | " + sub()
	case 9:
		return field() + ".[" + field() + ", " + field() + "][]"
	case 10:
		return sub() + "[]." + field() + "[]"
	default:
		return atoms[r.Intn(len(atoms))]
	}
}

// TestDirectMatchesInterpreter checks that the direct evaluator gives
// exactly the interpreter's result, or none, for hand-written and random
// expressions over every input.
func TestDirectMatchesInterpreter(t *testing.T) {
	jp := newTestInterpreter(t)
	inputs := directInputs(t)
	exprs := append([]string(nil), directExpressions...)
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 3000; i++ {
		exprs = append(exprs, randomExpression(r, 1+r.Intn(4)))
	}
	direct, compared, fellBack := 0, 0, 0
	for _, expr := range exprs {
		c, err := jp.Compile(expr)
		if err != nil {
			// Random expressions are not all valid.
			continue
		}
		q := c.(*query)
		if q.direct == nil {
			continue
		}
		direct++
		for _, in := range inputs {
			want, err := interpret(q, in)
			if err != nil {
				t.Fatalf("%q on %#v: the interpreter failed: %v", expr, in, err)
			}
			got, ok := q.direct(in)
			if !ok {
				fellBack++
				continue
			}
			compared++
			if !reflect.DeepEqual(got, want) {
				t.Errorf("%q on %#v: direct %#v, interpreter %#v", expr, in, got, want)
			}
			// Through Search too: the query gives the same.
			res, err := q.Search(in)
			if err != nil || !reflect.DeepEqual(res, want) {
				t.Errorf("%q on %#v: Search %#v, %v; interpreter %#v", expr, in, res, err, want)
			}
		}
	}
	if direct < len(exprs)/2 || compared < 10*direct || fellBack == 0 {
		t.Fatalf("too little covered: %d of %d expressions direct, %d results compared, %d fell back", direct, len(exprs), compared, fellBack)
	}
}

// TestDirectCoverage checks which expressions get a direct evaluator.
func TestDirectCoverage(t *testing.T) {
	jp := newTestInterpreter(t)
	tests := map[string]struct {
		expr   string
		direct bool
	}{
		"field chain":        {expr: "request.object.metadata.name", direct: true},
		"or with literal":    {expr: "request.operation || 'BACKGROUND'", direct: true},
		"flatten default":    {expr: "element.securityContext.capabilities.add[] || `[]`", direct: true},
		"multiselect":        {expr: "request.object.spec.[initContainers, containers][].ports[].hostPort", direct: true},
		"function":           {expr: "length(request.object.spec.containers)", direct: false},
		"filter":             {expr: "request.object.spec.containers[?name == 'a']", direct: false},
		"metered projection": {expr: "a[*].b[*].c", direct: false},
		"root":               {expr: "$.a", direct: false},
		"string slice":       {expr: "a[0:1]", direct: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c, err := jp.Compile(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			if got := c.(*query).direct != nil; got != tc.direct {
				t.Fatalf("direct evaluator for %q: %v, want %v", tc.expr, got, tc.direct)
			}
		})
	}
}

// TestDirectFallback checks that a value the interpreter reads through
// reflection makes the query use the interpreter.
func TestDirectFallback(t *testing.T) {
	jp := newTestInterpreter(t)
	type spec struct{ Containers []string }
	data := map[string]any{"a": &spec{Containers: []string{"x"}}, "b": []string{"p", "q"}}
	for expr, want := range map[string]any{
		"a.containers":      []string{"x"},
		"b[]":               []any{"p", "q"},
		"b[*]":              []any{"p", "q"},
		"b || 'none'":       []string{"p", "q"},
		"[b, a.containers]": []any{[]string{"p", "q"}, []string{"x"}},
	} {
		got, err := jp.Search(expr, data)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%q: got %#v, want %#v", expr, got, want)
		}
	}
}

// BenchmarkDirect compares a policy expression through the direct
// evaluator and through the interpreter.
func BenchmarkDirect(b *testing.B) {
	jp := newTestInterpreter(b)
	data := mustJSON(b, `{"request": {"operation": "CREATE", "object": {"spec": {
		"containers": [{"name": "a", "ports": [{"hostPort": 80}]}], "initContainers": [{"name": "i"}]}}}}`)
	c, err := jp.Compile("request.object.spec.[ephemeralContainers, initContainers, containers][].ports[].hostPort")
	if err != nil {
		b.Fatal(err)
	}
	q := c.(*query)
	b.Run("direct", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_, _ = q.Search(data)
		}
	})
	b.Run("interpreter", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			_, _ = interpret(q, data)
		}
	})
}
