// Package wildcard matches strings against the glob-like patterns Kyverno
// accepts in names, namespaces, images and condition values: `*` matches any
// run of characters (including none) and `?` matches exactly one character.
// Every other character, `.` included, matches only itself.
package wildcard

import (
	"strings"
	"unicode/utf8"
)

// Match reports whether s matches pattern. Matching is done on runes, so `?`
// stands for one character even when that character is several bytes long.
// It runs in O(len(pattern)*len(s)) time at worst and never allocates for
// ASCII input.
func Match(pattern, s string) bool {
	if pattern == s {
		return true
	}
	if !Contains(pattern) {
		return false
	}
	if pattern == "*" {
		return true
	}
	// Index-based matching over bytes, with multi-byte runes handled by
	// decoding on demand. star/mark remember the last `*` and the position
	// in s it was last tried against, for backtracking.
	pi, si := 0, 0
	star, mark := -1, 0
	for si < len(s) {
		if pi < len(pattern) {
			switch c := pattern[pi]; c {
			case '*':
				star, mark = pi, si
				pi++
				continue
			case '?':
				pi++
				si += runeLen(s, si)
				continue
			default:
				if c < 0x80 {
					if s[si] == c {
						pi++
						si++
						continue
					}
				} else {
					pl, sl := runeLen(pattern, pi), runeLen(s, si)
					if pl == sl && pattern[pi:pi+pl] == s[si:si+sl] {
						pi += pl
						si += sl
						continue
					}
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
