package pattern

import (
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// This file is the engine's value language: how one resource value is
// checked against one pattern value. Validate patterns, mutate conditional
// anchors and the range values of the AnyIn/AllIn condition operators all
// come here. The rules are those of Kyverno's pattern.Validate and
// operator.GetOperatorFromStringPattern:
//
//   - a boolean pattern matches the same boolean;
//   - a number pattern matches an equal number, or a string that parses to
//     it (as an integer when the pattern is an integer: "80.0" is not 80);
//   - null matches null, 0, "" and false; an object matches any object;
//   - a string pattern is alternatives separated by "|", each a conjunction
//     of terms separated by "&" (spaces around them are dropped, tabs and
//     newlines are not: "\t>5" has no operator). A term is
//     an operator (">=", "<=", ">", "<", "!") and an operand, or a range
//     "a-b" (inclusive) or "a!-b" (outside). An operand compares as a
//     duration ("90s" < "2m") when both sides parse as one, else as a
//     quantity ("1Gi" > "512Mi", "3" = "3.0"), else, for equality and "!"
//     only, as a wildcard pattern (package wildcard) on the value's text.
//
// Documents hold every number as a float64. Kubernetes decodes an integer as
// an int64 and Kyverno's answers depend on it, so a float64 with no
// fraction (in the int64 range) is read as an integer: 80 is "80" in text,
// 2.5 is "2.5E+00" for wildcards and "2.500000" for durations and
// quantities.
//
// Mutate conditions read an anchor's scalar value and the resource's scalar
// as YAML text before asking (package patch, checkCondition), as Kyverno's
// mutate path does.

// operator is the leading operator of one term of a string pattern.
type operator int

const (
	opEqual operator = iota
	opNotEqual
	opMore
	opMoreEqual
	opLess
	opLessEqual
	opInRange
	opNotInRange
)

// Value reports whether a resource value satisfies a pattern value.
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
		case int64:
			return v == 0
		case int:
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
		return stringPattern(value, p)
	}
	return false
}

// IsRange reports whether s, as a whole, is an inclusive range "a-b" of
// the value language (two numbers, each with an optional sign and unit).
func IsRange(s string) bool {
	return parseOperator(s) == opInRange
}

// asInt returns f as an integer when it has no fraction and fits an int64.
func asInt(f float64) (int64, bool) {
	if f != math.Trunc(f) || f < -(1<<63) || f >= 1<<63 {
		return 0, false
	}
	return int64(f), true
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
		if pi, ok := asInt(p); ok {
			i, err := strconv.ParseInt(v, 10, 64)
			return err == nil && i == pi
		}
		f, err := strconv.ParseFloat(v, 64)
		return err == nil && f == p
	}
	return false
}

// stringPattern checks alternatives ("|") of conjunctions ("&") of terms.
func stringPattern(value any, p string) bool {
	if s, ok := value.(string); ok && s == p {
		return true
	}
	for rest, more := p, true; more; {
		var alt string
		alt, rest, more = strings.Cut(rest, "|")
		if conjunction(value, strings.Trim(alt, " ")) {
			return true
		}
	}
	return false
}

func conjunction(value any, alt string) bool {
	for rest, more := alt, true; more; {
		var t string
		t, rest, more = strings.Cut(rest, "&")
		if !term(value, strings.Trim(t, " ")) {
			return false
		}
	}
	return true
}

func term(value any, t string) bool {
	op, n := prefixOperator(t)
	if n == 0 && len(t) >= 2 {
		switch lo, hi, r := splitRange(t); r {
		case opInRange:
			return compare(value, lo, opMoreEqual) && compare(value, hi, opLessEqual)
		case opNotInRange:
			return compare(value, lo, opLess) || compare(value, hi, opMore)
		}
	}
	return compare(value, strings.TrimSpace(t[n:]), op)
}

// parseOperator reads the operator of a term: a term shorter than two
// characters is compared for equality, then the prefixes ">=", "<=", ">",
// "<" and "!" are tried, then the two range forms.
func parseOperator(t string) operator {
	op, n := prefixOperator(t)
	if n == 0 && len(t) >= 2 {
		if _, _, r := splitRange(t); r != opEqual {
			return r
		}
	}
	return op
}

// prefixOperator reads a leading ">=", "<=", ">", "<" or "!" and its
// length; terms shorter than two characters have none.
func prefixOperator(t string) (operator, int) {
	if len(t) < 2 {
		return opEqual, 0
	}
	switch t[0] {
	case '>':
		if t[1] == '=' {
			return opMoreEqual, 2
		}
		return opMore, 1
	case '<':
		if t[1] == '=' {
			return opLessEqual, 2
		}
		return opLess, 1
	case '!':
		return opNotEqual, 1
	}
	return opEqual, 0
}

// splitRange splits "a-b" (opInRange) or "a!-b" (opNotInRange) into its
// bounds; anything else gives opEqual. A bound is an optional sign ("-",
// "+", "|"), digits, an optional fraction and optional ASCII letters: the
// regular expression `[-|+]?\d+(\.\d+)?[A-Za-z]*` Kyverno uses, read by
// hand. "1h30m-2h" and "1e3-2e3" are not ranges.
func splitRange(t string) (lo, hi string, op operator) {
	end := scanBound(t, 0)
	if end < 0 {
		return "", "", opEqual
	}
	var next int
	switch {
	case strings.HasPrefix(t[end:], "!-"):
		op, next = opNotInRange, end+2
	case strings.HasPrefix(t[end:], "-"):
		op, next = opInRange, end+1
	default:
		return "", "", opEqual
	}
	if scanBound(t, next) != len(t) {
		return "", "", opEqual
	}
	return t[:end], t[next:], op
}

// scanBound returns the end of the range bound starting at s[i], or -1.
func scanBound(s string, i int) int {
	if i < len(s) && (s[i] == '-' || s[i] == '+' || s[i] == '|') {
		i++
	}
	j := skipDigits(s, i)
	if j == i {
		return -1
	}
	if j+1 < len(s) && s[j] == '.' && isDigit(s[j+1]) {
		j = skipDigits(s, j+1)
	}
	for j < len(s) && (s[j] >= 'a' && s[j] <= 'z' || s[j] >= 'A' && s[j] <= 'Z') {
		j++
	}
	return j
}

func skipDigits(s string, i int) int {
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// compare checks value against one operand: as durations, else as
// quantities, else as text.
func compare(value any, operand string, op operator) bool {
	// Operands that cannot be durations or quantities skip the parse
	// attempts (FuzzOperandStart holds the parsers to these sets).
	if operand != "" && strings.IndexByte(quantityStart, operand[0]) >= 0 {
		if strings.IndexByte(durationStart, operand[0]) >= 0 {
			if res, ok := compareDuration(value, operand, op); ok {
				return res
			}
		}
		if res, ok := compareQuantity(value, operand, op); ok {
			return res
		}
	}
	return compareText(value, operand, op)
}

// The first characters of a duration ("-1.5h", ".5s") and of a quantity,
// which may also start with its suffix: "m", "Ki" and "e3" read as 0.
const (
	durationStart = "0123456789+-."
	quantityStart = durationStart + "eEinumkKMGTP"
)

// numberText renders a resource value for duration and quantity parsing:
// null is 0, an integer its digits, another number six decimals.
func numberText(v any) (string, bool) {
	switch t := v.(type) {
	case nil:
		return "0", true
	case string:
		return t, true
	case float64:
		if i, ok := asInt(t); ok {
			return strconv.FormatInt(i, 10), true
		}
		return strconv.FormatFloat(t, 'f', 6, 64), true
	case int64:
		return strconv.FormatInt(t, 10), true
	case int:
		return strconv.Itoa(t), true
	}
	return "", false
}

func ordered(c int, op operator) bool {
	switch op {
	case opEqual:
		return c == 0
	case opNotEqual:
		return c != 0
	case opMore:
		return c > 0
	case opLess:
		return c < 0
	case opMoreEqual:
		return c >= 0
	case opLessEqual:
		return c <= 0
	}
	return false
}

func compareDuration(value any, operand string, op operator) (bool, bool) {
	pd, err := time.ParseDuration(operand)
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
	return ordered(c, op), true
}

func compareQuantity(value any, operand string, op operator) (bool, bool) {
	pq, ok := ParseQuantity(operand)
	if !ok {
		return false, false
	}
	vs, ok := numberText(value)
	if !ok {
		return false, false
	}
	vq, ok := ParseQuantity(vs)
	if !ok {
		return false, false
	}
	return ordered(vq.Cmp(pq), op), true
}

// compareText matches the value's text against a wildcard operand, for
// equality and "!" only. Null, objects and lists have no text.
func compareText(value any, operand string, op operator) bool {
	if op != opEqual && op != opNotEqual {
		return false
	}
	var s string
	switch v := value.(type) {
	case string:
		s = v
	case float64:
		if i, ok := asInt(v); ok {
			s = strconv.FormatInt(i, 10)
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
	return wildcard.Match(operand, s) == (op == opEqual)
}

// ValueCost is an upper bound of the work of Value(value, pattern), in the
// units of Meter: the pattern's length, and for each of its terms the
// value's text and the term's wildcard (wildcard.Cost). It reads the
// pattern once.
func ValueCost(value, pattern any) int64 {
	p, ok := pattern.(string)
	if !ok {
		return 1
	}
	n := textLen(value)
	cost := int64(len(p)) + int64(n)
	for rest, more := p, true; more; {
		var alt string
		alt, rest, more = strings.Cut(rest, "|")
		for rest2, more2 := alt, true; more2; {
			var t string
			t, rest2, more2 = strings.Cut(rest2, "&")
			cost += wildcard.Cost(t, n)
		}
	}
	return cost
}

// textLen is the length of the text a value compares as: a string's own,
// a number's or boolean's at most 32 bytes.
func textLen(v any) int {
	if s, ok := v.(string); ok {
		return len(s)
	}
	return 32
}
