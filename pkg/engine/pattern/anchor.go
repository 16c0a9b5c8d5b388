// Package pattern is the engine's pattern language: Kyverno's anchors on
// keys (anchor.go), its value language in leaves (value.go) and the walk
// that matches a resource against a validate pattern (validate.go). Mutate
// conditional anchors (package patch) and the range operands of the AnyIn
// and AllIn conditions (package conditions) use the same anchors and the
// same value language, and package wildcard is the engine's only wildcard
// matcher, so each (value, pattern) pair has one answer everywhere.
// TestValueLanguageOneAnswer in package engine lists the cases where
// earlier copies disagreed and the Kyverno function that decides each.
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

// IsConditional reports whether k decides whether a rule applies: a
// conditional or a global anchor.
func (k AnchorKind) IsConditional() bool { return k == Condition || k == Global }

// ParseAnchor splits an anchored key into its kind and the plain key; a
// plain key comes back unchanged with NoAnchor. As in Kyverno's
// anchor.Parse, spaces around the key are ignored and the key between the
// parentheses is one line of at least one character: the key must read
// `^([+<=X^])?\((.+)\)$` once trimmed.
func ParseAnchor(key string) (AnchorKind, string) {
	s := strings.TrimSpace(key)
	if len(s) < 3 || s[len(s)-1] != ')' {
		return NoAnchor, key
	}
	kind, inner := Condition, ""
	if s[0] == '(' {
		inner = s[1 : len(s)-1]
	} else {
		if len(s) < 4 || s[1] != '(' {
			return NoAnchor, key
		}
		switch s[0] {
		case '=':
			kind = Equality
		case '+':
			kind = AddIfAbsent
		case '<':
			kind = Global
		case 'X':
			kind = Negation
		case '^':
			kind = Existence
		default:
			return NoAnchor, key
		}
		inner = s[2 : len(s)-1]
	}
	if strings.IndexByte(inner, '\n') >= 0 {
		return NoAnchor, key
	}
	return kind, inner
}

// FormatAnchor writes key with the anchor of kind k, e.g. "+(name)".
func FormatAnchor(k AnchorKind, key string) string {
	switch k {
	case Condition:
		return "(" + key + ")"
	case Equality:
		return "=(" + key + ")"
	case AddIfAbsent:
		return "+(" + key + ")"
	case Global:
		return "<(" + key + ")"
	case Negation:
		return "X(" + key + ")"
	case Existence:
		return "^(" + key + ")"
	}
	return key
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
