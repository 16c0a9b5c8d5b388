package conditions

import (
	"strconv"
	"time"

	"github.com/blang/semver/v4"

	"github.com/verdict-dev/verdict/pkg/engine/pattern"
)

// numeric implements GreaterThan, GreaterThanOrEquals, LessThan and
// LessThanOrEquals. In the order Kyverno tries them:
//   - a number key compares with a number, a duration string (the number
//     counts as seconds) or a numeric string;
//   - a string key compares as a duration ("1h" > "30m", "90s" > 60), then
//     as a Kubernetes quantity when both sides are strings ("1Gi" > "512Mi"),
//     then as a number when it parses as one, then as a semantic version
//     against a version string ("1.10.0" > "1.9.2").
//
// Everything else (booleans, null, maps, lists, unparsable strings) is false.
func numeric(key, value any, k opKind) bool {
	switch kv := key.(type) {
	case float64:
		return numericFloat(kv, value, k)
	case string:
		if kd, vd, ok := parseDurations(kv, value); ok {
			return relFloat(kd.Seconds(), vd.Seconds(), k)
		}
		if vs, ok := value.(string); ok {
			kq, kok := pattern.ParseQuantity(kv)
			vq, vok := pattern.ParseQuantity(vs)
			if kok && vok {
				return compare(kq.Cmp(vq), k)
			}
		}
		if f, err := strconv.ParseFloat(kv, 64); err == nil {
			return numericFloat(f, value, k)
		}
		kver, err := semver.Parse(kv)
		if err != nil {
			return false
		}
		vs, ok := value.(string)
		if !ok {
			return false
		}
		vver, err := semver.Parse(vs)
		if err != nil {
			return false
		}
		return compare(kver.Compare(vver), k)
	}
	return false
}

func numericFloat(key float64, value any, k opKind) bool {
	switch v := value.(type) {
	case float64:
		return relFloat(key, v, k)
	case string:
		if kd, vd, ok := parseDurations(key, v); ok {
			return relFloat(kd.Seconds(), vd.Seconds(), k)
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return false
		}
		return relFloat(key, f, k)
	}
	return false
}

// durationCompare implements the deprecated Duration* operators: both sides
// must be durations, a number counting as seconds. Unlike the numeric
// operators, a string key that is not a Go duration is simply false.
func durationCompare(key, value any, k opKind) bool {
	var kd time.Duration
	switch kv := key.(type) {
	case float64:
		kd = seconds(kv)
	case string:
		d, err := time.ParseDuration(kv)
		if err != nil {
			return false
		}
		kd = d
	default:
		return false
	}
	var vd time.Duration
	switch vv := value.(type) {
	case float64:
		vd = seconds(vv)
	case string:
		d, err := time.ParseDuration(vv)
		if err != nil {
			return false
		}
		vd = d
	default:
		return false
	}
	return compare(cmpDuration(kd, vd), k)
}

func cmpDuration(a, b time.Duration) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// seconds converts a number of seconds to a Duration the way Kyverno does:
// the number is truncated to whole seconds first, so 1.5 counts as 1s.
func seconds(f float64) time.Duration {
	return time.Duration(f) * time.Second
}

// durationStart reports whether s can be a Go duration as far as its
// first characters go (a sign, then a digit or a dot), so that the
// strings of most comparisons skip time.ParseDuration and its error.
func durationStart(s string) bool {
	if s != "" && (s[0] == '+' || s[0] == '-') {
		s = s[1:]
	}
	return s != "" && (s[0] == '.' || (s[0] >= '0' && s[0] <= '9'))
}

// parseDurations reads key and value as durations when at least one of them
// is a Go duration string (other than "0"); the other side may then be a
// duration string too or a number of seconds. ok is false when the pair is
// not a duration comparison.
func parseDurations(key, value any) (kd, vd time.Duration, ok bool) {
	kok, vok := false, false
	if s, isStr := key.(string); isStr && s != "0" && durationStart(s) {
		if d, err := time.ParseDuration(s); err == nil {
			kd, kok = d, true
		}
	}
	if s, isStr := value.(string); isStr && s != "0" && durationStart(s) {
		if d, err := time.ParseDuration(s); err == nil {
			vd, vok = d, true
		}
	}
	if !kok && !vok {
		return 0, 0, false
	}
	if !kok {
		f, isNum := key.(float64)
		if !isNum {
			return 0, 0, false
		}
		kd = seconds(f)
	}
	if !vok {
		f, isNum := value.(float64)
		if !isNum {
			return 0, 0, false
		}
		vd = seconds(f)
	}
	return kd, vd, true
}
