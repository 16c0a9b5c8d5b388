package patch

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// RFC6902 applies JSON patch operations (a JSON list) with the JSON patch
// library, as the API server applies a MutatingAdmissionPolicy's
// JSONPatch: the oracle ApplyOperations is checked against. Strictly (a
// missing parent, or removing what is not there, is an error); a failed
// "test" leaves the resource as it was.
func RFC6902(resource map[string]any, ops []byte) (Result, error) {
	p, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		return Result{}, fmt.Errorf("%w: decode JSON patch: %w", ErrInvalidPatch, err)
	}
	doc, err := json.Marshal(resource)
	if err != nil {
		return Result{}, fmt.Errorf("%w: encode resource: %w", ErrApply, err)
	}
	opts := jsonpatch.NewApplyOptions()
	opts.SupportNegativeIndices = true
	patched, err := p.ApplyWithOptions(doc, opts)
	if errors.Is(err, jsonpatch.ErrTestFailed) {
		return newResult(resource, deepCopy(resource).(map[string]any), "test operation failed"), nil
	}
	if err != nil {
		return Result{}, fmt.Errorf("%w: %w", ErrApply, err)
	}
	var out map[string]any
	if err := json.Unmarshal(patched, &out); err != nil {
		return Result{}, fmt.Errorf("%w: decode patched resource: %w", ErrApply, err)
	}
	if out == nil {
		out = map[string]any{}
	}
	return newResult(resource, out, ""), nil
}

// opsOf reads RFC 6902 operations from JSON, as Operations.
func opsOf(t testing.TB, raw []byte) ([]Operation, bool) {
	t.Helper()
	var list []map[string]json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, false
	}
	out := make([]Operation, 0, len(list))
	for _, m := range list {
		var op Operation
		for k, v := range m {
			switch k {
			case "op", "path", "from":
				var s string
				if json.Unmarshal(v, &s) != nil {
					return nil, false
				}
				switch k {
				case "op":
					op.Op = s
				case "path":
					op.Path = s
				case "from":
					op.From = s
				}
			case "value":
				if json.Unmarshal(v, &op.Value) != nil {
					return nil, false
				}
				op.HasValue = true
			}
		}
		out = append(out, op)
	}
	return out, true
}

// FuzzApplyOperations: the in-memory operations give what RFC6902 (the
// JSON patch library, which the API server's MutatingAdmissionPolicy
// uses) gives: the same document, or an error both times.
func FuzzApplyOperations(f *testing.F) {
	pod := `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"a","labels":{"x/y":"1"}},"spec":{"containers":[{"name":"c","image":"i"},{"name":"d"}],"n":[1,2,3]}}`
	for _, ops := range []string{
		`[{"op":"add","path":"/spec/containers/-","value":{"name":"e"}}]`,
		`[{"op":"add","path":"/spec/n/-1","value":9}]`,
		`[{"op":"add","path":"/spec/n/0","value":0},{"op":"remove","path":"/spec/n/-1"}]`,
		`[{"op":"replace","path":"/metadata/labels/x~1y","value":"2"}]`,
		`[{"op":"move","from":"/spec/n","path":"/spec/m"}]`,
		`[{"op":"copy","from":"/spec/containers/0","path":"/spec/containers/1"}]`,
		`[{"op":"test","path":"/spec/n/1","value":2.0},{"op":"remove","path":"/spec"}]`,
		`[{"op":"test","path":"/spec/n/1","value":3}]`,
		`[{"op":"add","path":"/spec/missing/x","value":1}]`,
		`[{"op":"remove","path":"/metadata/annotations"}]`,
		`[{"op":"replace","path":"","value":{"kind":"Other"}}]`,
		`[{"op":"move","from":"/spec","path":"/spec/x"}]`,
		`[{"op":"add","path":"/spec/n/4","value":1}]`,
		`[{"op":"add","path":"/spec/n/01","value":1}]`,
	} {
		f.Add([]byte(pod), []byte(ops))
	}
	f.Fuzz(func(t *testing.T, docJSON, opsJSON []byte) {
		var doc map[string]any
		if json.Unmarshal(docJSON, &doc) != nil || doc == nil {
			return
		}
		ops, ok := opsOf(t, opsJSON)
		if !ok {
			return
		}
		for _, op := range ops {
			if op.Op == "test" && !op.HasValue {
				return // the library crashes on it (a nil dereference)
			}
			if (op.Path == "" && op.Op != "replace" && op.Op != "test") || (op.From == "" && (op.Op == "move" || op.Op == "copy")) {
				return // the library reads "" as the key "" there
			}
			// The library reads an empty key ("/", "/a//b") as the
			// object itself, which RFC 6901 does not: left out.
			for _, p := range []string{op.Path, op.From} {
				if p == "/" || strings.Contains(p, "//") || strings.HasSuffix(p, "/") || (p != "" && p[0] != '/') {
					return // nor a pointer without its leading /
				}
			}
		}
		// The library reads the operations as the engine writes them
		// (json.Marshal of JSON values: 2.0 is 2), as it does in a
		// mutation.
		canon := make([]map[string]any, len(ops))
		for i, op := range ops {
			m := map[string]any{"op": op.Op, "path": op.Path}
			if op.From != "" {
				m["from"] = op.From
			}
			if op.HasValue {
				m["value"] = op.Value
			}
			canon[i] = m
		}
		libOps, err := json.Marshal(canon)
		if err != nil {
			return
		}
		want, wantErr := RFC6902(doc, libOps)
		got, gotErr := ApplyOperations(doc, ops)
		if (wantErr != nil) != (gotErr != nil) {
			t.Fatalf("library err %v, in memory err %v\ndoc %s\nops %s", wantErr, gotErr, docJSON, opsJSON)
		}
		if wantErr != nil {
			if !errors.Is(gotErr, ErrApply) && !errors.Is(gotErr, ErrInvalidPatch) {
				t.Fatalf("error %v wraps neither ErrApply nor ErrInvalidPatch", gotErr)
			}
			return
		}
		if !jsonEqual(want.Object, got.Object) || want.Changed != got.Changed {
			t.Fatalf("library %v (changed %v)\nin memory %v (changed %v)\ndoc %s\nops %s", want.Object, want.Changed, got.Object, got.Changed, docJSON, opsJSON)
		}
	})
}
