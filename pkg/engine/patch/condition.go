package patch

import (
	"fmt"
	"sort"
	"strconv"
)

// This file checks the value of a conditional or global anchor against the
// resource. The value may itself be a pattern tree with anchors, so this is
// a compact form of Kyverno's validation pattern walk: maps match key by
// key, a list pattern whose first element is a map must match every
// resource element (elements rejected by a conditional anchor are skipped),
// and scalar patterns go through matchValue.

// condKind classifies a pattern mismatch. Mismatches raised by conditional
// or global anchors mean "does not apply" rather than "fails", which lets a
// list of maps skip elements.
type condKind int

const (
	condPlain condKind = iota
	condConditional
	condGlobal
	condNegation
)

type condError struct {
	kind condKind
	path string
	msg  string
}

func (e *condError) Error() string {
	return e.path + ": " + e.msg
}

func (e *condError) skips() bool {
	return e.kind == condConditional || e.kind == condGlobal
}

func mismatch(kind condKind, path, format string, args ...any) *condError {
	return &condError{kind: kind, path: path, msg: fmt.Sprintf(format, args...)}
}

// matchPattern reports why resource does not match pattern, or nil.
func matchPattern(resource, pattern any) *condError {
	return matchElement(resource, pattern, "/")
}

func matchElement(resource, pattern any, path string) *condError {
	switch p := pattern.(type) {
	case map[string]any:
		r, ok := resource.(map[string]any)
		if !ok {
			return mismatch(condPlain, path, "expected a map, found %T", resource)
		}
		return matchMap(r, p, path)
	case []any:
		r, ok := resource.([]any)
		if !ok {
			return mismatch(condPlain, path, "expected a list, found %T", resource)
		}
		return matchList(r, p, path)
	case string, float64, int, int64, bool, nil:
		if list, ok := resource.([]any); ok {
			for _, item := range list {
				if !matchValue(item, pattern) {
					return mismatch(condPlain, path, "value %v does not match %v", item, pattern)
				}
			}
			return nil
		}
		if !matchValue(resource, pattern) {
			return mismatch(condPlain, path, "value %v does not match %v", resource, pattern)
		}
		return nil
	default:
		return mismatch(condPlain, path, "unsupported pattern type %T", pattern)
	}
}

func matchMap(resource, pattern map[string]any, path string) *condError {
	pattern = expandMetadataWildcards(pattern, resource)

	// Anchors first (conditional, existence, equality, negation), sorted.
	var anchored, globals, nested, plain []string
	for k, v := range pattern {
		a, ok := parseAnchor(k)
		switch {
		case ok && (a.kind == anchorCondition || a.kind == anchorExistence || a.kind == anchorEquality || a.kind == anchorNegation):
			anchored = append(anchored, k)
		case ok && a.kind == anchorGlobal:
			globals = append(globals, k)
		case hasAnyAnchor(v):
			nested = append(nested, k)
		default:
			plain = append(plain, k)
		}
	}
	sort.Strings(anchored)
	sort.Strings(globals)
	sort.Strings(nested)
	sort.Strings(plain)
	for _, group := range [][]string{anchored, globals, nested, plain} {
		for _, k := range group {
			if err := matchKey(resource, k, pattern[k], path); err != nil {
				return err
			}
		}
	}
	return nil
}

func matchKey(resource map[string]any, key string, pattern any, path string) *condError {
	a, isAnchor := parseAnchor(key)
	if !isAnchor {
		a = anchor{key: key}
	}
	value, present := resource[a.key]
	sub := path + a.key + "/"
	switch {
	case isAnchor && a.kind == anchorCondition:
		if !present {
			return mismatch(condConditional, sub, "conditional anchor key is missing")
		}
		if err := matchElement(value, pattern, sub); err != nil {
			return &condError{kind: condConditional, path: err.path, msg: err.msg}
		}
	case isAnchor && a.kind == anchorGlobal:
		if !present {
			return nil
		}
		if err := matchElement(value, pattern, sub); err != nil {
			return &condError{kind: condGlobal, path: err.path, msg: err.msg}
		}
	case isAnchor && a.kind == anchorEquality:
		if present {
			return matchElement(value, pattern, sub)
		}
	case isAnchor && a.kind == anchorNegation:
		if present {
			return mismatch(condNegation, sub, "key is not allowed")
		}
	case isAnchor && a.kind == anchorExistence:
		if present {
			return matchExistence(value, pattern, sub)
		}
	default:
		// Plain keys, including add-if-not-present keys, which have no
		// meaning in a condition and so look up a key of that literal name.
		if s, ok := pattern.(string); ok && s == "*" {
			if resource[key] == nil {
				return mismatch(condPlain, path, "%s not found", key)
			}
			return nil
		}
		return matchElement(resource[key], pattern, path+key+"/")
	}
	return nil
}

// matchExistence checks an existence anchor: every map in the pattern list
// must match at least one element of the resource list.
func matchExistence(value, pattern any, path string) *condError {
	list, ok := value.([]any)
	if !ok {
		return mismatch(condPlain, path, "existence anchor needs a list, found %T", value)
	}
	patterns, ok := pattern.([]any)
	if !ok {
		return mismatch(condPlain, path, "existence anchor pattern must be a list")
	}
	for _, p := range patterns {
		pm, ok := p.(map[string]any)
		if !ok {
			return mismatch(condPlain, path, "existence anchor pattern elements must be maps")
		}
		found := false
		for i, item := range list {
			if matchElement(item, pm, path+strconv.Itoa(i)+"/") == nil {
				found = true
				break
			}
		}
		if !found {
			return mismatch(condPlain, path, "no element matches the existence anchor")
		}
	}
	return nil
}

func matchList(resource, pattern []any, path string) *condError {
	if len(pattern) == 0 {
		return mismatch(condPlain, path, "empty list pattern")
	}
	switch first := pattern[0].(type) {
	case map[string]any:
		return matchEach(resource, func(int) any { return first }, len(resource), path)
	case string, float64, int, int64, bool, nil:
		return matchElement(resource, first, path)
	default:
		if len(resource) < len(pattern) {
			return mismatch(condPlain, path, "list has %d elements, pattern needs %d", len(resource), len(pattern))
		}
		return matchEachPaired(resource, pattern, path)
	}
}

// matchEach matches every resource element with the pattern returned by
// patternAt. Elements rejected by a conditional or global anchor are
// skipped; if all of them are, the list is rejected the same way.
func matchEach(resource []any, patternAt func(int) any, n int, path string) *condError {
	applied := 0
	var skipped *condError
	for i := 0; i < n; i++ {
		err := matchElement(resource[i], patternAt(i), path+strconv.Itoa(i)+"/")
		if err == nil {
			applied++
			continue
		}
		if !err.skips() {
			return err
		}
		if skipped == nil || (skipped.kind == condGlobal && err.kind == condConditional) {
			skipped = err
		}
	}
	if applied == 0 && skipped != nil {
		return skipped
	}
	return nil
}

func matchEachPaired(resource, pattern []any, path string) *condError {
	return matchEach(resource, func(i int) any { return pattern[i] }, len(pattern), path)
}

// hasAnyAnchor reports whether a pattern value contains an anchor key.
func hasAnyAnchor(v any) bool {
	switch t := v.(type) {
	case map[string]any:
		for k, sub := range t {
			if _, ok := parseAnchor(k); ok {
				return true
			}
			if hasAnyAnchor(sub) {
				return true
			}
		}
	case []any:
		for _, sub := range t {
			if hasAnyAnchor(sub) {
				return true
			}
		}
	}
	return false
}

// expandMetadataWildcards replaces wildcard keys of metadata.labels and
// metadata.annotations in a pattern with the first (sorted) matching key of
// the resource, keeping any anchor around the key. The pattern is not
// modified; a changed copy is returned.
func expandMetadataWildcards(pattern, resource map[string]any) map[string]any {
	pmKey, pm := lookupMaybeAnchored(pattern, "metadata")
	pmeta, ok := pm.(map[string]any)
	if !ok {
		return pattern
	}
	rmeta, ok := resource["metadata"].(map[string]any)
	if !ok {
		return pattern
	}
	var newMeta map[string]any
	for _, tag := range []string{"labels", "annotations"} {
		ptKey, pt := lookupMaybeAnchored(pmeta, tag)
		ptags, ok := pt.(map[string]any)
		if !ok {
			continue
		}
		rtags, ok := rmeta[tag].(map[string]any)
		if !ok {
			continue
		}
		expanded, changed := expandKeys(ptags, rtags)
		if !changed {
			continue
		}
		if newMeta == nil {
			newMeta = shallowCopy(pmeta)
		}
		newMeta[ptKey] = expanded
	}
	if newMeta == nil {
		return pattern
	}
	out := shallowCopy(pattern)
	out[pmKey] = newMeta
	return out
}

func expandKeys(pattern, resource map[string]any) (map[string]any, bool) {
	rkeys := sortedKeys(resource)
	changed := false
	out := make(map[string]any, len(pattern))
	for k, v := range pattern {
		if !hasWildcard(k) {
			out[k] = v
			continue
		}
		a, anchored := parseAnchor(k)
		name := k
		if anchored {
			name = a.key
		}
		for _, rk := range rkeys {
			if wildcardMatch(name, rk) {
				name = rk
				changed = true
				break
			}
		}
		if anchored {
			a.key = name
			out[a.String()] = v
		} else {
			out[name] = v
		}
	}
	return out, changed
}

func lookupMaybeAnchored(m map[string]any, key string) (string, any) {
	if v, ok := m[key]; ok {
		return key, v
	}
	for _, k := range sortedKeys(m) {
		if a, ok := parseAnchor(k); ok && a.key == key {
			return k, m[k]
		}
	}
	return "", nil
}
