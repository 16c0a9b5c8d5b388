package pattern

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// The shared benchmark workload: Pod Security policies written as validate
// patterns, and 1,000 Pods.
const (
	benchPolicies = "../../../../shared/bench/pss-classic"
	benchPods     = "../../../../shared/bench/pods-1000.yaml"
)

// readDocs decodes every document of a YAML file.
func readDocs(tb testing.TB, path string) []map[string]any {
	tb.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		tb.Skipf("benchmark workload not available: %v", err)
	}
	var docs []map[string]any
	for _, part := range bytes.Split(raw, []byte("\n---")) {
		if len(bytes.TrimSpace(part)) == 0 {
			continue
		}
		v, err := document.Decode(part)
		if err != nil {
			tb.Fatalf("%s: %v", path, err)
		}
		if m, ok := v.(map[string]any); ok {
			docs = append(docs, m)
		}
	}
	return docs
}

// benchPatterns collects every pattern and anyPattern entry of the
// benchmark policies.
func benchPatterns(tb testing.TB) []any {
	tb.Helper()
	files, err := filepath.Glob(filepath.Join(benchPolicies, "*.yaml"))
	if err != nil || len(files) == 0 {
		tb.Skipf("benchmark policies not available: %v", err)
	}
	var pats []any
	var collect func(v any)
	collect = func(v any) {
		switch t := v.(type) {
		case map[string]any:
			for k, e := range t {
				switch k {
				case "pattern":
					pats = append(pats, e)
				case "anyPattern":
					if l, ok := e.([]any); ok {
						pats = append(pats, l...)
					}
				}
				collect(e)
			}
		case []any:
			for _, e := range t {
				collect(e)
			}
		}
	}
	for _, f := range files {
		for _, d := range readDocs(tb, f) {
			collect(d)
		}
	}
	return pats
}

func sameError(a, b *Error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return *a == *b
}

// TestCompiledMatchesReference checks the compiled walk against the walk
// it replaced (reference_test.go) on the benchmark workload and on
// metadata wildcard cases: same outcome, path and message.
func TestCompiledMatchesReference(t *testing.T) {
	pats := benchPatterns(t)
	pods := readDocs(t, benchPods)
	extra := []string{
		`{metadata: {annotations: {"a*": "x*"}}}`,
		`{=(metadata): {=(annotations): {=(a*): "x*", =(zz): "!y"}}}`,
		`{metadata: {labels: {"*": "?*", X(b*): null}, =(annotations): {"(c*": "1"}}}`,
		`{spec: {template: {metadata: {labels: {"app*": "w*"}}}}}`,
		`{metadata: {labels: {"a*": "*"}}}`,
		`{metadata: {labels: {"a*": {(x): 1}, b: 2}}}`,
	}
	for _, s := range extra {
		pats = append(pats, mustDecode(t, s))
	}
	res := []any{
		mustDecode(t, `{metadata: {annotations: {abc: xyz, ab: y, "(c)": "1"}, labels: {a: "", b1: 1, "(x)": 2, app: web}}, spec: {template: {metadata: {labels: {app: web, apple: x}}}}}`),
		mustDecode(t, `{metadata: {annotations: {abc: 1}, labels: {a: {x: 1}}}}`),
		mustDecode(t, `{metadata: {labels: [a]}}`),
	}
	for _, p := range pods {
		res = append(res, p)
	}
	for pi, p := range pats {
		c, rc := Compile(p), refCompile(p)
		for ri, r := range res {
			want := refValidate(r, p, nil)
			if got := Validate(r, p); !sameError(got, want) {
				t.Fatalf("pattern %d, resource %d: Validate = %+v, want %+v", pi, ri, got, want)
			}
			want = rc.Validate(r)
			if got := c.Validate(r); !sameError(got, want) {
				t.Fatalf("pattern %d, resource %d: compiled = %+v, want %+v", pi, ri, got, want)
			}
		}
	}
}

// FuzzCompiledMatchesReference compares the compiled walk with the
// reference walk on arbitrary resources and patterns.
func FuzzCompiledMatchesReference(f *testing.F) {
	f.Add(`{a: 1}`, `{a: ">0"}`)
	f.Add(`{spec: {containers: [{name: x, image: y}]}}`, `{spec: {containers: [{(name): "x*", image: "!z"}]}}`)
	f.Add(`{metadata: {labels: {ab: c}}}`, `{=(metadata): {labels: {=(a*): "c"}}}`)
	f.Add(`{m: [{a: b}, {a: c}]}`, `{^(m): [{a: c}], <(x): 1}`)
	f.Fuzz(func(t *testing.T, res, pat string) {
		r, err := document.Decode([]byte(res))
		if err != nil {
			return
		}
		p, err := document.Decode([]byte(pat))
		if err != nil {
			return
		}
		if hasDuplicateExpansion(p) {
			return // the reference expands into a map: its pick is random
		}
		got, want := Compile(p).Validate(r), refCompile(p).Validate(r)
		if !sameError(got, want) {
			t.Fatalf("compiled = %+v, reference = %+v", got, want)
		}
	})
}

// hasDuplicateExpansion reports patterns with more than one wildcard key
// in a labels or annotations object, or a wildcard key beside plain ones:
// two keys may expand to the same resource key.
func hasDuplicateExpansion(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		wild := 0
		for k, e := range t {
			if hasWildcardKey(map[string]any{k: nil}) {
				wild++
			}
			if hasDuplicateExpansion(e) {
				return true
			}
		}
		return wild > 1 || wild == 1 && len(t) > 1
	case []any:
		for _, e := range t {
			if hasDuplicateExpansion(e) {
				return true
			}
		}
	}
	return false
}

// BenchmarkValidate checks the benchmark Pods against every pattern of the
// benchmark policies, compiled once; one op is one Pod against them all.
// "reference" is the walk compiled trees replaced, for comparison.
func BenchmarkValidate(b *testing.B) {
	pats := benchPatterns(b)
	pods := readDocs(b, benchPods)
	compiled := make([]*Pattern, len(pats))
	reference := make([]*refPattern, len(pats))
	for i, p := range pats {
		compiled[i], reference[i] = Compile(p), refCompile(p)
	}
	b.Run("compiled", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			pod := pods[i%len(pods)]
			for _, c := range compiled {
				_ = c.Validate(pod)
			}
		}
	})
	b.Run("reference", func(b *testing.B) {
		b.ReportAllocs()
		for i := 0; i < b.N; i++ {
			pod := pods[i%len(pods)]
			for _, c := range reference {
				_ = c.Validate(pod)
			}
		}
	})
}
