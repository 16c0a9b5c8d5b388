package jmespath

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

const admissionReview = `{
  "request": {
    "operation": "CREATE",
    "namespace": "foo",
    "object": {
      "kind": "Pod",
      "metadata": {
        "name": "mypod",
        "labels": {"app.kubernetes.io/name": "web", "team": "apple"},
        "annotations": {}
      },
      "spec": {
        "initContainers": [{"name": "init", "image": "busybox:1.36"}],
        "containers": [
          {"name": "nginx", "image": "nginx:1.25", "resources": {"requests": {"memory": "64Mi", "cpu": "250m"}}},
          {"name": "sidecar", "image": "ghcr.io/acme/sidecar:v2", "resources": {"requests": {"memory": "32Mi", "cpu": "100m"}}},
          {"name": "debug", "image": "busybox", "securityContext": {"privileged": false}}
        ]
      }
    }
  }
}`

func TestSearchDocument(t *testing.T) {
	i := newTestInterpreter(t)
	doc := mustJSON(t, admissionReview)
	runSearchCases(t, i, map[string]searchCase{
		"field":          {expr: "request.namespace", data: doc, want: "foo"},
		"quoted key":     {expr: `request.object.metadata.labels."app.kubernetes.io/name"`, data: doc, want: "web"},
		"missing key":    {expr: "request.object.metadata.labels.missing", data: doc, want: nil},
		"default value":  {expr: "request.object.metadata.labels.missing || ''", data: doc, want: ""},
		"false is falsy": {expr: "request.object.spec.containers[2].securityContext.privileged || 'unset'", data: doc, want: "unset"},
		"projection": {
			expr: "request.object.spec.containers[].image", data: doc,
			want: []any{"nginx:1.25", "ghcr.io/acme/sidecar:v2", "busybox"},
		},
		"multi-select flatten": {
			expr: "request.object.spec.[initContainers, containers][].name", data: doc,
			want: []any{"init", "nginx", "sidecar", "debug"},
		},
		"filter":      {expr: "request.object.spec.containers[?name=='nginx'].image | [0]", data: doc, want: "nginx:1.25"},
		"root":        {expr: "request.object.spec.containers[0].[name, $.request.namespace]", data: doc, want: []any{"nginx", "foo"}},
		"let":         {expr: "let $ns = request.namespace in request.object.metadata.[name, $ns]", data: doc, want: []any{"mypod", "foo"}},
		"arithmetic":  {expr: "`1` + `2` * `3`", want: 7.0},
		"length pipe": {expr: "request.object.spec.containers[?starts_with(image, 'busybox')] | length(@)", data: doc, want: 1.0},
		"custom in filter": {
			expr: "request.object.spec.containers[?pattern_match('*:v*', image)].name", data: doc,
			want: []any{"sidecar"},
		},
		"custom in projection": {
			expr: "request.object.spec.containers[].image_normalize(image)", data: doc,
			want: []any{"docker.io/nginx:1.25", "ghcr.io/acme/sidecar:v2", "docker.io/busybox:latest"},
		},
		"sum over projection": {expr: "sum(request.object.spec.containers[].resources.requests.memory)", data: doc, want: "96Mi"},
		"nil document":        {expr: "foo.bar", data: nil, want: nil},
		"undefined variable":  {expr: "$nope", data: doc, wantErr: ErrEvaluation},
	})
}

func TestStandardFunctions(t *testing.T) {
	i := newTestInterpreter(t)
	runSearchCases(t, i, map[string]searchCase{
		"abs":              {expr: "abs(`-2`)", want: 2.0},
		"avg":              {expr: "avg(`[1, 2, 3]`)", want: 2.0},
		"ceil":             {expr: "ceil(`1.2`)", want: 2.0},
		"floor":            {expr: "floor(`1.8`)", want: 1.0},
		"contains array":   {expr: "contains(`[\"a\", \"b\"]`, 'a')", want: true},
		"contains string":  {expr: "contains('foobar', 'bar')", want: true},
		"contains literal": {expr: "contains(host, '*')", data: map[string]any{"host": "*.example.com"}, want: true},
		"starts_with":      {expr: "starts_with('foobar', 'foo')", want: true},
		"ends_with":        {expr: "ends_with('foobar', 'bar')", want: true},
		"join":             {expr: "join(', ', `[\"a\", \"b\"]`)", want: "a, b"},
		"keys":             {expr: "keys(`{\"a\": 1}`)", want: []any{"a"}},
		"values":           {expr: "values(`{\"a\": 1}`)", want: []any{1.0}},
		"length string":    {expr: "length('héllo')", want: 5.0},
		"length object":    {expr: "length(`{\"a\": 1, \"b\": 2}`)", want: 2.0},
		"max":              {expr: "max(`[1, 3, 2]`)", want: 3.0},
		"min":              {expr: "min(`[\"b\", \"a\"]`)", want: "a"},
		"max_by":           {expr: "max_by(@, &age).name", data: mustJSON(t, `[{"name":"a","age":1},{"name":"b","age":2}]`), want: "b"},
		"sort":             {expr: "sort(`[3, 1, 2]`)", want: []any{1.0, 2.0, 3.0}},
		"sort_by":          {expr: "sort_by(@, &age)[].name", data: mustJSON(t, `[{"name":"b","age":2},{"name":"a","age":1}]`), want: []any{"a", "b"}},
		"map":              {expr: "map(&to_upper(@), `[\"a\", \"b\"]`)", want: []any{"A", "B"}},
		"merge":            {expr: "merge(`{\"a\": 1}`, `{\"b\": 2}`)", want: map[string]any{"a": 1.0, "b": 2.0}},
		"not_null":         {expr: "not_null(missing, `null`, 'x')", data: map[string]any{}, want: "x"},
		"reverse":          {expr: "reverse('abc')", want: "cba"},
		"to_array":         {expr: "to_array('a')", want: []any{"a"}},
		"to_number":        {expr: "to_number('1.5')", want: 1.5},
		"to_string":        {expr: "to_string(`[1]`)", want: "[1]"},
		"type":             {expr: "type(`{}`)", want: "object"},
		"from_items":       {expr: "from_items(`[[\"a\", 1]]`)", want: map[string]any{"a": 1.0}},
		"zip":              {expr: "zip(`[1, 2]`, `[\"a\", \"b\"]`)", want: []any{[]any{1.0, "a"}, []any{2.0, "b"}}},
		"lower":            {expr: "lower('ABC')", want: "abc"},
		"upper":            {expr: "upper('abc')", want: "ABC"},
		"trim_left":        {expr: "trim_left('  a ')", want: "a "},
		"pad_left":         {expr: "pad_left('1', `3`, '0')", want: "001"},
		"find_first":       {expr: "find_first('abcabc', 'c')", want: 2.0},
		"group_by": {
			expr: "group_by(@, &kind)", data: mustJSON(t, `[{"kind":"a"},{"kind":"b"},{"kind":"a"}]`),
			want: map[string]any{
				"a": []any{map[string]any{"kind": "a"}, map[string]any{"kind": "a"}},
				"b": []any{map[string]any{"kind": "b"}},
			},
		},
		"abs wrong type":        {expr: "abs('x')", wantErr: ErrFunction},
		"unknown function":      {expr: "nope(`1`)", wantErr: ErrFunction},
		"expref as a value":     {expr: "&name", wantErr: ErrEvaluation},
		"expref inside a value": {expr: "[not_null(&name)]", wantErr: ErrEvaluation},
		"expref to custom":      {expr: "add(&a, `1`)", wantErr: ErrFunction},
	})
}

func TestFunctionNames(t *testing.T) {
	want := []string{
		"add", "base64_decode", "base64_encode", "compare", "divide", "equal_fold",
		"image_normalize", "is_external_url", "items", "label_match", "lookup", "md5",
		"modulo", "multiply", "object_from_lists", "parse_json", "parse_yaml",
		"path_canonicalize", "pattern_match", "random", "regex_match", "regex_replace_all",
		"regex_replace_all_literal", "replace", "replace_all", "round", "semver_compare",
		"sha256", "split", "subtract", "sum", "time_add", "time_after", "time_before",
		"time_between", "time_diff", "time_now", "time_now_utc", "time_parse", "time_since",
		"time_to_cron", "time_truncate", "time_utc", "to_boolean", "to_lower", "to_upper",
		"trim", "trim_prefix", "truncate", "x509_decode",
	}
	got := FunctionNames()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("FunctionNames() = %v\nwant %v", got, want)
	}
	// Callers may modify the returned slice.
	got[0] = "changed"
	if FunctionNames()[0] != "add" {
		t.Fatal("FunctionNames shares its slice between calls")
	}
	for _, e := range customFunctions(defaultOptions()) {
		if e.Handler == nil {
			t.Errorf("function %s has no handler", e.Name)
		}
	}
}

func TestEveryCustomFunctionRejectsBadArguments(t *testing.T) {
	i := newTestInterpreter(t)
	for _, name := range FunctionNames() {
		t.Run(name, func(t *testing.T) {
			// Far too many arguments of an unexpected type must fail cleanly.
			expr := name + "(`{}`, `{}`, `{}`, `{}`, `{}`)"
			if _, err := i.Search(expr, nil); !errors.Is(err, ErrFunction) || !errors.Is(err, ErrEvaluation) {
				t.Fatalf("Search(%q) error = %v, want ErrFunction and ErrEvaluation", expr, err)
			}
			// So must null arguments, whatever the arity.
			for n := 1; n <= 4; n++ {
				expr := name + "(" + strings.TrimSuffix(strings.Repeat("missing, ", n), ", ") + ")"
				if _, err := i.Search(expr, map[string]any{}); err != nil && !errors.Is(err, ErrFunction) {
					t.Fatalf("Search(%q) error = %v, want nil or ErrFunction", expr, err)
				}
			}
		})
	}
}

func TestCompileErrors(t *testing.T) {
	i := newTestInterpreter(t)
	tests := map[string]struct {
		expr string
	}{
		"incomplete":     {expr: "a.["},
		"unclosed quote": {expr: `a."b`},
		"bad literal":    {expr: "`{`"},
		"empty":          {expr: ""},
		"trailing dot":   {expr: "a."},
		"too long":       {expr: strings.Repeat("a", MaxExpressionLength+1)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			q, err := i.Compile(tc.expr)
			if !errors.Is(err, ErrInvalidExpression) || q != nil {
				t.Fatalf("Compile(%q) = %v, %v; want nil and ErrInvalidExpression", tc.expr, q, err)
			}
			if errors.Is(err, ErrEvaluation) {
				t.Fatalf("Compile(%q) error %v also wraps ErrEvaluation", tc.expr, err)
			}
			if _, err := i.Search(tc.expr, nil); !errors.Is(err, ErrInvalidExpression) {
				t.Fatalf("Search(%q) error = %v, want ErrInvalidExpression", tc.expr, err)
			}
			// Check, which validates policies, fails as Compile does.
			if cerr := Check(tc.expr); cerr == nil || cerr.Error() != err.Error() {
				t.Fatalf("Check(%q) = %v, want Compile's error %v", tc.expr, cerr, err)
			}
		})
	}
	if n := i.cache.len(); n != 0 {
		t.Fatalf("invalid expressions were cached: %d entries", n)
	}
	for _, expr := range []string{"a.b", "request.object.spec.containers[?image == 'x'] | length(@)", "`{}`", "let $x = a in $x"} {
		if err := Check(expr); err != nil {
			t.Errorf("Check(%q) = %v", expr, err)
		}
	}
}

func TestOptions(t *testing.T) {
	tests := map[string]struct {
		opt     Option
		wantErr error
	}{
		"nil option":             {opt: nil},
		"clock":                  {opt: WithClock(time.Now)},
		"nil clock":              {opt: WithClock(nil), wantErr: ErrInvalidOption},
		"cache size":             {opt: WithCacheSize(10)},
		"cache disabled":         {opt: WithCacheSize(0)},
		"negative cache size":    {opt: WithCacheSize(-1), wantErr: ErrInvalidOption},
		"registry":               {opt: WithDefaultRegistry("registry.corp:5000")},
		"empty registry":         {opt: WithDefaultRegistry(""), wantErr: ErrInvalidOption},
		"registry with path":     {opt: WithDefaultRegistry("registry.corp/team"), wantErr: ErrInvalidOption},
		"registry mutation":      {opt: WithDefaultRegistryMutation(false)},
		"resolver":               {opt: WithResolver(testResolver)},
		"nil resolver":           {opt: WithResolver(nil), wantErr: ErrInvalidOption},
		"lookup timeout":         {opt: WithLookupTimeout(time.Second)},
		"non-positive timeout":   {opt: WithLookupTimeout(0), wantErr: ErrInvalidOption},
		"negative lookup timout": {opt: WithLookupTimeout(-time.Second), wantErr: ErrInvalidOption},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			i, err := New(tc.opt)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) || i != nil {
					t.Fatalf("New() = %v, %v; want nil and %v", i, err, tc.wantErr)
				}
				return
			}
			if err != nil || i == nil {
				t.Fatalf("New() = %v, %v", i, err)
			}
		})
	}
}

func TestCompileCache(t *testing.T) {
	t.Run("reuses compiled queries", func(t *testing.T) {
		i := newTestInterpreter(t)
		q1, err := i.Compile("a.b")
		if err != nil {
			t.Fatal(err)
		}
		q2, err := i.Compile("a.b")
		if err != nil {
			t.Fatal(err)
		}
		if q1 != q2 {
			t.Fatal("Compile did not reuse the cached query")
		}
	})
	t.Run("evicts least recently used", func(t *testing.T) {
		i := newTestInterpreter(t, WithCacheSize(2))
		compile := func(expr string) Query {
			t.Helper()
			q, err := i.Compile(expr)
			if err != nil {
				t.Fatal(err)
			}
			return q
		}
		a, b := compile("a"), compile("b")
		compile("a") // a becomes the most recently used
		compile("c") // evicts b
		if n := i.cache.len(); n != 2 {
			t.Fatalf("cache holds %d entries, want 2", n)
		}
		if compile("a") != a {
			t.Fatal("a was evicted, want b evicted")
		}
		if compile("b") == b {
			t.Fatal("b was not evicted")
		}
	})
	t.Run("disabled", func(t *testing.T) {
		i := newTestInterpreter(t, WithCacheSize(0))
		q1, err := i.Compile("a")
		if err != nil {
			t.Fatal(err)
		}
		q2, err := i.Compile("a")
		if err != nil {
			t.Fatal(err)
		}
		if q1 == q2 || i.cache.len() != 0 {
			t.Fatal("a disabled cache kept a query")
		}
	})
}

func TestConcurrentUse(t *testing.T) {
	i := newTestInterpreter(t, WithCacheSize(4))
	doc := mustJSON(t, admissionReview)
	shared, err := i.Compile("request.object.spec.containers[].image")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range 200 {
				// Distinct expressions churn the small cache.
				expr := fmt.Sprintf("to_upper(request.object.metadata.name) == 'MYPOD' && `%d` == `%d`", n%7, n%7)
				got, err := i.Search(expr, doc)
				if err != nil || got != true {
					errs <- fmt.Errorf("goroutine %d: Search(%q) = %v: %w", g, expr, got, err)
					return
				}
				images, err := shared.Search(doc)
				list, ok := images.([]any)
				if err != nil || !ok || !slices.Equal(list, []any{"nginx:1.25", "ghcr.io/acme/sidecar:v2", "busybox"}) {
					errs <- fmt.Errorf("goroutine %d: shared query = %v: %w", g, images, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if n := i.cache.len(); n > 4 {
		t.Fatalf("cache grew to %d entries, bound is 4", n)
	}
}
