package jmespath

import (
	"math"
	"strconv"
	"time"

	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/verdict-dev/verdict/pkg/engine/pattern"
)

// Arithmetic follows Kyverno's typed rules. An operand is a number (a
// scalar), or a string holding a Kubernetes quantity ("1Gi", "250m") or a Go
// duration ("1h30m"). A string that is both ("1m", "0") is a duration when
// the other operand is a duration only, else a quantity.
//
//	add, subtract: q±q -> q, d±d -> d, s±s -> s; other mixes are errors
//	multiply:      s*s -> s, q*s and s*q -> q, d*s and s*d -> d
//	divide:        s/s -> s, q/q -> s, q/s -> q, d/d -> s, d/s -> d
//	modulo:        s%s -> s, q%q -> q, d%d -> d (integers only for s and q)
//
// Quantities and durations are returned in their canonical string form,
// scalars as numbers.

type operandKind int

const (
	kindScalar operandKind = iota
	kindQuantity
	kindDuration
)

func (k operandKind) String() string {
	switch k {
	case kindQuantity:
		return "quantity"
	case kindDuration:
		return "duration"
	default:
		return "number"
	}
}

type operand struct {
	kind operandKind
	f    float64
	q    resource.Quantity
	d    time.Duration
}

// candidate is an argument before the ambiguity between quantity and
// duration is resolved.
type candidate struct {
	scalar      bool
	f           float64
	hasQuantity bool
	q           resource.Quantity
	hasDuration bool
	d           time.Duration
}

func (c candidate) durationOnly() bool { return c.hasDuration && !c.hasQuantity }

func parseCandidate(name string, v any, index int) (candidate, error) {
	switch t := v.(type) {
	case float64:
		return candidate{scalar: true, f: t}, nil
	case string:
		var c candidate
		if q, ok := pattern.ParseQuantity(t); ok {
			c.hasQuantity, c.q = true, q
		}
		if d, err := time.ParseDuration(t); err == nil {
			c.hasDuration, c.d = true, d
		}
		if c.hasQuantity || c.hasDuration {
			return c, nil
		}
		return candidate{}, fnErrorf(name, "argument #%d: %q is neither a quantity nor a duration", index+1, t)
	default:
		return candidate{}, fnErrorf(name, "argument #%d must be a number, a quantity or a duration, got %s", index+1, typeName(v))
	}
}

func (c candidate) resolve(durationContext bool) operand {
	switch {
	case c.scalar:
		return operand{kind: kindScalar, f: c.f}
	case c.hasDuration && (!c.hasQuantity || durationContext):
		return operand{kind: kindDuration, d: c.d}
	default:
		return operand{kind: kindQuantity, q: c.q}
	}
}

func parseOperands(name string, x, y any) (operand, operand, error) {
	c1, err := parseCandidate(name, x, 0)
	if err != nil {
		return operand{}, operand{}, err
	}
	c2, err := parseCandidate(name, y, 1)
	if err != nil {
		return operand{}, operand{}, err
	}
	ctx := c1.durationOnly() || c2.durationOnly()
	return c1.resolve(ctx), c2.resolve(ctx), nil
}

func twoOperands(name string, a []any) (operand, operand, error) {
	x, err := arg(name, a, 0)
	if err != nil {
		return operand{}, operand{}, err
	}
	y, err := arg(name, a, 1)
	if err != nil {
		return operand{}, operand{}, err
	}
	return parseOperands(name, x, y)
}

func mismatch(name string, x, y operand) error {
	return fnErrorf(name, "unsupported operand types: %s and %s", x.kind, y.kind)
}

func errZeroDivisor(name string) error { return fnErrorf(name, "zero divisor") }

// add(any, any) any.
func jpAdd(a []any) (any, error) {
	x, y, err := twoOperands("add", a)
	if err != nil {
		return nil, err
	}
	return addOperands("add", x, y)
}

func addOperands(name string, x, y operand) (any, error) {
	if x.kind != y.kind {
		return nil, mismatch(name, x, y)
	}
	switch x.kind {
	case kindQuantity:
		q := x.q.DeepCopy()
		q.Add(y.q)
		return q.String(), nil
	case kindDuration:
		sum := x.d + y.d
		if (y.d > 0 && sum < x.d) || (y.d < 0 && sum > x.d) {
			return nil, fnErrorf(name, "duration overflow")
		}
		return sum.String(), nil
	default:
		return x.f + y.f, nil
	}
}

// subtract(any, any) any.
func jpSubtract(a []any) (any, error) {
	const name = "subtract"
	x, y, err := twoOperands(name, a)
	if err != nil {
		return nil, err
	}
	if x.kind != y.kind {
		return nil, mismatch(name, x, y)
	}
	switch x.kind {
	case kindQuantity:
		q := x.q.DeepCopy()
		q.Sub(y.q)
		return q.String(), nil
	case kindDuration:
		diff := x.d - y.d
		if (y.d < 0 && diff < x.d) || (y.d > 0 && diff > x.d) {
			return nil, fnErrorf(name, "duration overflow")
		}
		return diff.String(), nil
	default:
		return x.f - y.f, nil
	}
}

// multiply(any, any) any.
func jpMultiply(a []any) (any, error) {
	const name = "multiply"
	x, y, err := twoOperands(name, a)
	if err != nil {
		return nil, err
	}
	// Multiplication commutes: put the scalar, if any, second.
	if x.kind == kindScalar && y.kind != kindScalar {
		x, y = y, x
	}
	if y.kind != kindScalar {
		return nil, mismatch(name, x, y)
	}
	switch x.kind {
	case kindQuantity:
		factor, err := decimal(name, y.f)
		if err != nil {
			return nil, err
		}
		q := x.q.DeepCopy()
		prod := new(inf.Dec).Mul(q.AsDec(), factor)
		return resource.NewDecimalQuantity(*prod, x.q.Format).String(), nil
	case kindDuration:
		return scaleDuration(name, x.d.Seconds()*y.f)
	default:
		return x.f * y.f, nil
	}
}

// divide(any, any) any.
func jpDivide(a []any) (any, error) {
	const name = "divide"
	x, y, err := twoOperands(name, a)
	if err != nil {
		return nil, err
	}
	switch {
	case x.kind == kindScalar && y.kind == kindScalar:
		if y.f == 0 {
			return nil, errZeroDivisor(name)
		}
		return x.f / y.f, nil
	case x.kind == kindQuantity && y.kind == kindQuantity:
		divisor := y.q.AsApproximateFloat64()
		if divisor == 0 {
			return nil, errZeroDivisor(name)
		}
		return x.q.AsApproximateFloat64() / divisor, nil
	case x.kind == kindQuantity && y.kind == kindScalar:
		if y.f == 0 {
			return nil, errZeroDivisor(name)
		}
		divisor, err := decimal(name, y.f)
		if err != nil {
			return nil, err
		}
		q := x.q.DeepCopy()
		dividend := q.AsDec()
		scale := max(dividend.Scale(), divisor.Scale())
		quo := new(inf.Dec).QuoRound(dividend, divisor, scale, inf.RoundDown)
		return resource.NewDecimalQuantity(*quo, x.q.Format).String(), nil
	case x.kind == kindDuration && y.kind == kindDuration:
		if y.d == 0 {
			return nil, errZeroDivisor(name)
		}
		return x.d.Seconds() / y.d.Seconds(), nil
	case x.kind == kindDuration && y.kind == kindScalar:
		if y.f == 0 {
			return nil, errZeroDivisor(name)
		}
		return scaleDuration(name, x.d.Seconds()/y.f)
	default:
		return nil, mismatch(name, x, y)
	}
}

// modulo(any, any) any.
func jpModulo(a []any) (any, error) {
	const name = "modulo"
	x, y, err := twoOperands(name, a)
	if err != nil {
		return nil, err
	}
	if x.kind != y.kind {
		return nil, mismatch(name, x, y)
	}
	switch x.kind {
	case kindQuantity:
		q1, q2 := x.q.DeepCopy(), y.q.DeepCopy()
		i1, ok1 := toInt64(q1.AsApproximateFloat64())
		i2, ok2 := toInt64(q2.AsApproximateFloat64())
		if !ok1 || !ok2 {
			return nil, fnErrorf(name, "operands must be integers")
		}
		if i2 == 0 {
			return nil, errZeroDivisor(name)
		}
		return resource.NewQuantity(i1%i2, x.q.Format).String(), nil
	case kindDuration:
		if y.d == 0 {
			return nil, errZeroDivisor(name)
		}
		return (x.d % y.d).String(), nil
	default:
		i1, ok1 := toInt64(x.f)
		i2, ok2 := toInt64(y.f)
		if !ok1 || !ok2 {
			return nil, fnErrorf(name, "operands must be integers")
		}
		if i2 == 0 {
			return nil, errZeroDivisor(name)
		}
		return float64(i1 % i2), nil
	}
}

// sum(array) any: adds the elements, which must all be numbers, all
// quantities or all durations. The array must not be empty.
func jpSum(a []any) (any, error) {
	const name = "sum"
	items, err := arrayArg(name, a, 0)
	if err != nil {
		return nil, err
	}
	if len(items) == 0 {
		return nil, fnErrorf(name, "at least one element in the array is required")
	}
	if _, err := parseCandidate(name, items[0], 0); err != nil {
		return nil, err
	}
	result := items[0]
	for _, item := range items[1:] {
		x, y, err := parseOperands(name, result, item)
		if err != nil {
			return nil, err
		}
		if result, err = addOperands(name, x, y); err != nil {
			return nil, err
		}
	}
	return result, nil
}

// round(value, decimals number) number: rounds half away from zero to the
// given number of decimal places, a non-negative integer.
func jpRound(a []any) (any, error) {
	const name = "round"
	x, err := numberArg(name, a, 0)
	if err != nil {
		return nil, err
	}
	n, err := intArg(name, a, 1)
	if err != nil {
		return nil, err
	}
	if n < 0 {
		return nil, fnErrorf(name, "decimal places must not be negative, got %d", n)
	}
	shift := math.Pow(10, float64(n))
	scaled := x * shift
	if math.IsInf(scaled, 0) || math.IsInf(shift, 0) {
		// More decimal places than a float64 holds: nothing to round.
		return x, nil
	}
	return math.Round(scaled) / shift, nil
}

// decimal converts f to an exact decimal.
func decimal(name string, f float64) (*inf.Dec, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fnErrorf(name, "invalid number %v", f)
	}
	d, ok := new(inf.Dec).SetString(strconv.FormatFloat(f, 'f', -1, 64))
	if !ok {
		return nil, fnErrorf(name, "invalid number %v", f)
	}
	return d, nil
}

// scaleDuration returns the duration of the given number of seconds.
func scaleDuration(name string, seconds float64) (any, error) {
	ns := seconds * float64(time.Second)
	if math.IsNaN(ns) || ns >= math.MaxInt64 || ns < math.MinInt64 {
		return nil, fnErrorf(name, "duration out of range")
	}
	return time.Duration(ns).String(), nil
}

// toInt64 converts f to an int64 if it is an integer value in range.
func toInt64(f float64) (int64, bool) {
	if math.IsNaN(f) || math.IsInf(f, 0) || math.Trunc(f) != f {
		return 0, false
	}
	if f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}
