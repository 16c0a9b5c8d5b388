package pattern

import (
	"math"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
)

// The decisions taken when the copies of the value language were merged
// (which answer, and the Kyverno function behind it) are rows of
// TestValueLanguageOneAnswer in package engine, which runs each through a
// validate pattern and a mutate conditional anchor; docs/conformance.md
// ("Value language: decisions") lists them. This table covers the language
// itself.
func TestValue(t *testing.T) {
	tests := map[string]struct {
		value, pattern any
		want           bool
	}{
		// Non-string patterns.
		"bool":                  {true, true, true},
		"bool mismatch":         {true, false, false},
		"bool vs string":        {"true", true, false},
		"int equals":            {float64(3), float64(3), true},
		"int vs fraction":       {float64(3.5), float64(3), false},
		"int vs string":         {"3", float64(3), true},
		"int vs decimal string": {"3.0", float64(3), false},
		"int vs bad string":     {"three", float64(3), false},
		"float vs string":       {"2.50", 2.5, true},
		"float vs number":       {2.5, 2.5, true},
		"number vs bool":        {true, float64(1), false},
		"nil pattern null":      {nil, nil, true},
		"nil pattern zero":      {float64(0), nil, true},
		"nil pattern string":    {"", nil, true},
		"nil pattern false":     {false, nil, true},
		"nil pattern set":       {"x", nil, false},
		"nil pattern map":       {map[string]any{}, nil, false},
		"map pattern":           {map[string]any{}, map[string]any{"a": "b"}, true},
		"map pattern scalar":    {"x", map[string]any{}, false},
		"list pattern":          {[]any{}, []any{}, false},
		"int64 pattern":         {float64(7), int64(7), true},
		"int pattern":           {"7", 7, true},

		// Alternatives, conjunctions, spaces.
		"exact string":          {"nginx", "nginx", true},
		"whole pattern equal":   {"a|b", "a|b", true},
		"or":                    {"b", "a|b", true},
		"or with spaces":        {"b", "a | b", true},
		"or none":               {"c", "a|b", false},
		"and":                   {"abc", "a* & *c", true},
		"and fails":             {"abd", "a* & *c", false},
		"and of operators":      {"7", ">5 & <10", true},
		"and of operators out":  {"12", ">5 & <10", false},
		"space after operator":  {float64(7), "> 5", true},
		"tab is not trimmed":    {float64(7), "\t>5", false},
		"tab term is text":      {"\t>5", "\t>5", true},
		"empty pattern":         {"", "", true},
		"empty pattern not nil": {nil, "", false},

		// Operators on numbers, durations and quantities.
		"number greater":        {float64(3), ">1", true},
		"number not greater":    {float64(1), ">1", false},
		"number text ge":        {"2", ">=2", true},
		"less equal fraction":   {2.5, "<=2.5", true},
		"less":                  {float64(4), "<4", false},
		"not equal number":      {float64(4), "!4", false},
		"not equal quantity":    {"4000m", "!4", false},
		"quantity greater":      {"2Gi", ">1Gi", true},
		"quantity equal":        {"1024Mi", "1Gi", true},
		"quantity less":         {"500m", "<1", true},
		"equals sign is text":   {"1024Mi", "=1Gi", false},
		"duration":              {"90s", ">1m", true},
		"duration equal":        {"60m", "1h", true},
		"duration vs number":    {float64(0), "<1h", true},
		"duration vs text":      {"soon", "<1h", false},
		"null counts as zero":   {nil, "<1", true},
		"suffix only quantity":  {"0", "Mi", true},
		"exponent alone":        {float64(0), "e3", true},
		"operator on text":      {"abc", ">abc", false},
		"operator alone":        {">", ">", true},
		"bang alone":            {"x", "!", false},
		"not equal text":        {"nginx", "!redis", true},
		"not equal wildcard":    {"redis:1", "!redis*", false},
		"not equal null":        {nil, "!redis", false},
		"fraction as number":    {2.5, "2.5", true},
		"fraction in wildcards": {2.5, "2.5?", false},
		"fraction E form":       {2.5, "2.5E+00", true},
		"integer text":          {float64(8080), "80?0", true},
		"big integer text":      {float64(1e15), "1000000000000000", true},
		"negative zero":         {math.Copysign(0, -1), "0", true},

		// Ranges.
		"in range":              {float64(5), "1-10", true},
		"range low bound":       {"1", "1-10", true},
		"range high bound":      {"10", "1-10", true},
		"out of range":          {float64(11), "1-10", false},
		"not in range":          {float64(11), "1!-10", true},
		"not in range inside":   {float64(5), "1!-10", false},
		"range with units":      {"2Gi", "1Gi-4Gi", true},
		"decimal range":         {"1.5", "1.2-1.8", true},
		"milli range":           {"250m", "100m-200m", false},
		"duration range":        {"45m", "30m-1h", true},
		"duration out of range": {"2h", "30m-1h", false},
		"signed range":          {float64(-3), "-5-5", true},
		"signed both":           {"-7", "-9--5", true},
		"plus sign":             {"3", "+1-+5", true},
		"text in range":         {"abc", "1-10", false},
		"range as text":         {"1-10", "1-10", true},
		"bang range is not":     {"5", "!1-10", true},
		"compound bound":        {"90m", "1h30m-2h", false},
		"exponent bound":        {"1500", "1e3-2e3", false},
		"dot bound":             {"0", "0-.5", false},
		"range in alternatives": {"50", "1-10 | 40-60", true},

		// Wildcards.
		"star":              {"nginx:latest", "*:latest", true},
		"star mismatch":     {"nginx:1.2", "*:latest", false},
		"star matches none": {"", "*", true},
		"star over star":    {"a*x", "a*", true},
		"question needs 1":  {"", "?*", false},
		"question one":      {"a", "?", true},
		"question two":      {"ab", "?", false},
		"null not text":     {nil, "?*", false},
		"bool as text":      {true, "true", true},
		"bool as wildcard":  {false, "f*", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Value(tc.value, tc.pattern); got != tc.want {
				t.Fatalf("Value(%#v, %#v) = %v, want %v", tc.value, tc.pattern, got, tc.want)
			}
		})
	}
}

func TestIsRange(t *testing.T) {
	for s, want := range map[string]bool{
		"1-10": true, "-5-5": true, "1Gi-2Gi": true, "1.5-2.5": true, "+1-+5": true,
		"1!-10": false, "a-b": false, "kube-system": false, "10": false, "!1-10": false,
		"1h30m-2h": false, "1e3-2e3": false, "1.2.3-4": false, "0-.5": false, "1-10 ": false,
		"1-": false, "-1": false, "": false,
	} {
		if got := IsRange(s); got != want {
			t.Errorf("IsRange(%q) = %v, want %v", s, got, want)
		}
	}
}

func TestParseQuantity(t *testing.T) {
	tests := map[string]struct {
		in   string
		ok   bool
		want string
	}{
		"plain":           {"1Gi", true, "1Gi"},
		"exponent":        {"5e3", true, "5e3"},
		"suffix only":     {"Mi", true, "0"},
		"exponent bound":  {"1E1000", true, "1E1000"},
		"negative bound":  {"1e-1000", true, "1n"},
		"exponent beyond": {"1E1001", false, ""},
		"far below":       {"1E-71000000", false, ""},
		"far above":       {"E71000000", false, ""},
		"zeros":           {"1e0000000000002", true, "100"},
		"exa is a suffix": {"1E", true, "1E"},
		"not a quantity":  {"abc", false, ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			q, ok := ParseQuantity(tc.in)
			if ok != tc.ok {
				t.Fatalf("ParseQuantity(%q) ok = %v, want %v", tc.in, ok, tc.ok)
			}
			if ok && q.Cmp(resource.MustParse(tc.want)) != 0 {
				t.Errorf("ParseQuantity(%q) = %s, want %s", tc.in, q.String(), tc.want)
			}
		})
	}
}

// FuzzOperandStart holds the parse shortcut in compare to the parsers: a
// string that does not start with a durationStart byte is never a
// duration, and one that does not start with a quantityStart byte never a
// quantity.
func FuzzOperandStart(f *testing.F) {
	for _, s := range []string{"1h", ".5s", "-1m", "Mi", "e3", "k", "Ki", "n", "u", "1", "x", "0"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if s == "" {
			return
		}
		if strings.IndexByte(durationStart, s[0]) < 0 {
			if _, err := time.ParseDuration(s); err == nil {
				t.Fatalf("%q is a duration", s)
			}
		}
		if strings.IndexByte(quantityStart, s[0]) < 0 && !hugeExponent(s) {
			if _, err := resource.ParseQuantity(s); err == nil {
				t.Fatalf("%q is a quantity", s)
			}
		}
	})
}

// FuzzValue feeds arbitrary (value, pattern) strings: Value never panics,
// answers within the fuzzer's time limit (quantities with huge exponents
// are refused), and reads an invalid UTF-8 byte as U+FFFD.
func FuzzValue(f *testing.F) {
	for _, s := range [][2]string{
		{"80", "8?"}, {"90m", "1h30m-2h"}, {"1500", "1e3-2e3"}, {"80.0", "80"}, {"2Gi", ">1Gi"},
		{"5", "1-10"}, {"x", "!x*|y&z"}, {"90s", "1m!-2m"}, {"0", "E71000000"}, {"1E-71000000", ">0"},
		{"\xbe", "\xf8"}, {"-3", "-5-5"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, value, pat string) {
		got := Value(value, pat)
		Value(nil, pat)
		Value(float64(len(value)), pat)
		// Only the first test, the whole value equal to the whole pattern,
		// compares bytes (Go's == in Kyverno's validateStringPatterns).
		if sv, sp := string([]rune(value)), string([]rune(pat)); sv != sp && got != Value(sv, sp) {
			t.Fatalf("Value(%q, %q) = %v, but %v on the same text read as runes", value, pat, got, !got)
		}
	})
}
