package pattern

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
)

// ErrorKind classifies a pattern mismatch.
type ErrorKind int

// Mismatch kinds. A failed conditional or global anchor means the pattern
// does not apply (the rule is skipped); any other mismatch fails it.
const (
	Mismatch ErrorKind = iota
	ConditionFailed
	GlobalFailed
	NegationFailed
	// Stopped is a validation its Meter stopped: the error wraps the
	// meter's reason. It says nothing of the resource: never a pass, never
	// a skip.
	Stopped
)

// Error is a pattern mismatch.
type Error struct {
	Kind ErrorKind
	// Path is where the resource failed, as /spec/containers/0/image/.
	Path string
	Msg  string
	// Err is the meter's reason of a Stopped validation.
	Err error
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the meter's reason of a Stopped validation.
func (e *Error) Unwrap() error { return e.Err }

// Meter is charged with the work of a validation as it goes, so that a
// pattern and a resource that would take long to compare (a long wildcard
// against a long value, a pattern applied to each element of a long list)
// take only what their caller allows. The work is counted in units of
// about one byte compared: each value compared counts its bytes and those
// of its pattern (wildcard.Cost), each element visited elementWork.
type Meter interface {
	// ChargeWork counts n units of work and returns why the validation
	// must stop, if it must.
	ChargeWork(n int64) error
}

const (
	// elementWork is the work of visiting one element of the resource.
	elementWork = 16
	// flushWork is how much work a walker counts before it charges its
	// meter: a few microseconds.
	flushWork = 4096
)

// Skip reports whether the mismatch means "does not apply".
func (e *Error) Skip() bool { return e.Kind == ConditionFailed || e.Kind == GlobalFailed }

// Validate matches resource against pattern from the root. It returns nil
// when the resource satisfies the pattern. A pattern validated more than
// once should be compiled once with Compile.
func Validate(resource, pattern any) *Error {
	return compileNode(pattern).validate(resource, nil)
}

// ValidateMetered is Validate charging m with its work: once m refuses,
// it returns an Error of kind Stopped.
func ValidateMetered(resource, pattern any, m Meter) *Error {
	return compileNode(pattern).validate(resource, m)
}

// Pattern is a pattern compiled once for many validations: a tree whose
// objects hold their keys already parsed and in the order the walk visits
// them.
type Pattern struct {
	raw  any
	root *node
}

// Compile prepares a pattern. The pattern must not change afterwards.
func Compile(p any) *Pattern {
	return &Pattern{raw: p, root: compileNode(p)}
}

// Validate matches resource against the compiled pattern.
func (c *Pattern) Validate(resource any) *Error {
	return c.root.validate(resource, nil)
}

// ValidateMetered is Validate charging m with its work: once m refuses,
// it returns an Error of kind Stopped.
func (c *Pattern) ValidateMetered(resource any, m Meter) *Error {
	return c.root.validate(resource, m)
}

// Raw returns the pattern as given.
func (c *Pattern) Raw() any { return c.raw }

func (n *node) validate(resource any, m Meter) *Error {
	w := walkers.Get().(*walker)
	w.m = m
	err := w.element(resource, n)
	if err == nil && w.flush() {
		err = w.stopped()
	}
	w.path = w.path[:0]
	w.m, w.pending, w.stop = nil, 0, nil
	walkers.Put(w)
	return err
}

var walkers = sync.Pool{New: func() any { return &walker{path: make([]string, 0, 16)} }}

// walker carries the current path as a stack of segments; the path is
// written out only when a mismatch is reported.
type walker struct {
	path []string
	// m, when set, is charged with the work of the walk, flushWork units
	// at a time; pending is what it has not been charged yet, stop why it
	// refused.
	m       Meter
	pending int64
	stop    error
}

// work counts n units of work and reports whether the walk must stop.
func (w *walker) work(n int64) bool {
	if w.m == nil {
		return false
	}
	if w.stop != nil {
		return true
	}
	w.pending += n
	if w.pending < flushWork {
		return false
	}
	return w.flush()
}

// flush charges the meter with the pending work and reports whether the
// walk must stop.
func (w *walker) flush() bool {
	if w.m == nil || w.stop != nil {
		return w.stop != nil
	}
	n := w.pending
	w.pending = 0
	if err := w.m.ChargeWork(n); err != nil {
		w.stop = err
		return true
	}
	return false
}

// stopped is the error of a walk its meter stopped.
func (w *walker) stopped() *Error {
	return &Error{Kind: Stopped, Path: w.at(), Msg: w.stop.Error(), Err: w.stop}
}

// value checks a resource value against a scalar pattern value, charged
// with its cost first.
func (w *walker) value(res, pat any) (ok bool, stop *Error) {
	if w.work(ValueCost(res, pat)) {
		return false, w.stopped()
	}
	return Value(res, pat), nil
}

func (w *walker) push(seg string) { w.path = append(w.path, seg) }
func (w *walker) pop()            { w.path = w.path[:len(w.path)-1] }

// at renders the current path as Kyverno does: /spec/containers/0/.
func (w *walker) at() string {
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

func (w *walker) fail(kind ErrorKind, format string, args ...any) *Error {
	p := w.at()
	return &Error{Kind: kind, Path: p, Msg: fmt.Sprintf(format, append(args, p)...)}
}

// element dispatches on the pattern's kind.
func (w *walker) element(res any, pat *node) *Error {
	if w.work(elementWork) {
		return w.stopped()
	}
	switch pat.kind {
	case objectNode:
		r, ok := res.(map[string]any)
		if !ok {
			return w.fail(Mismatch, "pattern and resource have different structures: expected an object, found %s at path %s", typeName(res))
		}
		return w.mapElement(r, pat)
	case arrayNode:
		r, ok := res.([]any)
		if !ok {
			return w.fail(Mismatch, "validation rule failed at path %s, resource does not satisfy the expected overlay pattern")
		}
		return w.arrayElement(r, pat)
	case scalarNode:
		if arr, ok := res.([]any); ok {
			for _, e := range arr {
				ok, stop := w.value(e, pat.raw)
				if stop != nil {
					return stop
				}
				if !ok {
					return w.fail(Mismatch, "resource value '%v' does not match '%v' at path %s", display(res), display(pat.raw))
				}
			}
			return nil
		}
		ok, stop := w.value(res, pat.raw)
		if stop != nil {
			return stop
		}
		if !ok {
			return w.fail(Mismatch, "resource value '%v' does not match '%v' at path %s", display(res), display(pat.raw))
		}
		return nil
	}
	return w.fail(Mismatch, "pattern contains an unknown type at path %s")
}

func typeName(v any) string {
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

func display(v any) any {
	if v == nil {
		return "<nil>"
	}
	if f, ok := v.(float64); ok && f == float64(int64(f)) {
		return int64(f)
	}
	return v
}

// mapElement checks the keys of an object pattern in their compiled order.
func (w *walker) mapElement(res map[string]any, pat *node) *Error {
	if pat.meta != nil {
		if w.work(pat.expandCost(res)) {
			return w.stopped()
		}
		pat = pat.expandMeta(res)
	}
	for i := range pat.fields {
		f := &pat.fields[i]
		if f.anchor != NoAnchor {
			if err := w.anchor(f, res); err != nil {
				return err
			}
			continue
		}
		rv, present := res[f.name]
		if f.star {
			if !present || rv == nil {
				p := w.at()
				return &Error{Path: p, Msg: fmt.Sprintf("%s%s not found", p, f.name)}
			}
			continue
		}
		w.push(f.name)
		err := w.element(rv, f.value)
		w.pop()
		if err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) anchor(f *field, res map[string]any) *Error {
	pv := f.value
	rv, present := res[f.name]
	w.push(f.name)
	defer w.pop()
	switch f.anchor {
	case Condition:
		if !present {
			p := w.at()
			return &Error{Kind: ConditionFailed, Path: p, Msg: "conditional anchor mismatch: conditional anchor key doesn't exist in the resource"}
		}
		if err := w.element(rv, pv); err != nil {
			if err.Kind == Stopped {
				return err
			}
			return &Error{Kind: ConditionFailed, Path: err.Path, Msg: "conditional anchor mismatch: " + err.Msg}
		}
	case Global:
		if present {
			if err := w.element(rv, pv); err != nil {
				if err.Kind == Stopped {
					return err
				}
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
			return w.fail(Mismatch, "invalid resource type %s: existence anchor ^() can only be used on a list at path %s", typeName(rv))
		}
		if pv.kind != arrayNode {
			return w.fail(Mismatch, "invalid pattern: existence anchor ^() needs a list of objects at path %s")
		}
		for _, pm := range pv.items {
			if pm.kind != objectNode {
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
				if err.Kind == Stopped {
					return err
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

func (w *walker) arrayElement(res []any, pat *node) *Error {
	if len(pat.items) == 0 {
		return w.fail(Mismatch, "pattern array is empty at path %s")
	}
	switch p0 := pat.items[0]; p0.kind {
	case objectNode:
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
	case scalarNode:
		return w.element(res, p0)
	default:
		if len(res) < len(pat.items) {
			return w.fail(Mismatch, "validate array failed, array length mismatch, resource array len is %d and pattern array len is %d at path %s", len(res), len(pat.items))
		}
		applied := 0
		var skipped *Error
		for i, pe := range pat.items {
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
