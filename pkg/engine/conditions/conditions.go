// Package conditions evaluates the operators of Kyverno preconditions and
// deny conditions (Equals, AnyIn, GreaterThan, ...) on values that have
// already been through variable substitution.
//
// Values follow the engine's data convention: map[string]any, []any, string,
// float64, bool and nil. Other Go number types are accepted and treated as
// float64.
//
// The semantics follow Kyverno's operator handlers (pkg/engine/variables/
// operator), including their type coercions: numeric strings compare with
// numbers, Kubernetes quantities ("1Gi") and Go durations ("1h") compare by
// value, semantic versions compare by precedence, and string values may be
// wildcard patterns. Where Kyverno returns false instead of an error for
// mismatched types, so does Evaluate; it returns an error only for an unknown
// operator.
package conditions

import (
	"errors"
	"fmt"
	"strings"
)

// ErrUnknownOperator is returned (wrapped) by Evaluate for an operator that
// Kyverno does not know.
var ErrUnknownOperator = errors.New("unknown condition operator")

// Operator names as they appear in policies. The deprecated aliases Equal,
// NotEqual, In and NotIn are still accepted by Kyverno.
const (
	OpEquals                      = "Equals"
	OpNotEquals                   = "NotEquals"
	OpEqual                       = "Equal"    // deprecated alias of Equals
	OpNotEqual                    = "NotEqual" // deprecated alias of NotEquals
	OpIn                          = "In"       // deprecated: use AllIn or AnyIn
	OpNotIn                       = "NotIn"    // deprecated: use AllNotIn or AnyNotIn
	OpAnyIn                       = "AnyIn"
	OpAllIn                       = "AllIn"
	OpAnyNotIn                    = "AnyNotIn"
	OpAllNotIn                    = "AllNotIn"
	OpGreaterThan                 = "GreaterThan"
	OpGreaterThanOrEquals         = "GreaterThanOrEquals"
	OpLessThan                    = "LessThan"
	OpLessThanOrEquals            = "LessThanOrEquals"
	OpDurationGreaterThan         = "DurationGreaterThan"
	OpDurationGreaterThanOrEquals = "DurationGreaterThanOrEquals"
	OpDurationLessThan            = "DurationLessThan"
	OpDurationLessThanOrEquals    = "DurationLessThanOrEquals"
)

type opKind int

const (
	opEquals opKind = iota + 1
	opNotEquals
	opIn
	opNotIn
	opAnyIn
	opAllIn
	opAnyNotIn
	opAllNotIn
	opGreaterThan
	opGreaterThanOrEquals
	opLessThan
	opLessThanOrEquals
	opDurationGreaterThan
	opDurationGreaterThanOrEquals
	opDurationLessThan
	opDurationLessThanOrEquals
)

// operators maps every accepted spelling, as written in policies, to its kind.
var operators = map[string]opKind{
	OpEquals:                      opEquals,
	OpEqual:                       opEquals,
	OpNotEquals:                   opNotEquals,
	OpNotEqual:                    opNotEquals,
	OpIn:                          opIn,
	OpNotIn:                       opNotIn,
	OpAnyIn:                       opAnyIn,
	OpAllIn:                       opAllIn,
	OpAnyNotIn:                    opAnyNotIn,
	OpAllNotIn:                    opAllNotIn,
	OpGreaterThan:                 opGreaterThan,
	OpGreaterThanOrEquals:         opGreaterThanOrEquals,
	OpLessThan:                    opLessThan,
	OpLessThanOrEquals:            opLessThanOrEquals,
	OpDurationGreaterThan:         opDurationGreaterThan,
	OpDurationGreaterThanOrEquals: opDurationGreaterThanOrEquals,
	OpDurationLessThan:            opDurationLessThan,
	OpDurationLessThanOrEquals:    opDurationLessThanOrEquals,
}

// lowerOperators is operators keyed by lower-cased name: Kyverno's engine
// selects the handler case-insensitively.
var lowerOperators = func() map[string]opKind {
	m := make(map[string]opKind, len(operators))
	for name, k := range operators {
		m[strings.ToLower(name)] = k
	}
	return m
}()

// Valid reports whether operator is one Kyverno accepts in a policy,
// deprecated aliases included. Like Kyverno's policy validation it is
// case-sensitive ("Equals", not "equals"); Evaluate itself is more lenient.
func Valid(operator string) bool {
	_, ok := operators[operator]
	return ok
}

// Deprecated reports whether operator is one of the deprecated aliases
// (Equal, NotEqual, In, NotIn), which a policy validator may warn about.
func Deprecated(operator string) bool {
	switch operator {
	case OpEqual, OpNotEqual, OpIn, OpNotIn:
		return true
	}
	return false
}

// Evaluate applies operator to key and value, both already
// variable-substituted, as Kyverno does. The operator name is matched
// case-insensitively, as Kyverno's engine does. The only error is an unknown
// operator (wrapping ErrUnknownOperator); values of unsupported or mismatched
// types make the condition false, as in Kyverno.
func Evaluate(key any, operator string, value any) (bool, error) {
	k, ok := operators[operator]
	if !ok {
		k, ok = lowerOperators[strings.ToLower(operator)]
		if !ok {
			return false, fmt.Errorf("%w: %q", ErrUnknownOperator, operator)
		}
	}
	key, value = normalize(key), normalize(value)
	switch k {
	case opEquals:
		return equals(key, value), nil
	case opNotEquals:
		return notEquals(key, value), nil
	case opIn:
		return in(key, value, false), nil
	case opNotIn:
		return in(key, value, true), nil
	case opAnyIn:
		return anyIn(key, value, false), nil
	case opAnyNotIn:
		return anyIn(key, value, true), nil
	case opAllIn:
		return allIn(key, value, false), nil
	case opAllNotIn:
		return allIn(key, value, true), nil
	case opGreaterThan, opGreaterThanOrEquals, opLessThan, opLessThanOrEquals:
		return numeric(key, value, k), nil
	default:
		return durationCompare(key, value, k), nil
	}
}

// normalize turns the Go number types other than float64 into float64 so the
// operators deal with one number type, as the engine's data convention says.
func normalize(v any) any {
	switch n := v.(type) {
	case int:
		return float64(n)
	case int8:
		return float64(n)
	case int16:
		return float64(n)
	case int32:
		return float64(n)
	case int64:
		return float64(n)
	case uint:
		return float64(n)
	case uint8:
		return float64(n)
	case uint16:
		return float64(n)
	case uint32:
		return float64(n)
	case uint64:
		return float64(n)
	case float32:
		return float64(n)
	}
	return v
}

// compare turns the sign of a comparison into the verdict of a relational
// operator.
func compare(sign int, k opKind) bool {
	switch k {
	case opGreaterThan, opDurationGreaterThan:
		return sign > 0
	case opGreaterThanOrEquals, opDurationGreaterThanOrEquals:
		return sign >= 0
	case opLessThan, opDurationLessThan:
		return sign < 0
	case opLessThanOrEquals, opDurationLessThanOrEquals:
		return sign <= 0
	}
	return false
}

// relFloat applies a relational operator to two numbers directly, so that a
// NaN on either side makes every operator false, as in Kyverno.
func relFloat(a, b float64, k opKind) bool {
	switch k {
	case opGreaterThan, opDurationGreaterThan:
		return a > b
	case opGreaterThanOrEquals, opDurationGreaterThanOrEquals:
		return a >= b
	case opLessThan, opDurationLessThan:
		return a < b
	case opLessThanOrEquals, opDurationLessThanOrEquals:
		return a <= b
	}
	return false
}
