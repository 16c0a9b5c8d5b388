package patch

// anchorKind identifies the modifier of a Kyverno anchor key such as
// "(name)", "+(name)" or "<(name)".
type anchorKind byte

const (
	anchorCondition       anchorKind = '('
	anchorGlobal          anchorKind = '<'
	anchorNegation        anchorKind = 'X'
	anchorAddIfNotPresent anchorKind = '+'
	anchorEquality        anchorKind = '='
	anchorExistence       anchorKind = '^'
)

// anchor is a parsed anchor key.
type anchor struct {
	kind anchorKind
	key  string
}

// parseAnchor parses s as an anchor key. The second result is false when s
// is a plain key. An anchor needs a non-empty key between the parentheses.
func parseAnchor(s string) (anchor, bool) {
	if len(s) < 3 || s[len(s)-1] != ')' {
		return anchor{}, false
	}
	if s[0] == '(' {
		return anchor{kind: anchorCondition, key: s[1 : len(s)-1]}, true
	}
	switch anchorKind(s[0]) {
	case anchorGlobal, anchorNegation, anchorAddIfNotPresent, anchorEquality, anchorExistence:
		if len(s) < 4 || s[1] != '(' {
			return anchor{}, false
		}
		return anchor{kind: anchorKind(s[0]), key: s[2 : len(s)-1]}, true
	}
	return anchor{}, false
}

// String returns the anchor in its key form, e.g. "+(name)".
func (a anchor) String() string {
	if a.kind == anchorCondition {
		return "(" + a.key + ")"
	}
	return string(rune(a.kind)) + "(" + a.key + ")"
}

// isConditional reports whether a is a conditional or a global anchor:
// the two anchors that decide whether a mutation applies.
func (a anchor) isConditional() bool {
	return a.kind == anchorCondition || a.kind == anchorGlobal
}

// isMutateAnchor reports whether a is handled by the strategic merge
// preprocessing (conditional, global and add-if-not-present anchors).
func (a anchor) isMutateAnchor() bool {
	return a.isConditional() || a.kind == anchorAddIfNotPresent
}

// keyIs reports whether key parses as an anchor satisfying pred.
func keyIs(key string, pred func(anchor) bool) bool {
	a, ok := parseAnchor(key)
	return ok && pred(a)
}

func isGlobalAnchor(a anchor) bool { return a.kind == anchorGlobal }
