package pattern

// This file keeps the walker as it was before patterns were compiled into
// trees, as a reference for TestCompiledMatchesReference and
// FuzzCompiledMatchesReference.

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
)

func refValidate(resource, pattern any, plans map[uintptr]*refPlan) *Error {
	w := refWalkers.Get().(*refWalker)
	w.plans = plans
	err := w.element(resource, pattern)
	w.path, w.plans = w.path[:0], nil
	refWalkers.Put(w)
	return err
}

// refPattern is a pattern prepared once for many validations: the key order
// of each of its objects is worked out ahead.
type refPattern struct {
	raw   any
	plans map[uintptr]*refPlan
}

// refPlan is the evaluation order of one pattern object's keys.
type refPlan struct {
	anchored, plain []string
	// metaWildcards is true when metadata.labels or annotations have
	// wildcard keys, which are expanded against each resource.
	metaWildcards bool
}

// Compile prepares a pattern. The pattern must not change afterwards.
func refCompile(p any) *refPattern {
	c := &refPattern{raw: p, plans: map[uintptr]*refPlan{}}
	c.prepare(p)
	return c
}

func (c *refPattern) prepare(v any) {
	switch t := v.(type) {
	case map[string]any:
		c.plans[refMapID(t)] = refPlanFor(t)
		for _, e := range t {
			c.prepare(e)
		}
	case []any:
		for _, e := range t {
			c.prepare(e)
		}
	}
}

// Validate matches resource against the prepared pattern.
func (c *refPattern) Validate(resource any) *Error {
	return refValidate(resource, c.raw, c.plans)
}

// Raw returns the pattern as given.
func (c *refPattern) Raw() any { return c.raw }

func refMapID(m map[string]any) uintptr { return uintptr(reflect.ValueOf(m).UnsafePointer()) }

// refPlanFor orders a pattern object's keys: anchors first (globals, then
// conditions, then the rest, each sorted), then plain keys, those whose
// values hold anchors first, so that conditions decide before an unrelated
// mismatch fails.
func refPlanFor(pat map[string]any) *refPlan {
	p := &refPlan{}
	for k := range pat {
		if a, _ := ParseAnchor(k); a != NoAnchor {
			p.anchored = append(p.anchored, k)
		} else {
			p.plain = append(p.plain, k)
		}
	}
	if _, meta := anchoredField(pat, "metadata"); meta != nil {
		for _, field := range []string{"labels", "annotations"} {
			if _, f := anchoredField(meta, field); f != nil && hasWildcardKey(f) {
				p.metaWildcards = true
			}
		}
	}
	if len(p.anchored) > 1 {
		slices.SortFunc(p.anchored, func(a, b string) int {
			ka, _ := ParseAnchor(a)
			kb, _ := ParseAnchor(b)
			if ra, rb := refAnchorRank(ka), refAnchorRank(kb); ra != rb {
				return ra - rb
			}
			return strings.Compare(a, b)
		})
	}
	if len(p.plain) > 1 {
		p.plain = refOrderPlain(p.plain, pat)
	}
	return p
}

var refWalkers = sync.Pool{New: func() any { return &refWalker{path: make([]string, 0, 16)} }}

// refWalker carries the current path as a stack of segments; the path is
// written out only when a mismatch is reported.
type refWalker struct {
	path  []string
	plans map[uintptr]*refPlan
}

func (w *refWalker) push(seg string) { w.path = append(w.path, seg) }
func (w *refWalker) pop()            { w.path = w.path[:len(w.path)-1] }

// at renders the current path as Kyverno does: /spec/containers/0/.
func (w *refWalker) at() string {
	n := 1
	for _, s := range w.path {
		n += len(s) + 1
	}
	var b strings.Builder
	b.Grow(n)
	b.WriteByte('/')
	for _, s := range w.path {
		b.WriteString(s)
		b.WriteByte('/')
	}
	return b.String()
}

func (w *refWalker) fail(kind ErrorKind, format string, args ...any) *Error {
	p := w.at()
	return &Error{Kind: kind, Path: p, Msg: fmt.Sprintf(format, append(args, p)...)}
}

// element dispatches on the pattern's type.
func (w *refWalker) element(res, pat any) *Error {
	switch p := pat.(type) {
	case map[string]any:
		r, ok := res.(map[string]any)
		if !ok {
			return w.fail(Mismatch, "pattern and resource have different structures: expected an object, found %s at path %s", refTypeName(res))
		}
		return w.mapElement(r, p)
	case []any:
		r, ok := res.([]any)
		if !ok {
			return w.fail(Mismatch, "validation rule failed at path %s, resource does not satisfy the expected overlay pattern")
		}
		return w.arrayElement(r, p)
	case string, float64, int64, int, bool, nil:
		if arr, ok := res.([]any); ok {
			for _, e := range arr {
				if !Value(e, pat) {
					return w.fail(Mismatch, "resource value '%v' does not match '%v' at path %s", refDisplay(res), refDisplay(pat))
				}
			}
			return nil
		}
		if !Value(res, pat) {
			return w.fail(Mismatch, "resource value '%v' does not match '%v' at path %s", refDisplay(res), refDisplay(pat))
		}
		return nil
	}
	return w.fail(Mismatch, "pattern contains an unknown type at path %s")
}

func refTypeName(v any) string {
	switch v.(type) {
	case nil:
		return "nil"
	case map[string]any:
		return "object"
	case []any:
		return "array"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	}
	return fmt.Sprintf("%T", v)
}

func refDisplay(v any) any {
	if v == nil {
		return "<nil>"
	}
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return int64(f)
	}
	return v
}

func (w *refWalker) mapElement(res, pat map[string]any) *Error {
	plan := w.plans[refMapID(pat)]
	if plan == nil {
		plan = refPlanFor(pat)
	}
	if plan.metaWildcards {
		// Only the metadata value changes: the plan's keys still hold.
		pat = ExpandMetadataWildcards(pat, res)
	}
	anchored, plain := plan.anchored, plan.plain
	for _, k := range anchored {
		if err := w.anchor(k, pat[k], res); err != nil {
			return err
		}
	}
	for _, k := range plain {
		pv := pat[k]
		rv, present := res[k]
		if s, ok := pv.(string); ok && s == "*" {
			if !present || rv == nil {
				p := w.at()
				return &Error{Path: p, Msg: fmt.Sprintf("%s%s not found", p, k)}
			}
			continue
		}
		w.push(k)
		err := w.element(rv, pv)
		w.pop()
		if err != nil {
			return err
		}
	}
	return nil
}

// refOrderPlain sorts keys, those whose values hold anchors first.
func refOrderPlain(plain []string, pat map[string]any) []string {
	var nbuf [16]bool
	nested := nbuf[:0]
	anyNested := false
	for _, k := range plain {
		h := HasAnchors(pat[k])
		anyNested = anyNested || h
		nested = append(nested, h)
	}
	if !anyNested {
		slices.Sort(plain)
		return plain
	}
	var first, rest []string
	for i, k := range plain {
		if nested[i] {
			first = append(first, k)
		} else {
			rest = append(rest, k)
		}
	}
	slices.Sort(first)
	slices.Sort(rest)
	return append(first, rest...)
}

func refAnchorRank(a AnchorKind) int {
	switch a {
	case Global:
		return 0
	case Condition:
		return 1
	default:
		return 2
	}
}

func (w *refWalker) anchor(key string, pv any, res map[string]any) *Error {
	kind, k := ParseAnchor(key)
	rv, present := res[k]
	w.push(k)
	defer w.pop()
	switch kind {
	case Condition:
		if !present {
			p := w.at()
			return &Error{Kind: ConditionFailed, Path: p, Msg: "conditional anchor mismatch: conditional anchor key doesn't exist in the resource"}
		}
		if err := w.element(rv, pv); err != nil {
			return &Error{Kind: ConditionFailed, Path: err.Path, Msg: "conditional anchor mismatch: " + err.Msg}
		}
	case Global:
		if present {
			if err := w.element(rv, pv); err != nil {
				return &Error{Kind: GlobalFailed, Path: err.Path, Msg: "global anchor mismatch: " + err.Msg}
			}
		}
	case Negation:
		if present {
			return w.fail(NegationFailed, "negation anchor matched in resource: %s is not allowed")
		}
	case Existence:
		if !present {
			return nil
		}
		list, ok := rv.([]any)
		if !ok {
			return w.fail(Mismatch, "invalid resource type %s: existence anchor ^() can only be used on a list at path %s", refTypeName(rv))
		}
		pats, ok := pv.([]any)
		if !ok {
			return w.fail(Mismatch, "invalid pattern: existence anchor ^() needs a list of objects at path %s")
		}
		for _, pp := range pats {
			pm, ok := pp.(map[string]any)
			if !ok {
				return w.fail(Mismatch, "invalid pattern: existence anchor ^() needs a list of objects at path %s")
			}
			found := false
			for i, e := range list {
				w.push(strconv.Itoa(i))
				err := w.element(e, pm)
				w.pop()
				if err == nil {
					found = true
					break
				}
			}
			if !found {
				return w.fail(Mismatch, "existence anchor validation failed at path %s")
			}
		}
	case Equality, AddIfAbsent:
		if present {
			return w.element(rv, pv)
		}
	}
	return nil
}

func (w *refWalker) arrayElement(res, pat []any) *Error {
	if len(pat) == 0 {
		return w.fail(Mismatch, "pattern array is empty at path %s")
	}
	switch p0 := pat[0].(type) {
	case map[string]any:
		applied := 0
		var skipped *Error
		for i, e := range res {
			w.push(strconv.Itoa(i))
			err := w.element(e, p0)
			w.pop()
			if err != nil {
				if err.Skip() {
					skipped = err
					continue
				}
				return err
			}
			applied++
		}
		if applied == 0 && skipped != nil {
			return &Error{Kind: skipped.Kind, Path: w.at(), Msg: skipped.Msg}
		}
		return nil
	case string, float64, int64, int, bool, nil:
		return w.element(res, p0)
	default:
		if len(res) < len(pat) {
			return w.fail(Mismatch, "validate array failed, array length mismatch, resource array len is %d and pattern array len is %d at path %s", len(res), len(pat))
		}
		applied := 0
		var skipped *Error
		for i, pe := range pat {
			w.push(strconv.Itoa(i))
			err := w.element(res[i], pe)
			w.pop()
			if err != nil {
				if err.Skip() {
					skipped = err
					continue
				}
				return err
			}
			applied++
		}
		if applied == 0 && skipped != nil {
			return &Error{Kind: skipped.Kind, Path: w.at(), Msg: skipped.Msg}
		}
		return nil
	}
}
