package document

import (
	"encoding/json"
	"io"
	"reflect"
	"strings"
)

var errIOEOF = io.EOF

// DeepCopy copies an untyped value.
func DeepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		return DeepCopyMap(t)
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = DeepCopy(e)
		}
		return out
	default:
		return v
	}
}

// DeepCopyMap copies an untyped object.
func DeepCopyMap(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = DeepCopy(v)
	}
	return out
}

// Normalize turns any JSON-serialisable Go value into the untyped form
// (numbers become float64, typed slices and maps become []any and
// map[string]any).
func Normalize(v any) (any, error) {
	switch v.(type) {
	case nil, string, float64, bool:
		return v, nil
	}
	if isUntyped(v) {
		return v, nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

func isUntyped(v any) bool {
	switch t := v.(type) {
	case nil, string, float64, bool:
		return true
	case map[string]any:
		for _, e := range t {
			if !isUntyped(e) {
				return false
			}
		}
		return true
	case []any:
		for _, e := range t {
			if !isUntyped(e) {
				return false
			}
		}
		return true
	}
	return false
}

// Number is v as a float64 when it is a number of any Go numeric type
// decoders give (float64 from JSON, int64 or int from YAML and Go code).
func Number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case float32:
		return float64(n), true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case int32:
		return float64(n), true
	case uint64:
		return float64(n), true
	}
	return 0, false
}

// Equal reports whether two untyped values are equal (maps by content,
// numbers by value).
func Equal(a, b any) bool {
	return reflect.DeepEqual(a, b)
}

// Get walks a path of keys through nested objects.
func Get(obj map[string]any, path ...string) (any, bool) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[p]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// String returns the string at path, or "".
func String(obj map[string]any, path ...string) string {
	v, _ := Get(obj, path...)
	s, _ := v.(string)
	return s
}

// Map returns the object at path, or nil.
func Map(obj map[string]any, path ...string) map[string]any {
	v, _ := Get(obj, path...)
	m, _ := v.(map[string]any)
	return m
}

// StringMap returns the map of strings at path (labels, annotations).
func StringMap(obj map[string]any, path ...string) map[string]string {
	m := Map(obj, path...)
	if m == nil {
		return nil
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		if s, ok := v.(string); ok {
			out[k] = s
		}
	}
	return out
}

// SetPath sets value at a dotted path, creating objects on the way. Keys
// are split on dots; use SetPathKeys for keys that contain dots.
func SetPath(obj map[string]any, dotted string, value any) {
	SetPathKeys(obj, strings.Split(dotted, "."), value)
}

// SetPathKeys sets value under a path of keys, creating objects on the way.
func SetPathKeys(obj map[string]any, keys []string, value any) {
	cur := obj
	for i, k := range keys {
		if i == len(keys)-1 {
			cur[k] = value
			return
		}
		next, ok := cur[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			cur[k] = next
		}
		cur = next
	}
}
