// Package wildcard matches strings against the glob-like patterns Kyverno
// accepts in names, namespaces, images, pattern values, condition values
// and the JMESPath function wildcard(): `*` matches any run of characters
// (including none) and `?` matches exactly one character. Every other
// character, `.` included, matches only itself. It is the engine's only
// wildcard matcher.
//
// The rules are those of the library Kyverno uses (IGLOU-EU/go-wildcard
// v1.0.3, reached through Kyverno's ext/wildcard.Match): matching is done
// on characters, and a byte that is not valid UTF-8 reads as U+FFFD, as Go's
// []rune conversion reads it.
package wildcard

import (
	"strings"
	"unicode/utf8"
)

// Match reports whether s matches pattern. It runs in
// O(len(pattern)*len(s)) time at worst and never allocates.
func Match(pattern, s string) bool {
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

// MatchAny reports whether s matches at least one of patterns.
func MatchAny(patterns []string, s string) bool {
	for _, p := range patterns {
		if Match(p, s) {
			return true
		}
	}
	return false
}

// Contains reports whether s holds a wildcard character (`*` or `?`).
func Contains(s string) bool {
	return strings.IndexByte(s, '*') >= 0 || strings.IndexByte(s, '?') >= 0
}

// runeLen returns the byte length of the UTF-8 sequence starting at s[i];
// an invalid byte counts as one character.
func runeLen(s string, i int) int {
	if s[i] < utf8.RuneSelf {
		return 1
	}
	_, n := utf8.DecodeRuneInString(s[i:])
	return n
}
