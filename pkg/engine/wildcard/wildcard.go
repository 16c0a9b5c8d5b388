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
//
// Patterns and values both come from outside (a tenant's policy, a
// request's object), so the work of a match is bounded by its input: see
// Cost.
package wildcard

import (
	"strings"
	"unicode/utf8"
)

// Match reports whether s matches pattern.
//
// A pattern is segments separated by `*`: the first segment must match the
// start of s, the last its end, and the ones between, in order, leftmost
// first (a segment has a fixed length in characters, so the leftmost
// occurrence never loses a match a later one would find). The first and
// last segments are compared once, a middle segment of plain characters is
// found with strings.Index, and only a middle segment holding a `?` (or
// U+FFFD, or bytes that are not UTF-8) is tried at each position of s:
// Cost(pattern, len(s)) bounds the work, and is linear in
// len(pattern)+len(s) for every pattern with no `?` between two `*`. Match
// never allocates.
func Match(pattern, s string) bool {
	if pattern == s || pattern == "*" {
		return true
	}
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		n, ok := prefix(pattern, s)
		return ok && n == len(s)
	}
	// The first segment against the start of s.
	n, ok := prefix(pattern[:star], s)
	if !ok {
		return false
	}
	s = s[n:]
	// The last segment against the end of what is left.
	last := strings.LastIndexByte(pattern, '*')
	tail := pattern[last+1:]
	if tail != "" {
		start, ok := suffixStart(tail, s)
		if !ok {
			return false
		}
		if n, ok := prefix(tail, s[start:]); !ok || start+n != len(s) {
			return false
		}
		s = s[:start]
	}
	// The middle segments, in order, each at its leftmost place.
	for mid := middle(pattern, star, last); mid != ""; {
		var seg string
		seg, mid, _ = strings.Cut(mid, "*")
		if seg == "" {
			continue
		}
		at, n := find(seg, s)
		if at < 0 {
			return false
		}
		s = s[at+n:]
	}
	return true
}

// Cost is an upper bound, in byte comparisons, of the work of
// Match(pattern, s) for a string s of n bytes: len(pattern) plus n, plus,
// for each segment between two `*` that is tried at each position (see
// Match), its length times n. It reads only pattern, so a caller can
// charge a match to a budget before it runs.
func Cost(pattern string, n int) int64 {
	cost := int64(len(pattern)) + int64(n)
	star := strings.IndexByte(pattern, '*')
	if star < 0 {
		return cost
	}
	last := strings.LastIndexByte(pattern, '*')
	for mid := middle(pattern, star, last); mid != ""; {
		var seg string
		seg, mid, _ = strings.Cut(mid, "*")
		if !plain(seg) {
			cost += int64(len(seg)) * int64(n)
		}
	}
	return cost
}

// middle returns what lies between the first `*` of pattern, at star, and
// its last, at last.
func middle(pattern string, star, last int) string {
	if star == last {
		return ""
	}
	return pattern[star+1 : last]
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

// plain reports whether seg, a pattern with no `*`, can be found in a
// string byte for byte: it holds no `?`, and its characters are valid
// UTF-8 other than U+FFFD (which matches any byte that is not UTF-8). A
// plain segment starts on a character's first byte wherever its bytes
// are, and its characters are those bytes.
func plain(seg string) bool {
	return strings.IndexByte(seg, '?') < 0 && utf8.ValidString(seg) && !strings.ContainsRune(seg, utf8.RuneError)
}

// prefix matches seg, a pattern with no `*`, against the start of s, and
// returns the number of bytes of s it covers: character by character, a
// `?` taking one character of s.
func prefix(seg, s string) (int, bool) {
	pi, si := 0, 0
	for pi < len(seg) {
		if si >= len(s) {
			return 0, false
		}
		switch c := seg[pi]; {
		case c == '?':
			pi++
			si += runeLen(s, si)
		case c < utf8.RuneSelf:
			if s[si] != c {
				return 0, false
			}
			pi++
			si++
		default:
			pr, pl := utf8.DecodeRuneInString(seg[pi:])
			sr, sl := utf8.DecodeRuneInString(s[si:])
			if pr != sr {
				return 0, false
			}
			pi += pl
			si += sl
		}
	}
	return si, true
}

// suffixStart returns where in s the last segment tail must start: as many
// characters from the end of s as tail holds.
func suffixStart(tail, s string) (int, bool) {
	end := len(s)
	for n := utf8.RuneCountInString(tail); n > 0; n-- {
		if end == 0 {
			return 0, false
		}
		_, size := utf8.DecodeLastRuneInString(s[:end])
		end -= size
	}
	return end, true
}

// find returns the leftmost place of seg, a non-empty pattern with no `*`,
// in s, and the number of bytes it covers there; -1 when it is nowhere.
func find(seg, s string) (at, n int) {
	if plain(seg) {
		return strings.Index(s, seg), len(seg)
	}
	// Try only where the plain characters before the first `?` are, if
	// they are plain.
	lit := seg
	if q := strings.IndexByte(seg, '?'); q >= 0 {
		lit = seg[:q]
	}
	if !plain(lit) {
		lit = ""
	}
	for i := 0; i <= len(s); {
		if lit != "" {
			j := strings.Index(s[i:], lit)
			if j < 0 {
				return -1, 0
			}
			i += j
		}
		if n, ok := prefix(seg, s[i:]); ok {
			return i, n
		}
		if i == len(s) {
			break
		}
		i += runeLen(s, i)
	}
	return -1, 0
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
