package patch

import (
	"encoding/json"
	"sort"
	"strconv"
)

// deepCopy copies a JSON-compatible value. Maps and lists are copied
// recursively; scalars are immutable and shared.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, sub := range t {
			out[k] = deepCopy(sub)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, sub := range t {
			out[i] = deepCopy(sub)
		}
		return out
	default:
		return v
	}
}

func shallowCopy(m map[string]any) map[string]any {
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// isEmptyValue reports whether v is null, an empty map or an empty list.
func isEmptyValue(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}

// scalarText renders a scalar the way it appears as YAML scalar text once a
// JSON document is parsed as YAML: strings verbatim, numbers in JSON form,
// null as "null". Maps and lists have no scalar text.
func scalarText(v any) (string, bool) {
	switch t := v.(type) {
	case nil:
		return "null", true
	case string:
		return t, true
	case bool:
		return strconv.FormatBool(t), true
	case float64:
		b, err := json.Marshal(t)
		if err != nil {
			return strconv.FormatFloat(t, 'g', -1, 64), true
		}
		return string(b), true
	case int:
		return strconv.Itoa(t), true
	case int64:
		return strconv.FormatInt(t, 10), true
	}
	return "", false
}
