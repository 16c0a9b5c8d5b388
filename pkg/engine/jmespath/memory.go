package jmespath

import (
	"errors"
	"fmt"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// DefaultMemoryLimit is the memory one search may allocate through
// function calls unless WithMemoryLimit says otherwise, or a Budget passed
// to SearchBudget, shared by several searches, bounds them together.
// MaxStringLength bounds one string; this bounds their sum: forty results
// of pad_left at 16 MB each took 1.34 GB before it (issue 28).
const DefaultMemoryLimit = 64 << 20

// ErrMemoryLimit is wrapped, with ErrEvaluation, by the error of a search
// whose function calls would allocate more than its memory budget.
var ErrMemoryLimit = errors.New("jmespath memory budget exceeded")

// Budget is the memory, in bytes, that searches may allocate through
// function calls: every function that builds a string, a list or an
// object charges its result, and a function whose result can be much
// larger than its arguments (pad_left, join, replace, to_string,
// parse_json, ...) charges an estimate before it allocates. It is not safe
// for concurrent use: give each goroutine its own.
type Budget struct {
	limit, used int64
}

// NewBudget returns a budget of limit bytes; limit must be positive.
func NewBudget(limit int64) (*Budget, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("%w: memory budget must be positive, got %d", ErrInvalidOption, limit)
	}
	return &Budget{limit: limit}, nil
}

// Reset makes the whole budget available again.
func (b *Budget) Reset() { b.used = 0 }

// Used is what searches charged since the last Reset.
func (b *Budget) Used() int64 { return b.used }

// Limit is the budget's size.
func (b *Budget) Limit() int64 { return b.limit }

// Charge counts n bytes that what allocates (or brings into an
// evaluation) outside a search, so that one budget bounds both: a
// caller's context data, the text its substitutions build. It refuses
// them, counting nothing, with an error wrapping ErrMemoryLimit when the
// budget would be exceeded.
func (b *Budget) Charge(what string, n int64) error { return b.charge(what, n) }

// charge counts n bytes and refuses them, counting nothing, when the
// budget would be exceeded.
func (b *Budget) charge(name string, n int64) error {
	if n <= 0 {
		return nil
	}
	if n > b.limit-b.used {
		return fmt.Errorf("%w: %s would allocate %d bytes, %d of the budget of %d are left", ErrMemoryLimit, name, n, b.limit-b.used, b.limit)
	}
	b.used += n
	return nil
}

// Sizes the budget counts, in bytes.
const (
	// sliceSlot is one element of a list: its interface value and, for a
	// string or number, the boxed value.
	sliceSlot = 32
	// mapEntry is one entry of an object.
	mapEntry = 64
)

// allocEstimate is what a call of function name with args will allocate at
// most, for the functions whose results can be much larger than their
// arguments; 0 for the others, whose results are charged once returned.
func allocEstimate(name string, args []any) int64 {
	str := func(i int) string {
		if i < len(args) {
			s, _ := args[i].(string)
			return s
		}
		return ""
	}
	switch name {
	case "pad_left", "pad_right":
		// The padding, then the padded string.
		if len(args) > 1 {
			if w, ok := args[1].(float64); ok && w > float64(len(str(0))) {
				if w > maxStringLength+1 {
					w = maxStringLength + 1
				}
				return 2 * int64(w)
			}
		}
		return 2 * int64(len(str(0)))
	case "join":
		items, _ := args[len(args)-1].([]any)
		n := int64(0)
		for _, it := range items {
			s, _ := it.(string)
			n += int64(len(s)) + int64(len(str(0)))
		}
		return n
	case "to_string":
		if len(args) == 0 {
			return 0
		}
		if _, ok := args[0].(string); ok {
			return 0
		}
		budget := maxStringLength
		if !fitsJSON(args[0], &budget) {
			return maxStringLength
		}
		return int64(maxStringLength - budget)
	case "replace", "replace_all":
		n := -1
		if f, ok := args[len(args)-1].(float64); ok && len(args) == 4 {
			n, _ = truncateToInt(f)
		}
		return int64(replacedLength(str(0), str(1), str(2), n))
	case "parse_json", "parse_yaml":
		// A list of small numbers: two bytes of text, a slot each.
		return int64(len(str(0))) / 2 * sliceSlot
	case "split":
		return (int64(strings.Count(str(0), str(1))) + 1) * sliceSlot
	case "base64_encode":
		return int64(len(str(0)))/3*4 + 4
	}
	return 0
}

// footprint is what a function's result counts for: a string its bytes,
// a list or an object its slots (their elements were counted when they
// were made, or belong to the document).
func footprint(v any) int64 {
	switch t := v.(type) {
	case string:
		return int64(len(t))
	case []any:
		return int64(len(t)) * sliceSlot
	case map[string]any:
		return int64(len(t)) * mapEntry
	}
	return 0
}

// SlotBytes and EntryBytes are what Size counts for one element of a
// list and one entry of an object, beyond what they hold: a caller
// building lists and objects outside a search charges them so.
const (
	SlotBytes  = sliceSlot
	EntryBytes = mapEntry
)

// Size estimates the memory v holds, in the budget's units, counting
// every element below it: a string its bytes, each element of a list a
// slot, each entry of an object an entry and its key's bytes. Data shared
// between two places counts in both. It is for what an evaluation brings
// in whole (an API call's answer, a ConfigMap), where footprint counts
// only what a function adds on top of its arguments.
func Size(v any) int64 {
	switch t := v.(type) {
	case string:
		return int64(len(t))
	case []any:
		n := int64(len(t)) * sliceSlot
		for _, e := range t {
			n += Size(e)
		}
		return n
	case map[string]any:
		n := int64(len(t)) * mapEntry
		for k, e := range t {
			n += int64(len(k)) + Size(e)
		}
		return n
	}
	return 0
}

// matchSteps is the step charge of pattern_match beyond its arguments'
// length: the work wildcard.Cost bounds, 64 bytes a step.
func matchSteps(name string, args []any) int64 {
	if name != "pattern_match" || len(args) < 2 {
		return 0
	}
	p, _ := args[0].(string)
	n := 32
	if s, ok := args[1].(string); ok {
		n = len(s)
	}
	return wildcard.Cost(p, n) / 64
}
