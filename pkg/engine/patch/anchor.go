package patch

import "github.com/verdict-dev/verdict/pkg/engine/pattern"

// Anchors are read by package pattern; these are the questions the
// strategic merge preprocessing asks of a key.

// isConditional reports whether a is a conditional or a global anchor:
// the two anchors that decide whether a mutation applies.
func isConditional(a pattern.AnchorKind) bool { return a.IsConditional() }

// isMutateAnchor reports whether a is handled by the preprocessing
// (conditional, global and add-if-not-present anchors).
func isMutateAnchor(a pattern.AnchorKind) bool {
	return a.IsConditional() || a == pattern.AddIfAbsent
}

func isGlobal(a pattern.AnchorKind) bool { return a == pattern.Global }

// keyIs reports whether key is anchored with a kind satisfying pred.
func keyIs(key string, pred func(pattern.AnchorKind) bool) bool {
	a, _ := pattern.ParseAnchor(key)
	return a != pattern.NoAnchor && pred(a)
}
