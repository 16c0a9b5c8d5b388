package pattern

import (
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

type op int

const (
	opEqual op = iota
	opNotEqual
	opMore
	opMoreEqual
	opLess
	opLessEqual
	opInRange
	opNotInRange
)

var (
	inRange    = regexp.MustCompile(`^([0-9.]+[a-zA-Z]*)-([0-9.]+[a-zA-Z]*)$`)
	notInRange = regexp.MustCompile(`^([0-9.]+[a-zA-Z]*)!-([0-9.]+[a-zA-Z]*)$`)
)

// maybeRange is a cheap test before the range regular expressions: a
// range starts with a digit (after an optional "!") and holds a "-".
func maybeRange(p string) bool {
	p = strings.TrimPrefix(p, "!")
	return p != "" && p[0] >= '0' && p[0] <= '9' && strings.IndexByte(p, '-') > 0
}

func parseOp(p string) (op, string) {
	switch {
	case strings.HasPrefix(p, ">="):
		return opMoreEqual, p[2:]
	case strings.HasPrefix(p, "<="):
		return opLessEqual, p[2:]
	case strings.HasPrefix(p, ">"):
		return opMore, p[1:]
	case strings.HasPrefix(p, "<"):
		return opLess, p[1:]
	case strings.HasPrefix(p, "!") && len(p) > 1:
		if maybeRange(p) && notInRange.MatchString(p) {
			return opNotInRange, p
		}
		return opNotEqual, p[1:]
	}
	if maybeRange(p) {
		if notInRange.MatchString(p) {
			return opNotInRange, p
		}
		if inRange.MatchString(p) {
			return opInRange, p
		}
	}
	return opEqual, p
}

// Value reports whether a resource value satisfies a pattern value:
// booleans and numbers by equality, nil as the zero value, a map by type,
// strings by Kyverno's value language (`|` or, `&` and, `!` not, `>` `>=`
// `<` `<=`, ranges `a-b` and `a!-b`, durations, quantities, wildcards).
func Value(value, pattern any) bool {
	switch p := pattern.(type) {
	case bool:
		v, ok := value.(bool)
		return ok && v == p
	case float64:
		return numberPattern(value, p)
	case int64:
		return numberPattern(value, float64(p))
	case int:
		return numberPattern(value, float64(p))
	case nil:
		switch v := value.(type) {
		case nil:
			return true
		case float64:
			return v == 0
		case string:
			return v == ""
		case bool:
			return !v
		}
		return false
	case map[string]any:
		_, ok := value.(map[string]any)
		return ok
	case string:
		return stringPatterns(value, p)
	}
	return false
}

func numberPattern(value any, p float64) bool {
	switch v := value.(type) {
	case float64:
		return v == p
	case int64:
		return float64(v) == p
	case int:
		return float64(v) == p
	case string:
		if p == math.Trunc(p) {
			i, err := strconv.ParseInt(v, 10, 64)
			return err == nil && float64(i) == p
		}
		f, err := strconv.ParseFloat(v, 64)
		return err == nil && f == p
	}
	return false
}

func stringPatterns(value any, p string) bool {
	if s, ok := value.(string); ok && s == p {
		return true
	}
	for _, alt := range strings.Split(p, "|") {
		alt = strings.TrimSpace(alt)
		all := true
		for _, part := range strings.Split(alt, "&") {
			if !stringPattern(value, strings.TrimSpace(part)) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	return false
}

func stringPattern(value any, p string) bool {
	o, rest := parseOp(p)
	switch o {
	case opInRange:
		m := inRange.FindStringSubmatch(rest)
		return m != nil && stringPattern(value, ">="+m[1]) && stringPattern(value, "<="+m[2])
	case opNotInRange:
		rest = strings.TrimPrefix(rest, "!")
		m := notInRange.FindStringSubmatch(rest)
		if m == nil {
			m = notInRange.FindStringSubmatch(p)
		}
		return m != nil && (stringPattern(value, "<"+m[1]) || stringPattern(value, ">"+m[2]))
	}
	rest = strings.TrimSpace(rest)
	// Durations and quantities start with a digit, a sign or a dot; other
	// patterns skip the parse attempts.
	if rest != "" && strings.IndexByte("0123456789+-.", rest[0]) >= 0 {
		if res, ok := compareDuration(value, rest, o); ok {
			return res
		}
		if res, ok := compareQuantity(value, rest, o); ok {
			return res
		}
	}
	return compareString(value, rest, o)
}

// numberText renders a resource value for numeric parsing; a missing
// value counts as 0, as in Kyverno.
func numberText(v any) (string, bool) {
	switch t := v.(type) {
	case nil:
		return "0", true
	case string:
		return t, true
	case float64:
		if t == math.Trunc(t) && math.Abs(t) < 1e15 {
			return strconv.FormatInt(int64(t), 10), true
		}
		return strconv.FormatFloat(t, 'f', 6, 64), true
	case int64:
		return strconv.FormatInt(t, 10), true
	case int:
		return strconv.Itoa(t), true
	}
	return "", false
}

func cmpResult(c int, o op) (bool, bool) {
	switch o {
	case opEqual:
		return c == 0, true
	case opNotEqual:
		return c != 0, true
	case opMore:
		return c > 0, true
	case opLess:
		return c < 0, true
	case opMoreEqual:
		return c >= 0, true
	case opLessEqual:
		return c <= 0, true
	}
	return false, false
}

func compareDuration(value any, p string, o op) (bool, bool) {
	pd, err := time.ParseDuration(p)
	if err != nil {
		return false, false
	}
	vs, ok := numberText(value)
	if !ok {
		return false, false
	}
	vd, err := time.ParseDuration(vs)
	if err != nil {
		return false, false
	}
	c := 0
	if vd < pd {
		c = -1
	} else if vd > pd {
		c = 1
	}
	return cmpResult(c, o)
}

func compareQuantity(value any, p string, o op) (bool, bool) {
	pq, err := resource.ParseQuantity(p)
	if err != nil {
		return false, false
	}
	vs, ok := numberText(value)
	if !ok {
		return false, false
	}
	vq, err := resource.ParseQuantity(vs)
	if err != nil {
		return false, false
	}
	return cmpResult(vq.Cmp(pq), o)
}

func compareString(value any, p string, o op) bool {
	if o != opEqual && o != opNotEqual {
		return false
	}
	var s string
	switch v := value.(type) {
	case string:
		s = v
	case float64:
		if v == math.Trunc(v) && math.Abs(v) < 1e15 {
			s = strconv.FormatInt(int64(v), 10)
		} else {
			s = strconv.FormatFloat(v, 'E', -1, 64)
		}
	case int64:
		s = strconv.FormatInt(v, 10)
	case int:
		s = strconv.Itoa(v)
	case bool:
		s = strconv.FormatBool(v)
	default:
		return false
	}
	m := wildcard.Match(p, s)
	if o == opNotEqual {
		return !m
	}
	return m
}
