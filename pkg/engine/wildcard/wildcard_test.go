package wildcard

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestMatch(t *testing.T) {
	tests := map[string]struct {
		pattern, s string
		want       bool
	}{
		"exact":             {"nginx", "nginx", true},
		"exact mismatch":    {"nginx", "nginx2", false},
		"star all":          {"*", "", true},
		"star prefix":       {"*-prod", "api-prod", true},
		"star prefix miss":  {"*-prod", "api-dev", false},
		"star middle":       {"a*c", "abbbc", true},
		"non empty":         {"?*", "", false},
		"non empty ok":      {"?*", "x", true},
		"question":          {"v?", "v1", true},
		"question short":    {"v?", "v", false},
		"backtrack":         {"*ab*ab", "xabyabab", true},
		"unicode question":  {"?", "é", true},
		"trailing stars":    {"a**", "a", true},
		"empty pattern":     {"", "", true},
		"empty pattern bad": {"", "a", false},
		"dot is literal":    {"nginx.1", "nginxX1", false},
		"dot matches dot":   {"nginx.1", "nginx.1", true},
		"image prefix":      {"ghcr.io/kyverno/test-nginx*", "ghcr.io/kyverno/test-nginx:1.1.9", true},
		"image other":       {"redis*", "busybox:1.28", false},
		"star question":     {"my-bucket/mnop*?", "my-bucket/mnop", false},
		"star question ok":  {"my-bucket/mnop*?", "my-bucket/mnopq", true},
		"question cluster":  {"my??bucket", "my4abucket", true},
		"question too few":  {"my-bucket/abc????", "my-bucket/abcde", false},
		"star then literal": {"*?and", "qand", true},
		"star literal miss": {"*?and", "and", false},
		"unicode star":      {"é*ü", "éaaü", true},
		"unicode literal":   {"éü", "éü", true},
		"unicode mismatch":  {"éü", "éu", false},
		// Moved from the JMESPath pattern_match tests.
		"star matches all":        {"*", "s3:GetObject", true},
		"trailing star":           {"s3:*", "s3:ListMultipartUploadParts", true},
		"literal longer":          {"s3:ListBucketMultipartUploads", "s3:ListBucket", false},
		"literal equal":           {"s3:ListBucket", "s3:ListBucket", true},
		"star empty suffix":       {"my-bucket/oo*", "my-bucket/oo", true},
		"shuffled":                {"my-bucket/In*", "my-bucket/Karnataka/India/", false},
		"stars expand":            {"my-bucket/In*/Ka*/Ban", "my-bucket/India/Karnataka/Ban/Ban/Ban/Ban/Ban", true},
		"suffix mismatch":         {"my-bucket/In*/Ka*/Ban", "my-bucket/India/Karnataka/Bangalore", false},
		"question needs one":      {"my-bucket?/abc*", "mybucket/abc", false},
		"question one":            {"my-bucket?/abc*", "my-bucket1/abc", true},
		"two questions":           {"my??bucket/abc*", "my4abucket/abc", true},
		"question matches slash":  {"my-bucket/abc?efg", "my-bucket/abc/efg", true},
		"question at end":         {"my-bucket/abc?", "my-bucket/abcd", true},
		"question at end too few": {"my-bucket/abc?", "my-bucket/abc", false},
		"star question and":       {"my-bucket/mnop*?and", "my-bucket/mnopqand", true},
		"star question and none":  {"my-bucket/mnop*?and", "my-bucket/mnopand", false},
		"literal star in text":    {"*a", "*ba", true},
		"unicode question inside": {"h?llo", "héllo", true},
		"only stars":              {"***", "", true},
		// A `*` in the text is an ordinary character (an old copy in
		// package patch consumed it as a literal and missed these).
		"star over star":        {"*", "* * * * *", true},
		"star after star":       {"a*", "a*x", true},
		"star question on star": {"*?", "*", true},
		// Invalid UTF-8 reads as U+FFFD, as Go's []rune conversion (and so
		// Kyverno's matcher) reads it.
		"invalid bytes equal":     {"\xbe", "\xf8", true},
		"invalid byte and U+FFFD": {"\ufffd", "\xff", true},
		"invalid byte is one":     {"?", "\xff", true},
		"invalid after star":      {"*\xf8", "ab\xbe", true},
		"invalid vs ascii":        {"\xff", "a", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Match(tc.pattern, tc.s); got != tc.want {
				t.Fatalf("Match(%q, %q) = %v, want %v", tc.pattern, tc.s, got, tc.want)
			}
		})
	}
}

func TestMatchAnyContains(t *testing.T) {
	tests := map[string]struct {
		patterns []string
		s        string
		want     bool
	}{
		"none":        {nil, "a", false},
		"one matches": {[]string{"b*", "a*"}, "abc", true},
		"no match":    {[]string{"b*", "c?"}, "abc", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := MatchAny(tc.patterns, tc.s); got != tc.want {
				t.Fatalf("MatchAny(%q, %q) = %v, want %v", tc.patterns, tc.s, got, tc.want)
			}
		})
	}
	for s, want := range map[string]bool{"a*": true, "a?": true, "abc": false, "": false, "a.b": false} {
		if got := Contains(s); got != want {
			t.Errorf("Contains(%q) = %v, want %v", s, got, want)
		}
	}
}

// reference is an obviously correct, exponential-time matcher over runes.
func reference(p, s []rune) bool {
	if len(p) == 0 {
		return len(s) == 0
	}
	switch p[0] {
	case '*':
		for i := 0; i <= len(s); i++ {
			if reference(p[1:], s[i:]) {
				return true
			}
		}
		return false
	case '?':
		return len(s) > 0 && reference(p[1:], s[1:])
	}
	return len(s) > 0 && p[0] == s[0] && reference(p[1:], s[1:])
}

func FuzzMatchReference(f *testing.F) {
	f.Add("a*b?c", "aXXbYc")
	f.Add("*?é*", "xéy")
	f.Fuzz(func(t *testing.T, p, s string) {
		if len(p) > 12 || len(s) > 24 || !utf8.ValidString(p) || !utf8.ValidString(s) {
			return // keep the exponential reference cheap and its runes exact
		}
		if got, want := Match(p, s), reference([]rune(p), []rune(s)); got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", p, s, got, want)
		}
	})
}

func BenchmarkMatch(b *testing.B) {
	for i := 0; i < b.N; i++ {
		Match("ghcr.io/*/test-nginx:*", "ghcr.io/kyverno/test-nginx:1.1.9")
	}
}

func FuzzMatch(f *testing.F) {
	f.Add("a*b?c", "aXXbYc")
	f.Fuzz(func(t *testing.T, p, s string) {
		if Match(p, p) != true && !Contains(p) {
			t.Fatalf("literal pattern %q does not match itself", p)
		}
		_ = Match(p, s)
	})
}

// quadratic is the matcher Match replaced (until issue 28): one pass over
// s that backtracks to the last `*`, correct on every input, invalid UTF-8
// included, but O(len(pattern)*len(s)): a `*` and 40,000 characters
// against a 500 KB value took minutes.
func quadratic(pattern, s string) bool {
	if pattern == s {
		return true
	}
	if pattern == "*" {
		return true
	}
	// Index-based matching over bytes, with multi-byte runes decoded on
	// demand. star/mark remember the last `*` and the position in s it was
	// last tried against, for backtracking.
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		if pi < len(pattern) {
			switch c := pattern[pi]; {
			case c == '*':
				star, mark = pi, si
				pi++
				continue
			case c == '?':
				pi++
				si += runeLen(s, si)
				continue
			case c < utf8.RuneSelf:
				if s[si] == c {
					pi++
					si++
					continue
				}
			default:
				pr, pl := utf8.DecodeRuneInString(pattern[pi:])
				sr, sl := utf8.DecodeRuneInString(s[si:])
				if pr == sr {
					pi += pl
					si += sl
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		// Let the last `*` absorb one more character and retry.
		mark += runeLen(s, mark)
		pi, si = star+1, mark
	}
	for pi < len(pattern) && pattern[pi] == '*' {
		pi++
	}
	return pi == len(pattern)
}

// FuzzMatchQuadratic holds Match to the matcher it replaced, on any bytes:
// invalid UTF-8, U+FFFD, `?` and `*` in the text.
func FuzzMatchQuadratic(f *testing.F) {
	for _, seed := range [][2]string{
		{"a*b?c", "aXXbYc"}, {"*?é*", "xéy"}, {"*\xbe*", "ab\xf8c"}, {"*\ufffd?*", "\xe2\x82x"},
		{"*ab?*ab*", "xabyabab"}, {"?*?", "\xf0\x9f\x98"}, {"*a*", "\xc3\xa9a"}, {"*\xa9*", "\xc3\xa9"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, p, s string) {
		if len(p) > 256 || len(s) > 1024 {
			return
		}
		if got, want := Match(p, s), quadratic(p, s); got != want {
			t.Fatalf("Match(%q, %q) = %v, the previous matcher says %v", p, s, got, want)
		}
	})
}

// TestMatchAttack is finding 4 of issue 28: one `*` and 40,000 characters
// against a 500 KB value. The answer comes from comparing the last 40,000
// characters once (Cost says so), where the previous matcher compared
// them at each of 500,000 places.
func TestMatchAttack(t *testing.T) {
	value := strings.Repeat("a", 500_000)
	tests := map[string]struct {
		pattern string
		want    bool
		// maxCost bounds Cost(pattern, len(value)).
		maxCost int64
	}{
		"star then 40,000 characters":          {"*" + strings.Repeat("a", 39_999) + "b", false, 540_001},
		"star then 40,000 characters matching": {"*" + strings.Repeat("a", 40_000), true, 540_001},
		"40,000 characters then star":          {strings.Repeat("a", 39_999) + "b*", false, 540_001},
		"star, 40,000 characters, star":        {"*" + strings.Repeat("a", 39_999) + "b*", false, 540_002},
		"stars between plain characters":       {strings.Repeat("*"+strings.Repeat("a", 99)+"b", 400), false, 540_400},
		"a ? between stars costs its product":  {"*" + strings.Repeat("a?", 20_000) + "b*", false, 40_002 * 500_000 * 2},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cost := Cost(tc.pattern, len(value))
			if cost > tc.maxCost {
				t.Errorf("Cost = %d, want at most %d", cost, tc.maxCost)
			}
			if cost > 1_000_000 {
				return // bounded by the caller's budget, not run here
			}
			if got := Match(tc.pattern, value); got != tc.want {
				t.Fatalf("Match = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCost(t *testing.T) {
	tests := map[string]struct {
		pattern string
		n       int
		want    int64
	}{
		"literal":                 {"nginx", 10, 15},
		"prefix and suffix":       {"a?*?b", 10, 15},
		"plain middle":            {"*abc*", 10, 15},
		"question middle":         {"*a?c*", 10, 15 + 30},
		"replacement char middle": {"*\ufffd*", 10, 5 + 10 + 30},
		"invalid byte middle":     {"*\xff*", 10, 3 + 10 + 10},
		"two middles":             {"*a?*b?*", 100, 7 + 100 + 200 + 200},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Cost(tc.pattern, tc.n); got != tc.want {
				t.Fatalf("Cost(%q, %d) = %d, want %d", tc.pattern, tc.n, got, tc.want)
			}
		})
	}
}

func BenchmarkMatchAttack(b *testing.B) {
	value := strings.Repeat("a", 500_000)
	pattern := "*" + strings.Repeat("a", 39_999) + "b"
	b.SetBytes(int64(len(value)))
	for b.Loop() {
		if Match(pattern, value) {
			b.Fatal("matched")
		}
	}
}
