package patch

import (
	"errors"
	"fmt"

	"github.com/verdict-dev/verdict/pkg/engine/pattern"
)

// Preprocessing turns an overlay with anchors into a plain strategic merge
// patch, following Kyverno's rules:
//
//   - "+(key)": kept as "key" when the resource has no such key at that
//     place, dropped otherwise.
//   - "(key)" / "<(key)": the key must exist in the resource and its value
//     must match (see matchPattern). In a map, a failed condition skips the
//     whole patch. In a list of maps, an element with conditions is checked
//     against every resource element; for each match a copy of the element,
//     anchors removed, is added to the patch with the "name" of the matched
//     resource element (so it merges into it). A failed global condition
//     skips the whole patch unless some resource element satisfied it.
//   - afterwards every anchored key, and every list element that still
//     carries an anchor, is removed from the patch; maps left empty by that
//     (and empty maps in general) are removed too.
//
// Kyverno reuses one working copy of a list element for all resource
// elements, so add-if-not-present anchors resolved for one element stay
// resolved for the next; this package does the same to match its results.

// errSkip is the cause of a skipped patch: a conditional or global anchor
// did not hold.
type errSkip struct {
	global bool
	reason string
}

func (e *errSkip) Error() string {
	if e.global {
		return "global anchor mismatch: " + e.reason
	}
	return "conditional anchor mismatch: " + e.reason
}

func asSkip(err error) (*errSkip, bool) {
	var s *errSkip
	ok := errors.As(err, &s)
	return s, ok
}

// preprocessOverlay rewrites overlay (a private copy, modified in place)
// against resource. It returns an *errSkip when anchors do not hold, and
// the meter's error when b refused the work of checking them.
func preprocessOverlay(overlay map[string]any, resource map[string]any, b *budget) error {
	if _, err := preprocess(overlay, resource, true, b); err != nil {
		return err
	}
	for _, k := range sortedKeys(overlay) {
		deleteScalar := keyIs(k, isConditional)
		v, drop := stripAnchors(overlay[k], deleteScalar)
		if drop {
			delete(overlay, k)
		} else {
			overlay[k] = v
		}
	}
	return nil
}

// preprocess walks pattern against resource. present tells a missing
// resource value from an explicit null. It returns the (possibly new)
// pattern value: lists may grow.
func preprocess(pattern, resource any, present bool, b *budget) (any, error) {
	switch p := pattern.(type) {
	case map[string]any:
		return p, preprocessMap(p, resource, b)
	case []any:
		if len(p) == 0 {
			return p, nil
		}
		if _, ok := p[0].(map[string]any); ok {
			return preprocessListOfMaps(p, resource, present, b)
		}
	}
	return pattern, nil
}

func preprocessMap(pattern map[string]any, resource any, b *budget) error {
	res, _ := resource.(map[string]any)
	resolveAddAnchors(pattern, res)
	if err := checkConditions(pattern, res, b); err != nil {
		return err
	}
	for _, k := range sortedKeys(pattern) {
		if keyIs(k, isMutateAnchor) {
			continue
		}
		sub, present := res[k]
		v, err := preprocess(pattern[k], sub, present, b)
		pattern[k] = v
		if err != nil {
			return err
		}
	}
	return nil
}

// resolveAddAnchors drops "+(key)" entries whose key exists in resource and
// unwraps the others. It returns the number of such anchors.
func resolveAddAnchors(overlay map[string]any, resource map[string]any) int {
	n := 0
	for _, k := range sortedKeys(overlay) {
		kind, key := pattern.ParseAnchor(k)
		if kind != pattern.AddIfAbsent {
			continue
		}
		n++
		v := overlay[k]
		delete(overlay, k)
		if _, exists := resource[key]; !exists {
			overlay[key] = v
		}
	}
	return n
}

// checkConditions checks global anchors, then conditional anchors, of one
// map level; a check b stopped returns the meter's error.
func checkConditions(overlay map[string]any, resource map[string]any, b *budget) error {
	for _, global := range []bool{true, false} {
		want := pattern.Condition
		if global {
			want = pattern.Global
		}
		for _, k := range sortedKeys(overlay) {
			kind, key := pattern.ParseAnchor(k)
			if kind != want {
				continue
			}
			rv, exists := resource[key]
			if !exists {
				return &errSkip{global: global, reason: fmt.Sprintf("key %q not found in the resource", key)}
			}
			pv := overlay[k]
			if pm, ok := pv.(map[string]any); ok {
				rm, _ := rv.(map[string]any)
				if resolveAddAnchors(pm, rm) > 0 {
					continue
				}
			}
			if err := checkCondition(pv, rv, b); err != nil {
				if err.kind == condStopped {
					return b.err
				}
				return &errSkip{global: global, reason: fmt.Sprintf("%s: %s", key, err.Error())}
			}
		}
	}
	return nil
}

// checkCondition matches one anchor value. Like Kyverno, which reads an
// anchor's scalar value and the resource's scalar as YAML text before
// matching them, scalars on either side are compared by that text: 3 and
// "3" are equal, and so are true and "true". Values inside a map or a list
// keep their types. pattern/value_test.go lists what this changes.
func checkCondition(pat, resource any, b *budget) *condError {
	if s, ok := scalarText(pat); ok {
		pat = s
	}
	if s, ok := scalarText(resource); ok {
		resource = s
	}
	return matchPattern(resource, pat, b)
}

func preprocessListOfMaps(pattern []any, resource any, present bool, b *budget) ([]any, error) {
	var elems []any
	switch r := resource.(type) {
	case nil:
	case []any:
		elems = r
	default:
		return pattern, fmt.Errorf("%w: overlay has a list where the resource has %T", ErrInvalidPatch, resource)
	}
	n := len(pattern)
	for i := 0; i < n; i++ {
		element := pattern[i]
		if !hasAnchors(element, isMutateAnchor) {
			continue
		}
		hasGlobal := hasAnchors(element, isGlobal)
		globalPassed := false
		var lastGlobal error
		work := deepCopy(element)
		for _, re := range elems {
			if b.work(elementWork) {
				return pattern, b.err
			}
			var err error
			work, err = preprocess(work, re, true, b)
			if err != nil {
				s, ok := asSkip(err)
				if !ok {
					return pattern, err
				}
				if s.global {
					lastGlobal = err
				}
				continue
			}
			if hasGlobal {
				globalPassed = true
				continue
			}
			pattern, err = appendNamedCopy(pattern, work, re)
			if err != nil {
				return pattern, err
			}
		}
		if !present {
			_, err := preprocess(work, nil, false, b)
			if err != nil {
				if s, ok := asSkip(err); ok && !s.global {
					continue
				}
				return pattern, err
			}
			if hasGlobal {
				globalPassed = true
			}
		}
		if !globalPassed && lastGlobal != nil {
			return pattern, lastGlobal
		}
	}
	return pattern, nil
}

// appendNamedCopy adds to pattern a copy of the matched element, anchors
// removed, bound to the resource element by its name. Resource elements
// without a name cannot be addressed by the merge and are left alone.
func appendNamedCopy(pattern []any, element, resourceElement any) ([]any, error) {
	rm, ok := resourceElement.(map[string]any)
	if !ok {
		return pattern, nil
	}
	name, ok := rm["name"]
	if !ok || isEmptyValue(name) {
		return pattern, nil
	}
	cp, empty := stripAnchors(deepCopy(element), true)
	if empty {
		return pattern, nil
	}
	m, ok := cp.(map[string]any)
	if !ok {
		return pattern, fmt.Errorf("%w: list element with anchors must be a map", ErrInvalidPatch)
	}
	m["name"] = deepCopy(name)
	return append(pattern, m), nil
}

// hasAnchors reports whether v holds an anchor key satisfying pred. Like
// Kyverno, a string value shaped like a conditional anchor counts too.
func hasAnchors(v any, pred func(pattern.AnchorKind) bool) bool {
	switch t := v.(type) {
	case map[string]any:
		for _, k := range sortedKeys(t) {
			if keyIs(k, pred) {
				return true
			}
			if sub := t[k]; !isEmptyValue(sub) && hasAnchors(sub, pred) {
				return true
			}
		}
	case []any:
		for _, sub := range t {
			if hasAnchors(sub, pred) {
				return true
			}
		}
	case string:
		return keyIs(t, isConditional)
	}
	return false
}

// stripAnchors removes conditional and global anchors from v and reports
// whether v itself should be removed from the patch: a scalar when
// dropScalar is set, a map left empty, or a list emptied by the removal.
// Maps are changed in place; lists are rebuilt.
func stripAnchors(v any, dropScalar bool) (any, bool) {
	switch t := v.(type) {
	case map[string]any:
		return t, stripAnchorsInMap(t)
	case []any:
		return stripAnchorsInList(t)
	default:
		return v, dropScalar
	}
}

func stripAnchorsInMap(m map[string]any) bool {
	kept := false
	for _, k := range sortedKeys(m) {
		if !keyIs(k, isConditional) {
			continue
		}
		v, drop := stripAnchors(m[k], true)
		if drop {
			delete(m, k)
			continue
		}
		m[k] = v
		kept = true
	}
	if kept {
		// Conditions with nested non-anchor content become plain keys.
		for _, k := range sortedKeys(m) {
			if kind, key := pattern.ParseAnchor(k); kind.IsConditional() {
				v := m[k]
				delete(m, k)
				m[key] = v
			}
		}
	}
	empty := true
	for _, k := range sortedKeys(m) {
		v, drop := stripAnchors(m[k], false)
		if drop {
			delete(m, k)
			continue
		}
		m[k] = v
		empty = false
	}
	return empty
}

func stripAnchorsInList(l []any) ([]any, bool) {
	out := make([]any, 0, len(l))
	for _, e := range l {
		if hasAnchors(e, isMutateAnchor) {
			continue
		}
		v, drop := stripAnchors(e, false)
		if !drop {
			out = append(out, v)
		}
	}
	return out, len(out) == 0 && len(l) > 0
}
