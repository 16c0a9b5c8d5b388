package conditions

import (
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/pattern"
	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// EvaluateMetered is Evaluate charging m with an upper bound of its work
// first (Cost): a condition that would take long, such as a wildcard with
// a `?` between two `*` against a long value, or AnyIn between two long
// lists, is refused before it runs, with m's error.
func EvaluateMetered(key any, operator string, value any, m pattern.Meter) (bool, error) {
	if m != nil {
		if err := m.ChargeWork(Cost(key, operator, value)); err != nil {
			return false, err
		}
	}
	return Evaluate(key, operator, value)
}

// Cost is an upper bound of the work of Evaluate(key, operator, value), in
// the units of pattern.Meter (about a byte compared). It takes time linear
// in the size of key and value.
//
// Equals and NotEquals match one wildcard, or walk both values once. The
// set operators match each item of the key against each item of the value
// both ways (wildcard.Cost is a + b*n in the length n of the text matched,
// so the sum over all pairs is the products of counts, lengths and b),
// where a string value may also be a JSON list of up to half its length in
// items, each a wildcard as long as the string. The other operators parse
// numbers, quantities, durations and versions: their size.
func Cost(key any, operator string, value any) int64 {
	key, value = normalize(key), normalize(value)
	k, ok := operators[operator]
	if !ok {
		k = lowerOperators[strings.ToLower(operator)]
	}
	switch k {
	case opEquals, opNotEquals:
		ks, kok := key.(string)
		vs, vok := value.(string)
		if kok && vok {
			return 2*int64(len(ks)) + wildcard.Cost(vs, len(ks))
		}
		return size(key) + size(value)
	case opIn, opNotIn, opAnyIn, opAllIn, opAnyNotIn, opAllNotIn:
		ks, vs := items(key), items(value)
		return ks.bytes + vs.bytes + ks.n*vs.bytes + vs.slope*ks.bytes + vs.n*ks.bytes + ks.slope*vs.bytes
	}
	return size(key) + size(value)
}

// sideCost sums up one side of a set operator: n items of bytes text in
// all, and slope, the sum over the items of how much a byte of the text
// they are matched against costs (wildcard.Cost(item, n) is len(item) +
// n*(its slope)).
type sideCost struct {
	n, bytes, slope int64
}

func items(v any) sideCost {
	switch t := v.(type) {
	case []any:
		var s sideCost
		for _, e := range t {
			var txt int64
			if str, ok := e.(string); ok {
				txt = int64(len(str))
				s.slope += slope(str)
			} else {
				txt = size(e)
				// The text of a number, a bool or (as %v) an object has
				// no `?` between two `*` that counts: Cost is linear.
				s.slope++
			}
			s.n++
			s.bytes += txt
		}
		return s
	case string:
		// The string itself, or a JSON list of at most len/2+1 items
		// whose text is at most len bytes in all; an item's slope is at
		// most 1 plus its length.
		n := int64(len(t))/2 + 1
		return sideCost{n: n + 1, bytes: 2 * int64(len(t)), slope: slope(t) + n + int64(len(t))}
	}
	return sideCost{n: 1, bytes: size(v), slope: 1}
}

// slope is how much a byte of the matched text costs wildcard pattern p.
func slope(p string) int64 {
	return wildcard.Cost(p, 1) - wildcard.Cost(p, 0)
}

// size is an upper bound of the length of v's text (JSON or %v).
func size(v any) int64 {
	switch t := v.(type) {
	case string:
		return int64(len(t)) + 2
	case []any:
		n := int64(2)
		for _, e := range t {
			n += size(e) + 1
		}
		return n
	case map[string]any:
		n := int64(2)
		for k, e := range t {
			n += int64(len(k)) + 4 + size(e)
		}
		return n
	}
	return 32
}
