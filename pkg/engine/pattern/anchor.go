// Package pattern matches resources against Kyverno validate patterns:
// anchors on keys, wildcards and operators in values.
package pattern

import "strings"

// AnchorKind is the kind of an anchored key.
type AnchorKind int

// Anchor kinds, by their prefix.
const (
	NoAnchor    AnchorKind = iota
	Condition              // (key)
	Equality               // =(key)
	AddIfAbsent            // +(key)
	Global                 // <(key)
	Negation               // X(key)
	Existence              // ^(key)
)

// ParseAnchor splits an anchored key into its kind and the plain key.
func ParseAnchor(key string) (AnchorKind, string) {
	if len(key) < 3 || key[len(key)-1] != ')' {
		return NoAnchor, key
	}
	if key[0] == '(' {
		return Condition, key[1 : len(key)-1]
	}
	if len(key) < 4 || key[1] != '(' {
		return NoAnchor, key
	}
	inner := key[2 : len(key)-1]
	switch key[0] {
	case '=':
		return Equality, inner
	case '+':
		return AddIfAbsent, inner
	case '<':
		return Global, inner
	case 'X':
		return Negation, inner
	case '^':
		return Existence, inner
	}
	return NoAnchor, key
}

// StripAnchor returns the key without its anchor.
func StripAnchor(key string) string {
	_, k := ParseAnchor(key)
	return k
}

// HasAnchors reports whether any key below v is anchored.
func HasAnchors(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if a, _ := ParseAnchor(k); a != NoAnchor {
				return true
			}
			if HasAnchors(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if HasAnchors(e) {
				return true
			}
		}
	}
	return false
}

// RemoveAnchorsFromPath strips anchors from every segment of a /path/.
func RemoveAnchorsFromPath(p string) string {
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = StripAnchor(s)
	}
	return strings.Join(segs, "/")
}
