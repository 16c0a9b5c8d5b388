package engine

import (
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/jmespath"
)

// evalContext is the data JMESPath expressions see. It is copied cheaply
// for each rule and each foreach element: only the maps on the path of a
// change are copied, the documents themselves are shared and never
// modified.
type evalContext struct {
	jp   *jmespath.Interpreter
	data map[string]any
	// shared is true while data is still the parent's map: the first
	// change copies it.
	shared bool
	// m bounds the work of the call evaluating the rule; expressions
	// run under its context. The base context a Request keeps between
	// calls has none: each rule's clone gets its call's meter.
	m *meter
}

// clone returns a child context; it shares the parent's variables until
// it changes one.
func (c *evalContext) clone() *evalContext {
	return &evalContext{jp: c.jp, data: c.data, shared: true, m: c.m}
}

// own makes data private to this context before a change.
func (c *evalContext) own() {
	if !c.shared {
		return
	}
	data := make(map[string]any, len(c.data)+4)
	for k, v := range c.data {
		data[k] = v
	}
	c.data, c.shared = data, false
}

// put sets a top-level variable.
func (c *evalContext) put(name string, value any) {
	c.own()
	c.data[name] = value
}

// set stores value under a dotted name ("a.b.c"), copying the maps on the
// way so that clones sharing them are not affected.
func (c *evalContext) set(name string, value any) {
	c.setKeys(SplitVariableName(name), value)
}

func (c *evalContext) setKeys(keys []string, value any) {
	c.own()
	cur := c.data
	for i, k := range keys {
		if i == len(keys)-1 {
			cur[k] = value
			return
		}
		old, _ := cur[k].(map[string]any)
		next := make(map[string]any, len(old)+1)
		for ok, ov := range old {
			next[ok] = ov
		}
		cur[k] = next
		cur = next
	}
}

// SplitVariableName splits a dotted variable name, as values files and
// Request.Values write them, into keys; quoted segments
// (`metadata.annotations."example.com/x"`) keep their dots.
func SplitVariableName(name string) []string {
	if !strings.Contains(name, `"`) {
		return strings.Split(name, ".")
	}
	var keys []string
	var cur strings.Builder
	quoted := false
	for _, r := range name {
		switch {
		case r == '"':
			quoted = !quoted
		case r == '.' && !quoted:
			keys = append(keys, cur.String())
			cur.Reset()
		default:
			cur.WriteRune(r)
		}
	}
	return append(keys, cur.String())
}

func (c *evalContext) query(expr string) (any, error) {
	q, err := c.jp.Compile(expr)
	if err != nil {
		return nil, err
	}
	return c.m.search(q, c.data)
}
