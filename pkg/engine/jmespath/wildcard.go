package jmespath

// wildcardMatch reports whether s matches pattern, where '*' matches any
// sequence of characters (including none) and '?' matches exactly one
// character. Every other character matches itself. It runs in
// O(len(pattern)*len(s)) time at worst.
func wildcardMatch(pattern, s string) bool {
	p := []rune(pattern)
	t := []rune(s)
	pi, ti := 0, 0
	// Position of the last '*' seen in p and the position in t it was
	// tried against, for backtracking.
	star, mark := -1, 0
	for ti < len(t) {
		switch {
		case pi < len(p) && p[pi] == '*':
			star, mark = pi, ti
			pi++
		case pi < len(p) && (p[pi] == '?' || p[pi] == t[ti]):
			pi++
			ti++
		case star >= 0:
			// Let the last '*' absorb one more character.
			mark++
			pi, ti = star+1, mark
		default:
			return false
		}
	}
	for pi < len(p) && p[pi] == '*' {
		pi++
	}
	return pi == len(p)
}
