package wildcard

import (
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
