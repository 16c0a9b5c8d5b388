package pattern

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// MaxQuantityExponent bounds the decimal exponent of a quantity ("5e3",
// "1E-9"). Kubernetes' parser and comparison write the number out: a
// quantity such as "1E-71000000" (eleven characters, a valid label value)
// takes a minute of CPU to parse, "1E71000000" as long to compare, and
// either may come from a resource. Kyverno hangs on them; here they are
// not quantities.
const MaxQuantityExponent = 1000

// ParseQuantity reads s as a Kubernetes quantity, as resource.ParseQuantity
// does, except that a decimal exponent beyond ±MaxQuantityExponent is
// refused. Every quantity read by the engine goes through it.
func ParseQuantity(s string) (resource.Quantity, bool) {
	if hugeExponent(s) {
		return resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(s)
	return q, err == nil
}

// hugeExponent reports whether s ends in a decimal exponent ("e" or "E",
// an optional sign, digits) beyond ±MaxQuantityExponent.
func hugeExponent(s string) bool {
	i := strings.LastIndexAny(s, "eE")
	if i < 0 || i == len(s)-1 {
		return false
	}
	digits := s[i+1:]
	if digits[0] == '+' || digits[0] == '-' {
		digits = digits[1:]
	}
	digits = strings.TrimLeft(digits, "0")
	n := 0
	for j := 0; j < len(digits); j++ {
		c := digits[j]
		if c < '0' || c > '9' {
			return false
		}
		if n <= MaxQuantityExponent {
			n = n*10 + int(c-'0')
		}
	}
	return n > MaxQuantityExponent
}
