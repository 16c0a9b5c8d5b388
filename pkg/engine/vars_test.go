package engine

import (
	"testing"
)

func testContext(t testing.TB) (*Engine, *evalContext) {
	t.Helper()
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	c := &evalContext{jp: e.jp, data: map[string]any{
		"request": map[string]any{
			"operation": "CREATE",
			"object": map[string]any{
				"metadata": map[string]any{"name": "web", "labels": map[string]any{"app.kubernetes.io/name": "web"}},
				"spec":     map[string]any{"replicas": float64(3), "containers": []any{map[string]any{"name": "c", "image": "nginx"}}},
			},
			"oldObject": map[string]any{"metadata": map[string]any{"name": "old"}},
		},
		"key": "name",
	}}
	return e, c
}

func TestSubstitute(t *testing.T) {
	tests := map[string]struct {
		in   any
		mode substMode
		op   string
		want any
		err  bool
	}{
		"whole value keeps type":  {in: "{{ request.object.spec.replicas }}", want: float64(3)},
		"inside text":             {in: "n={{ request.object.metadata.name }}!", want: "n=web!"},
		"number inside text":      {in: "r={{ request.object.spec.replicas }}", want: "r=3"},
		"list inside text":        {in: "{{ request.object.spec.containers[].name }} x", want: `["c"] x`},
		"missing key is an error": {in: "{{ request.object.nothing }}", err: true},
		"missing key lenient":     {in: "a{{ request.object.nothing }}", mode: substLenient, want: "a"},
		"null value is null":      {in: "{{ request.object.spec.nothing || null }}", want: nil},
		"filter on missing":       {in: "{{ request.object.spec.volumes[?name=='x'] }}", want: nil},
		"missing inside function": {in: "{{ length(request.object.metadata.annotations || `{}`) }}", want: float64(0)},
		"quoted key":              {in: `{{ request.object.metadata.labels."app.kubernetes.io/name" }}`, want: "web"},
		"nested":                  {in: "{{ request.object.metadata.{{ key }} }}", want: "web"},
		"escaped":                 {in: `\{{ request.object.metadata.name }}`, want: "{{ request.object.metadata.name }}"},
		"default operator":        {in: "{{ request.object.metadata.labels.team || 'none' }}", want: "none"},
		"delete reads old":        {in: "{{ request.object.metadata.name }}", op: OpDelete, want: "old"},
		"keys too":                {in: map[string]any{"{{ key }}": "v"}, want: map[string]any{"name": "v"}},
		"in lists":                {in: []any{"{{ key }}", float64(1)}, want: []any{"name", float64(1)}},
		"strict error":            {in: "{{ request.object.metadata.name[ }}", err: true},
		"lenient error is empty":  {in: "{{ base64_decode('%%%') }}", mode: substLenient, want: ""},
		"no variables":            {in: "plain {text}", want: "plain {text}"},
	}
	e, c := testContext(t)
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := e.substitute(c, tc.in, tc.mode, tc.op)
			if tc.err {
				if err == nil {
					t.Fatalf("want an error, got %v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalAny(got, tc.want) {
				t.Fatalf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func equalAny(a, b any) bool {
	switch at := a.(type) {
	case map[string]any:
		bt, ok := b.(map[string]any)
		if !ok || len(at) != len(bt) {
			return false
		}
		for k, v := range at {
			if !equalAny(v, bt[k]) {
				return false
			}
		}
		return true
	case []any:
		bt, ok := b.([]any)
		if !ok || len(at) != len(bt) {
			return false
		}
		for i := range at {
			if !equalAny(at[i], bt[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

func TestAtVariable(t *testing.T) {
	e, c := testContext(t)
	got, err := e.substituteAt(c, "{{@}}", substStrict, "", "/metadata/(name)")
	if err != nil || got != "web" {
		t.Fatalf("got %v, %v", got, err)
	}
}

// FuzzSubstitute feeds arbitrary text with variables: substitution must
// never panic, in either mode.
func FuzzSubstitute(f *testing.F) {
	f.Add("{{ request.object.metadata.name }}")
	f.Add("a{{ b{{ c }} }}d")
	f.Add(`\{{ x }} {{ to_upper('a') }}`)
	f.Add("{{ {{ }} }}")
	f.Add("{{ request.object.spec.containers[?name=='c'].image | [0] }}")
	e, c := testContext(f)
	f.Fuzz(func(t *testing.T, s string) {
		_, _ = e.substitute(c, s, substStrict, "")
		_, _ = e.substitute(c, map[string]any{s: []any{s}}, substLenient, OpDelete)
	})
}
