package patch

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// Value matching for anchor conditions, following Kyverno's pattern value
// syntax: a string pattern is a list of alternatives separated by "|", each
// a conjunction of terms separated by "&". A term is an optional operator
// ("!", ">", "<", ">=", "<=") followed by an operand, or a range "a-b" /
// "a!-b". Operands compare as durations ("1h"), then as quantities ("1Gi",
// "3"), then as strings with the wildcards "*" (any run) and "?" (exactly
// one character). Non-string patterns compare by type: booleans exactly,
// numbers numerically, null matches zero values, a map matches any map.

type valueOp string

const (
	opEqual      valueOp = ""
	opNotEqual   valueOp = "!"
	opMore       valueOp = ">"
	opLess       valueOp = "<"
	opMoreEqual  valueOp = ">="
	opLessEqual  valueOp = "<="
	opInRange    valueOp = "-"
	opNotInRange valueOp = "!-"
)

var (
	inRangeRe    = regexp.MustCompile(`^(\d+(?:\.\d+)?[^-]*)-(\d+(?:\.\d+)?[^-]*)$`)
	notInRangeRe = regexp.MustCompile(`^(\d+(?:\.\d+)?[^-]*)!-(\d+(?:\.\d+)?[^-]*)$`)
)

// matchValue reports whether the resource value matches the pattern value.
func matchValue(value, pattern any) bool {
	switch p := pattern.(type) {
	case bool:
		v, ok := value.(bool)
		return ok && v == p
	case int:
		return matchNumber(value, float64(p))
	case int64:
		return matchNumber(value, float64(p))
	case float64:
		return matchNumber(value, p)
	case nil:
		return matchNil(value)
	case map[string]any:
		_, ok := value.(map[string]any)
		return ok
	case string:
		return matchStringPattern(value, p)
	default:
		return false
	}
}

func matchNumber(value any, pattern float64) bool {
	switch v := value.(type) {
	case int:
		return float64(v) == pattern
	case int64:
		return float64(v) == pattern
	case float64:
		return v == pattern
	case string:
		f, err := strconv.ParseFloat(v, 64)
		return err == nil && f == pattern
	default:
		return false
	}
}

func matchNil(value any) bool {
	switch v := value.(type) {
	case nil:
		return true
	case float64:
		return v == 0
	case int:
		return v == 0
	case int64:
		return v == 0
	case string:
		return v == ""
	case bool:
		return !v
	default:
		return false
	}
}

func matchStringPattern(value any, pattern string) bool {
	if s, ok := value.(string); ok && s == pattern {
		return true
	}
	for _, alternative := range strings.Split(pattern, "|") {
		if matchConjunction(value, strings.TrimSpace(alternative)) {
			return true
		}
	}
	return false
}

func matchConjunction(value any, pattern string) bool {
	for _, term := range strings.Split(pattern, "&") {
		if !matchTerm(value, strings.TrimSpace(term)) {
			return false
		}
	}
	return true
}

func operatorOf(pattern string) valueOp {
	if len(pattern) < 2 {
		return opEqual
	}
	for _, op := range []valueOp{opMoreEqual, opLessEqual, opMore, opLess, opNotEqual} {
		if strings.HasPrefix(pattern, string(op)) {
			return op
		}
	}
	if notInRangeRe.MatchString(pattern) {
		return opNotInRange
	}
	if inRangeRe.MatchString(pattern) {
		return opInRange
	}
	return opEqual
}

func matchTerm(value any, pattern string) bool {
	switch op := operatorOf(pattern); op {
	case opInRange:
		m := inRangeRe.FindStringSubmatch(pattern)
		return m != nil && compareOperand(value, m[1], opMoreEqual) && compareOperand(value, m[2], opLessEqual)
	case opNotInRange:
		m := notInRangeRe.FindStringSubmatch(pattern)
		return m != nil && (compareOperand(value, m[1], opLess) || compareOperand(value, m[2], opMore))
	default:
		return compareOperand(value, strings.TrimSpace(pattern[len(op):]), op)
	}
}

// compareOperand compares value with one operand: as durations when both
// parse as durations, else as quantities, else as (wildcard) strings.
func compareOperand(value any, operand string, op valueOp) bool {
	if res, ok := compareDurations(value, operand, op); ok {
		return res
	}
	if res, ok := compareQuantities(value, operand, op); ok {
		return res
	}
	return compareStrings(value, operand, op)
}

func compareDurations(value any, operand string, op valueOp) (bool, bool) {
	want, err := time.ParseDuration(operand)
	if err != nil {
		return false, false
	}
	s, ok := numberText(value)
	if !ok {
		return false, false
	}
	got, err := time.ParseDuration(s)
	if err != nil {
		return false, false
	}
	return compareOrdered(cmpInt(int64(got), int64(want)), op)
}

func compareQuantities(value any, operand string, op valueOp) (bool, bool) {
	want, err := resource.ParseQuantity(operand)
	if err != nil {
		return false, false
	}
	s, ok := numberText(value)
	if !ok {
		return false, false
	}
	got, err := resource.ParseQuantity(s)
	if err != nil {
		return false, false
	}
	return compareOrdered(got.Cmp(want), op)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func compareOrdered(c int, op valueOp) (bool, bool) {
	switch op {
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

// numberText renders a value for duration and quantity parsing, as Kyverno
// does: null counts as zero, floats use a fixed six-decimal form.
func numberText(value any) (string, bool) {
	switch v := value.(type) {
	case nil:
		return "0", true
	case string:
		return v, true
	case float64:
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return "", false
		}
		return fmt.Sprintf("%f", v), true
	case int64:
		return strconv.FormatInt(v, 10), true
	case int:
		return strconv.Itoa(v), true
	}
	return "", false
}

func compareStrings(value any, operand string, op valueOp) bool {
	if op != opEqual && op != opNotEqual {
		return false
	}
	var s string
	switch v := value.(type) {
	case string:
		s = v
	case float64:
		s = strconv.FormatFloat(v, 'E', -1, 64)
	case int:
		s = strconv.Itoa(v)
	case int64:
		s = strconv.FormatInt(v, 10)
	case bool:
		s = strconv.FormatBool(v)
	default:
		return false
	}
	matched := wildcardMatch(operand, s)
	if op == opNotEqual {
		return !matched
	}
	return matched
}

// wildcardMatch matches s against pattern where "*" matches any run of
// characters (including none) and "?" matches exactly one character.
func wildcardMatch(pattern, s string) bool {
	p, str := []rune(pattern), []rune(s)
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(str) {
		switch {
		case pi < len(p) && (p[pi] == '?' || p[pi] == str[si]):
			pi++
			si++
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, si
			pi++
		case star >= 0:
			pi = star + 1
			mark++
			si = mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}

func hasWildcard(s string) bool {
	return strings.ContainsAny(s, "*?")
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
