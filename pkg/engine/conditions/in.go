package conditions

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/pattern"
	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// The set operators compare strings. A key that is a number or a bool is
// compared through its text ("5", "true", numbers formatted as Go's %v does),
// and so are the elements of list keys and values.
//
// The value may be:
//   - a list: an element matches a key item when either one, as a wildcard
//     pattern, matches the other;
//   - a string: a wildcard pattern, a range ("1-10", "100Mi-1Gi", "1h-2h";
//     AnyIn/AllIn family only), a JSON array of strings (as ConfigMap data
//     holds lists), or else a single item;
//   - for AnyIn/AnyNotIn with a list key, a single number or bool.
//
// Any other value type makes the condition false, for the "Not" operators
// too.

// anyIn implements AnyIn (not=false) and AnyNotIn (not=true).
//   - AnyIn: at least one key item is in the value set.
//   - AnyNotIn: at least one key item is not in the value set.
func anyIn(key, value any, not bool) bool {
	if keys, ok := key.([]any); ok {
		items := texts(keys)
		invalid, result := anySetInValue(items, value, not)
		return !invalid && result
	}
	k, ok := scalarText(key, true)
	if !ok {
		return false
	}
	invalid, exists := scalarInValue(k, value, true)
	if invalid {
		return false
	}
	return exists != not
}

// allIn implements AllIn (not=false) and AllNotIn (not=true).
//   - AllIn: every key item is in the value set (an empty key list is).
//   - AllNotIn: no key item is in the value set.
func allIn(key, value any, not bool) bool {
	if keys, ok := key.([]any); ok {
		items := texts(keys)
		invalid, result := allSetInValue(items, value, not)
		return !invalid && result
	}
	k, ok := scalarText(key, true)
	if !ok {
		return false
	}
	invalid, exists := scalarInValue(k, value, true)
	if invalid {
		return false
	}
	return exists != not
}

// in implements the deprecated In (not=false) and NotIn (not=true). They
// differ from AllIn/AnyNotIn in a few ways Kyverno kept for compatibility:
// list keys compare by exact string equality (no wildcards), a string value
// must be a pattern for a scalar key or a JSON array (no ranges, no single
// item), list values must hold only strings, and a bool key is unsupported.
func in(key, value any, not bool) bool {
	if keys, ok := key.([]any); ok {
		items := texts(keys)
		invalid, result := setInValueLegacy(items, value, not)
		return !invalid && result
	}
	k, ok := scalarText(key, false)
	if !ok {
		return false
	}
	invalid, exists := scalarInValue(k, value, false)
	if invalid {
		return false
	}
	return exists != not
}

// scalarInValue reports whether the key item k is in value, and whether value
// has a type the operators cannot use. ranges enables the range notation of
// the newer operators and lets a non-JSON string stand for itself.
func scalarInValue(k string, value any, ranges bool) (invalid, exists bool) {
	switch v := value.(type) {
	case []any:
		for _, item := range v {
			if matchEither(text(item), k) {
				return false, true
			}
		}
		return false, false
	case string:
		if wildcard.Match(v, k) {
			return false, true
		}
		if ranges && pattern.IsRange(v) {
			return false, pattern.Value(k, v)
		}
		arr, ok := stringList(v, ranges)
		if !ok {
			return true, false
		}
		for _, item := range arr {
			if item == k {
				return false, true
			}
		}
		return false, false
	}
	return true, false
}

// anySetInValue evaluates AnyIn (not=false) or AnyNotIn (not=true) for a list
// key.
func anySetInValue(keys []string, value any, not bool) (invalid, result bool) {
	var values []string
	switch v := value.(type) {
	case []any:
		values = texts(v)
	case float64, bool:
		values = []string{text(v)}
	case string:
		if len(keys) == 1 && keys[0] == v {
			return false, !not
		}
		if pattern.IsRange(v) {
			rng := v
			if not {
				// Kyverno turns "a-b" into "a!-b" and looks for a key
				// outside the range.
				rng = strings.Replace(v, "-", "!-", 1)
			}
			for _, k := range keys {
				if pattern.Value(k, rng) {
					return false, true
				}
			}
			return false, false
		}
		arr, ok := stringList(v, true)
		if !ok {
			return true, false
		}
		values = arr
	default:
		return true, false
	}
	if not {
		return false, anyNotIn(keys, values)
	}
	return false, anyMatch(keys, values)
}

// allSetInValue evaluates AllIn (not=false) or AllNotIn (not=true) for a list
// key.
func allSetInValue(keys []string, value any, not bool) (invalid, result bool) {
	var values []string
	switch v := value.(type) {
	case []any:
		values = texts(v)
	case string:
		if len(keys) == 1 && keys[0] == v {
			// Kyverno answers true here for AllNotIn as well, which is
			// plainly wrong; the key is in the value, so AllNotIn is false.
			return false, !not
		}
		if pattern.IsRange(v) {
			for _, k := range keys {
				if pattern.Value(k, v) == not {
					return false, false
				}
			}
			return false, true
		}
		arr, ok := stringList(v, true)
		if !ok {
			return true, false
		}
		values = arr
	default:
		return true, false
	}
	for _, k := range keys {
		found := false
		for _, val := range values {
			if matchEither(val, k) {
				found = true
				break
			}
		}
		if found == not {
			return false, false
		}
	}
	return false, true
}

// setInValueLegacy evaluates the deprecated In (not=false) and NotIn
// (not=true) for a list key: exact string membership.
func setInValueLegacy(keys []string, value any, not bool) (invalid, result bool) {
	var values []string
	switch v := value.(type) {
	case []any:
		values = make([]string, 0, len(v))
		for _, item := range v {
			s, ok := item.(string)
			if !ok {
				return true, false
			}
			values = append(values, s)
		}
	case string:
		if len(keys) == 1 && keys[0] == v {
			// As for AllNotIn, Kyverno says true for NotIn too; the key is
			// in the value, so NotIn is false here.
			return false, !not
		}
		arr, ok := stringList(v, false)
		if !ok {
			return true, false
		}
		values = arr
	default:
		return true, false
	}
	set := make(map[string]struct{}, len(values))
	for _, v := range values {
		set[v] = struct{}{}
	}
	for _, k := range keys {
		if _, found := set[k]; !found {
			// In fails on the first missing item; NotIn succeeds on it.
			return false, not
		}
	}
	return false, !not
}

func anyMatch(keys, values []string) bool {
	for _, k := range keys {
		for _, v := range values {
			if matchEither(k, v) {
				return true
			}
		}
	}
	return false
}

func anyNotIn(keys, values []string) bool {
	for _, k := range keys {
		found := false
		for _, v := range values {
			if matchEither(k, v) {
				found = true
				break
			}
		}
		if !found {
			return true
		}
	}
	return false
}

// matchEither reports whether a matches b or b matches a, each taken as a
// wildcard pattern: a key "kube-*" is in ["kube-system"] and the other way
// round.
func matchEither(a, b string) bool {
	return wildcard.Match(a, b) || wildcard.Match(b, a)
}

// stringList reads s as a JSON array of strings. When lenient is set, a
// string that is not JSON at all stands for a one-item list; otherwise, and
// for JSON that is not an array of strings, ok is false.
func stringList(s string, lenient bool) (arr []string, ok bool) {
	if lenient && !json.Valid([]byte(s)) {
		return []string{s}, true
	}
	if err := json.Unmarshal([]byte(s), &arr); err != nil {
		return nil, false
	}
	return arr, true
}

// scalarText turns a scalar key into the text the set operators compare.
// withBool admits bool keys, which the deprecated In and NotIn do not.
func scalarText(key any, withBool bool) (string, bool) {
	switch k := key.(type) {
	case string:
		return k, true
	case float64:
		return text(k), true
	case bool:
		if withBool {
			return text(k), true
		}
	}
	return "", false
}

func texts(items []any) []string {
	out := make([]string, len(items))
	for i, item := range items {
		out[i] = text(item)
	}
	return out
}

// text formats a value as Kyverno does before comparing it as a string
// (Go's %v: 1 is "1", 1e6 is "1e+06", true is "true").
func text(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return fmt.Sprint(normalize(v))
}
