package patch

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/verdict-dev/verdict/pkg/engine/pattern"
)

// This file checks the value of a conditional or global anchor against the
// resource. The value may itself be a pattern tree with anchors, so this is
// a compact form of Kyverno's validation pattern walk: maps match key by
// key, a list pattern whose first element is a map must match every
// resource element (elements rejected by a conditional anchor are skipped),
// and scalar patterns go through the value language (pattern.Value), with
// anchors read and metadata wildcards expanded by package pattern too.
// Each element visited, value compared and wildcard expanded is charged
// to the patch's budget first; once it refuses, the check ends with a
// mismatch of kind condStopped, which no caller reads as a skip.

// condKind classifies a pattern mismatch. Mismatches raised by conditional
// or global anchors mean "does not apply" rather than "fails", which lets a
// list of maps skip elements.
type condKind int

const (
	condPlain condKind = iota
	condConditional
	condGlobal
	condNegation
	// condStopped is a check the budget stopped: it says nothing of the
	// resource.
	condStopped
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

// matchPattern reports why resource does not match pattern, or nil; its
// work is charged to b.
func matchPattern(resource, pat any, b *budget) *condError {
	return matchElement(resource, pat, "/", b)
}

func matchElement(resource, pat any, path string, b *budget) *condError {
	if b.work(elementWork) {
		return b.stopped(path)
	}
	switch p := pat.(type) {
	case map[string]any:
		r, ok := resource.(map[string]any)
		if !ok {
			return mismatch(condPlain, path, "expected a map, found %T", resource)
		}
		return matchMap(r, p, path, b)
	case []any:
		r, ok := resource.([]any)
		if !ok {
			return mismatch(condPlain, path, "expected a list, found %T", resource)
		}
		return matchList(r, p, path, b)
	case string, float64, int, int64, bool, nil:
		if list, ok := resource.([]any); ok {
			for _, item := range list {
				if b.work(pattern.ValueCost(item, pat)) {
					return b.stopped(path)
				}
				if !pattern.Value(item, pat) {
					return mismatch(condPlain, path, "value %v does not match %v", item, pat)
				}
			}
			return nil
		}
		if b.work(pattern.ValueCost(resource, pat)) {
			return b.stopped(path)
		}
		if !pattern.Value(resource, pat) {
			return mismatch(condPlain, path, "value %v does not match %v", resource, pat)
		}
		return nil
	default:
		return mismatch(condPlain, path, "unsupported pattern type %T", pat)
	}
}

func matchMap(resource, pat map[string]any, path string, b *budget) *condError {
	if b.work(pattern.ExpandMetadataWildcardsCost(pat, resource)) {
		return b.stopped(path)
	}
	pat = pattern.ExpandMetadataWildcards(pat, resource)

	// Anchors first (conditional, existence, equality, negation), sorted.
	var anchored, globals, nested, plain []string
	for k, v := range pat {
		switch kind, _ := pattern.ParseAnchor(k); {
		case kind == pattern.Condition || kind == pattern.Existence || kind == pattern.Equality || kind == pattern.Negation:
			anchored = append(anchored, k)
		case kind == pattern.Global:
			globals = append(globals, k)
		case pattern.HasAnchors(v):
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
			if err := matchKey(resource, k, pat[k], path, b); err != nil {
				return err
			}
		}
	}
	return nil
}

func matchKey(resource map[string]any, key string, pat any, path string, b *budget) *condError {
	kind, name := pattern.ParseAnchor(key)
	value, present := resource[name]
	sub := path + name + "/"
	switch kind {
	case pattern.Condition:
		if !present {
			return mismatch(condConditional, sub, "conditional anchor key is missing")
		}
		if err := matchElement(value, pat, sub, b); err != nil {
			return err.as(condConditional)
		}
	case pattern.Global:
		if !present {
			return nil
		}
		if err := matchElement(value, pat, sub, b); err != nil {
			return err.as(condGlobal)
		}
	case pattern.Equality:
		if present {
			return matchElement(value, pat, sub, b)
		}
	case pattern.Negation:
		if present {
			return mismatch(condNegation, sub, "key is not allowed")
		}
	case pattern.Existence:
		if present {
			return matchExistence(value, pat, sub, b)
		}
	default:
		// Plain keys, including add-if-not-present keys, which have no
		// meaning in a condition and so look up a key of that literal name.
		if s, ok := pat.(string); ok && s == "*" {
			if resource[key] == nil {
				return mismatch(condPlain, path, "%s not found", key)
			}
			return nil
		}
		return matchElement(resource[key], pat, path+key+"/", b)
	}
	return nil
}

// as is the mismatch reported as one of kind, unless the budget stopped
// the check.
func (e *condError) as(kind condKind) *condError {
	if e.kind == condStopped {
		return e
	}
	return &condError{kind: kind, path: e.path, msg: e.msg}
}

// matchExistence checks an existence anchor: every map in the pattern list
// must match at least one element of the resource list.
func matchExistence(value, pat any, path string, b *budget) *condError {
	list, ok := value.([]any)
	if !ok {
		return mismatch(condPlain, path, "existence anchor needs a list, found %T", value)
	}
	patterns, ok := pat.([]any)
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
			err := matchElement(item, pm, path+strconv.Itoa(i)+"/", b)
			if err == nil {
				found = true
				break
			}
			if err.kind == condStopped {
				return err
			}
		}
		if !found {
			return mismatch(condPlain, path, "no element matches the existence anchor")
		}
	}
	return nil
}

func matchList(resource, pat []any, path string, b *budget) *condError {
	if len(pat) == 0 {
		return mismatch(condPlain, path, "empty list pattern")
	}
	switch first := pat[0].(type) {
	case map[string]any:
		return matchEach(resource, func(int) any { return first }, len(resource), path, b)
	case string, float64, int, int64, bool, nil:
		return matchElement(resource, first, path, b)
	default:
		if len(resource) < len(pat) {
			return mismatch(condPlain, path, "list has %d elements, pattern needs %d", len(resource), len(pat))
		}
		return matchEachPaired(resource, pat, path, b)
	}
}

// matchEach matches every resource element with the pattern returned by
// patternAt. Elements rejected by a conditional or global anchor are
// skipped; if all of them are, the list is rejected the same way.
func matchEach(resource []any, patternAt func(int) any, n int, path string, b *budget) *condError {
	applied := 0
	var skipped *condError
	for i := 0; i < n; i++ {
		err := matchElement(resource[i], patternAt(i), path+strconv.Itoa(i)+"/", b)
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

func matchEachPaired(resource, pat []any, path string, b *budget) *condError {
	return matchEach(resource, func(i int) any { return pat[i] }, len(pat), path, b)
}
