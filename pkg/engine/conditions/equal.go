package conditions

import (
	"strconv"

	"github.com/verdict-dev/verdict/pkg/engine/pattern"
	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
	"k8s.io/apimachinery/pkg/api/resource"
)

// equals implements Equals (and its alias Equal). The key's type drives the
// comparison:
//   - bool: the value must be the same bool;
//   - number: the value must be the same number, or a string that parses to
//     it ("5" equals 5);
//   - string: durations first ("1h" equals "60m", and "60s" equals 60),
//     then Kubernetes quantities ("1Gi" equals "1024Mi", "5" equals 5), then
//     the value as a wildcard pattern matched against the key ("*-prod");
//   - map or list: deep equality with a value of the same kind.
//
// Any other key (null included) is never equal to anything.
func equals(key, value any) bool {
	eq, _ := equality(key, value)
	return eq
}

// notEquals implements NotEquals (and NotEqual). It is the negation of Equals
// for the key types Equals supports; for a null or otherwise unsupported key
// Kyverno answers false to both, and so does this.
func notEquals(key, value any) bool {
	eq, supported := equality(key, value)
	return supported && !eq
}

// equality returns whether key equals value and whether the key's type is one
// the operator handles at all.
func equality(key, value any) (eq, supported bool) {
	switch k := key.(type) {
	case bool:
		v, ok := value.(bool)
		return ok && v == k, true
	case float64:
		return equalNumber(k, value), true
	case string:
		return equalString(k, value), true
	case map[string]any:
		v, ok := value.(map[string]any)
		return ok && deepEqual(k, v), true
	case []any:
		v, ok := value.([]any)
		return ok && deepEqual(k, v), true
	}
	return false, false
}

func equalNumber(key float64, value any) bool {
	switch v := value.(type) {
	case float64:
		return v == key
	case string:
		f, err := strconv.ParseFloat(v, 64)
		return err == nil && f == key
	}
	return false
}

func equalString(key string, value any) bool {
	// Durations come first: they are the only kind that compares a string
	// with a number (a number counts as seconds).
	if kd, vd, ok := parseDurations(key, value); ok {
		return kd.Seconds() == vd.Seconds()
	}
	if kq, ok := pattern.ParseQuantity(key); ok {
		switch v := value.(type) {
		case string:
			vq, ok := pattern.ParseQuantity(v)
			if !ok {
				// Kyverno gives up here: a quantity-looking key is not
				// matched against a non-quantity value, even a wildcard.
				return false
			}
			return kq.Cmp(vq) == 0
		case float64:
			vq, ok := quantityOf(v)
			return ok && kq.Cmp(vq) == 0
		}
	}
	if v, ok := value.(string); ok {
		return wildcard.Match(v, key)
	}
	return false
}

// quantityOf turns a finite number into a resource.Quantity.
func quantityOf(f float64) (resource.Quantity, bool) {
	return pattern.ParseQuantity(strconv.FormatFloat(f, 'f', -1, 64))
}

// deepEqual compares two JSON-compatible values. Numbers of different Go
// types compare by value.
func deepEqual(a, b any) bool {
	a, b = normalize(a), normalize(b)
	switch x := a.(type) {
	case nil:
		return b == nil
	case bool:
		y, ok := b.(bool)
		return ok && x == y
	case float64:
		y, ok := b.(float64)
		return ok && x == y
	case string:
		y, ok := b.(string)
		return ok && x == y
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !deepEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, xv := range x {
			yv, ok := y[k]
			if !ok || !deepEqual(xv, yv) {
				return false
			}
		}
		return true
	}
	return false
}
