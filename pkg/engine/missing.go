package engine

import (
	"errors"
	"strconv"
)

// ErrUnknownKey marks a variable that names a field the data does not
// have. Kyverno's JMESPath raises it where standard JMESPath gives null:
// substitution then fails (or, in conditions, gives an empty string).
var ErrUnknownKey = errors.New("unknown key")

// pathStep is one step of a plain field path: a key, then indexes.
type pathStep struct {
	key     string
	indexes []int
}

// parsePlainPath reads a plain field path (a.b."c.d"[0].e). It returns
// false for any other expression (functions, filters, projections, `||`
// defaults): their null is a value, not a missing key.
func parsePlainPath(expr string) ([]pathStep, bool) {
	var steps []pathStep
	i := 0
	for {
		var step pathStep
		switch {
		case i < len(expr) && expr[i] == '"':
			j := i + 1
			for j < len(expr) && expr[j] != '"' {
				if expr[j] == '\\' {
					return nil, false
				}
				j++
			}
			if j >= len(expr) {
				return nil, false
			}
			step.key, i = expr[i+1:j], j+1
		case i < len(expr) && isIdentStart(expr[i]):
			j := i + 1
			for j < len(expr) && isIdentPart(expr[j]) {
				j++
			}
			step.key, i = expr[i:j], j
		default:
			return nil, false
		}
		for i < len(expr) && expr[i] == '[' {
			j := i + 1
			for j < len(expr) && expr[j] >= '0' && expr[j] <= '9' {
				j++
			}
			if j == i+1 || j >= len(expr) || expr[j] != ']' {
				return nil, false
			}
			n, err := strconv.Atoi(expr[i+1 : j])
			if err != nil {
				return nil, false
			}
			step.indexes = append(step.indexes, n)
			i = j + 1
		}
		steps = append(steps, step)
		if i == len(expr) {
			return steps, true
		}
		if expr[i] != '.' {
			return nil, false
		}
		i++
	}
}

// missingPath reports whether expr is a plain field path that names a key
// absent from data. A path through a non-object or past the end of a list
// is null in both JMESPath dialects, not missing.
func missingPath(expr string, data any) bool {
	steps, ok := parsePlainPath(expr)
	if !ok {
		return false
	}
	cur := data
	for _, st := range steps {
		m, isMap := cur.(map[string]any)
		if !isMap {
			return false
		}
		v, found := m[st.key]
		if !found {
			return true
		}
		cur = v
		for _, n := range st.indexes {
			list, isList := cur.([]any)
			if !isList || n >= len(list) {
				return false
			}
			cur = list[n]
		}
	}
	return false
}

func isIdentStart(c byte) bool {
	return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isIdentPart(c byte) bool {
	return isIdentStart(c) || (c >= '0' && c <= '9')
}
