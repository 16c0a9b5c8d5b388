package conditions

import (
	"regexp"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Range notation in AnyIn/AllIn values: "low-high" is inclusive, "low!-high"
// is its complement. The bounds are numbers with an optional unit, so ranges
// of plain numbers, quantities ("100Mi-1Gi") and durations ("1h-2h") work.
var (
	inRangeRe    = regexp.MustCompile(`^([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)-([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)$`)
	notInRangeRe = regexp.MustCompile(`^([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)!-([-|\+]?\d+(?:\.\d+)?[A-Za-z]*)$`)
)

// isRange reports whether s uses the "a-b" range notation as a whole.
func isRange(s string) bool {
	// Cheap test first: most values have no digit-dash-digit shape.
	if len(s) < 3 || !strings.Contains(s[1:], "-") {
		return false
	}
	return operatorOf(s) == relInRange
}

type relOp int

const (
	relEqual relOp = iota
	relNotEqual
	relMore
	relMoreEqual
	relLess
	relLessEqual
	relInRange
	relNotInRange
)

// operatorOf reads the leading operator of a value pattern, as Kyverno's
// pattern language spells it.
func operatorOf(p string) relOp {
	if len(p) < 2 {
		return relEqual
	}
	switch {
	case strings.HasPrefix(p, ">="):
		return relMoreEqual
	case strings.HasPrefix(p, "<="):
		return relLessEqual
	case p[0] == '>':
		return relMore
	case p[0] == '<':
		return relLess
	case p[0] == '!':
		return relNotEqual
	case notInRangeRe.MatchString(p):
		return relNotInRange
	case inRangeRe.MatchString(p):
		return relInRange
	}
	return relEqual
}

func opLen(op relOp) int {
	switch op {
	case relMoreEqual, relLessEqual:
		return 2
	case relMore, relLess, relNotEqual:
		return 1
	}
	return 0
}

// matchValuePattern checks a string against a value pattern of Kyverno's
// pattern language ("a|b" alternatives of "x&y" conjunctions of operator
// terms), which is how Kyverno evaluates a range given to AnyIn and friends.
func matchValuePattern(value, pattern string) bool {
	if value == pattern {
		return true
	}
	for _, alt := range strings.Split(pattern, "|") {
		alt = strings.Trim(alt, " ")
		all := true
		for _, term := range strings.Split(alt, "&") {
			if !matchTerm(value, strings.Trim(term, " ")) {
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

func matchTerm(value, term string) bool {
	switch op := operatorOf(term); op {
	case relInRange:
		m := inRangeRe.FindStringSubmatch(term)
		if m == nil {
			return false
		}
		return matchTerm(value, ">= "+m[1]) && matchTerm(value, "<= "+m[2])
	case relNotInRange:
		m := notInRangeRe.FindStringSubmatch(term)
		if m == nil {
			return false
		}
		return matchTerm(value, "< "+m[1]) || matchTerm(value, "> "+m[2])
	default:
		operand := strings.TrimSpace(term[opLen(op):])
		return compareTerm(value, operand, op)
	}
}

// compareTerm compares value with operand under op: as durations when both
// parse as durations, else as quantities when both parse as quantities,
// else as a wildcard pattern (for = and ! only).
func compareTerm(value, operand string, op relOp) bool {
	if od, err := time.ParseDuration(operand); err == nil {
		if vd, err := time.ParseDuration(value); err == nil {
			return relSign(cmpDuration(vd, od), op)
		}
	}
	if oq, err := resource.ParseQuantity(operand); err == nil {
		if vq, err := resource.ParseQuantity(value); err == nil {
			return relSign(vq.Cmp(oq), op)
		}
	}
	switch op {
	case relEqual:
		return wildcard.Match(operand, value)
	case relNotEqual:
		return !wildcard.Match(operand, value)
	}
	return false
}

func relSign(sign int, op relOp) bool {
	switch op {
	case relEqual:
		return sign == 0
	case relNotEqual:
		return sign != 0
	case relMore:
		return sign > 0
	case relMoreEqual:
		return sign >= 0
	case relLess:
		return sign < 0
	case relLessEqual:
		return sign <= 0
	}
	return false
}
