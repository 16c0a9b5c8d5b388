package engine

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/verdict-dev/verdict/pkg/engine/jmespath"
	"github.com/verdict-dev/verdict/pkg/engine/pattern"
)

// substitution modes: how an expression that fails or finds nothing is
// treated.
type substMode int

const (
	// substStrict: an expression error is an error.
	substStrict substMode = iota
	// substLenient: an expression error counts as an empty string. It is
	// only for text that cannot change a result (a condition's message).
	// Conditions themselves are strict, as in Kyverno since 1.8: a
	// failing variable makes the rule an error, not an empty string.
	substLenient
)

// hasVariables reports whether v contains a `{{` anywhere (keys included).
func hasVariables(v any) bool {
	switch t := v.(type) {
	case string:
		return strings.Contains(t, "{{")
	case map[string]any:
		for k, e := range t {
			if strings.Contains(k, "{{") || hasVariables(e) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if hasVariables(e) {
				return true
			}
		}
	}
	return false
}

// substitute replaces every `{{ expr }}` in v (keys and values, at any
// depth) with its value. A string that is only one variable becomes the
// value itself; a variable inside text is written as text (JSON for
// non-strings). `\{{` escapes a literal `{{`. v is not modified. What it
// builds, the lists and maps holding variables and each text before it
// is written, is charged to the rule's memory budget (c's meter): a
// value of many copies of a large field stops the rule there.
func (e *Engine) substitute(c *evalContext, v any, mode substMode, op string) (any, error) {
	return e.substituteAt(c, v, mode, op, "")
}

func (e *Engine) substituteAt(c *evalContext, v any, mode substMode, op, path string) (any, error) {
	switch t := v.(type) {
	case string:
		if !strings.Contains(t, "{{") {
			// v, not t: boxing t again would allocate.
			return v, nil
		}
		return e.substituteString(c, t, mode, op, path)
	case map[string]any:
		if !hasVariables(t) {
			return v, nil
		}
		if err := c.m.chargeMemory("substitution", int64(len(t))*jmespath.EntryBytes); err != nil {
			return nil, err
		}
		out := make(map[string]any, len(t))
		for k, val := range t {
			nk := k
			if strings.Contains(k, "{{") {
				r, err := e.substituteString(c, k, mode, op, path)
				if err != nil {
					return nil, err
				}
				nk = toText(r)
			}
			nv, err := e.substituteAt(c, val, mode, op, path+"/"+k)
			if err != nil {
				return nil, err
			}
			out[nk] = nv
		}
		return out, nil
	case []any:
		if !hasVariables(t) {
			return v, nil
		}
		if err := c.m.chargeMemory("substitution", int64(len(t))*jmespath.SlotBytes); err != nil {
			return nil, err
		}
		out := make([]any, len(t))
		for i, val := range t {
			nv, err := e.substituteAt(c, val, mode, op, fmt.Sprintf("%s/%d", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = nv
		}
		return out, nil
	default:
		return v, nil
	}
}

// toText renders a substituted value inside text.
func toText(v any) string {
	switch t := v.(type) {
	case string:
		return t
	case nil:
		return "null"
	default:
		b, err := json.Marshal(t)
		if err != nil {
			return fmt.Sprint(t)
		}
		return string(b)
	}
}

// substituteString resolves variables from the innermost out, so
// `{{ a.{{ b }} }}` works.
func (e *Engine) substituteString(c *evalContext, s string, mode substMode, op, path string) (any, error) {
	if op != OpDelete {
		if t := e.templates.get(e, s); t != nil {
			v, err := t.eval(c, mode, path)
			if err != nil {
				return nil, err
			}
			str, isString := v.(string)
			if t.whole || !isString || !strings.Contains(str, "{{") {
				return v, nil
			}
			// A value brought in new variables: resolve them as the
			// general path does.
			s = str
		}
	}
	for {
		start, end, ok := innermostVariable(s)
		if !ok {
			break
		}
		expr := strings.TrimSpace(s[start+2 : end])
		if expr == "@" && path != "" {
			expr = "request.object" + atPath(path)
		}
		if op == OpDelete {
			expr = strings.ReplaceAll(expr, "request.object", "request.oldObject")
		}
		val, err := c.query(expr)
		if err == nil && val == nil && missingPath(expr, c.data) {
			err = fmt.Errorf("%w in %s", ErrUnknownKey, expr)
		}
		if err != nil {
			if mode == substLenient {
				val = ""
			} else {
				return nil, fmt.Errorf("failed to resolve %s at path %s: %w", expr, orRoot(path), err)
			}
		}
		if start == 0 && end+2 == len(s) {
			return val, nil
		}
		text := toText(val)
		if err := c.m.chargeMemory("substitution", int64(len(s)-(end+2-start)+len(text))); err != nil {
			return nil, err
		}
		s = s[:start] + text + s[end+2:]
	}
	return strings.ReplaceAll(s, `\{{`, "{{"), nil
}

func orRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// innermostVariable finds the first `{{ … }}` that holds no other `{{`,
// skipping escaped `\{{`.
func innermostVariable(s string) (start, end int, ok bool) {
	start = -1
	for i := 0; i+1 < len(s); i++ {
		if s[i] == '{' && s[i+1] == '{' {
			if i > 0 && s[i-1] == '\\' {
				i++
				continue
			}
			start = i
			i++
			continue
		}
		if s[i] == '}' && s[i+1] == '}' && start >= 0 {
			return start, i, true
		}
	}
	return 0, 0, false
}

// atPath turns a pattern path (/spec/containers/0/name, anchors included)
// into a JMESPath suffix for `{{@}}`.
func atPath(p string) string {
	var b strings.Builder
	for _, seg := range strings.Split(strings.Trim(p, "/"), "/") {
		if seg == "" {
			continue
		}
		seg = stripAnchor(seg)
		if isIndex(seg) {
			b.WriteString("[" + seg + "]")
			continue
		}
		b.WriteString(`."` + strings.ReplaceAll(seg, `"`, `\"`) + `"`)
	}
	return b.String()
}

func isIndex(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

func stripAnchor(s string) string { return pattern.StripAnchor(s) }

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// template is a policy string with variables, parsed once: literal text
// and compiled expressions. Only flat templates are kept (no nested
// variables, no escapes, no {{@}}); the others take the general path.
type template struct {
	parts []templatePart
	// whole is true when the string is one variable and nothing else: its
	// value keeps its type.
	whole bool
}

type templatePart struct {
	lit  string
	expr string
	q    jmespath.Query
}

func (t *template) eval(c *evalContext, mode substMode, path string) (any, error) {
	if t.whole {
		return t.query(c, &t.parts[0], mode, path)
	}
	// The parts' texts first, each charged as it comes (a string value's
	// is the value itself), then the whole text in one allocation of its
	// size.
	var buf [8]string
	texts, n := buf[:0], 0
	for i := range t.parts {
		p := &t.parts[i]
		text := p.lit
		if p.q != nil {
			v, err := t.query(c, p, mode, path)
			if err != nil {
				return nil, err
			}
			text = toText(v)
			if err := c.m.chargeMemory("substitution", int64(len(text))); err != nil {
				return nil, err
			}
		}
		texts = append(texts, text)
		n += len(text)
	}
	var b strings.Builder
	b.Grow(n)
	for _, text := range texts {
		b.WriteString(text)
	}
	return b.String(), nil
}

func (t *template) query(c *evalContext, p *templatePart, mode substMode, path string) (any, error) {
	v, err := c.m.search(p.q, c.data)
	if err == nil && v == nil && missingPath(p.expr, c.data) {
		err = fmt.Errorf("%w in %s", ErrUnknownKey, p.expr)
	}
	if err != nil {
		if mode == substLenient {
			return "", nil
		}
		return nil, fmt.Errorf("failed to resolve %s at path %s: %w", p.expr, orRoot(path), err)
	}
	return v, nil
}

// templateCache holds parsed templates by their text. Policy text is
// bounded, but the cache stops growing at maxTemplates all the same.
type templateCache struct {
	m sync.Map // string -> *template (nil entry: not cacheable)
	n atomic.Int64
}

const maxTemplates = 1 << 16

var notCacheable = &template{}

func (tc *templateCache) get(e *Engine, s string) *template {
	if v, ok := tc.m.Load(s); ok {
		t := v.(*template)
		if t == notCacheable {
			return nil
		}
		return t
	}
	// A clone, before the parse whose template refers to it: s may be a
	// slice of a request's body, which the cache must not keep alive.
	s = strings.Clone(s)
	t := parseTemplate(e, s)
	if tc.n.Load() < maxTemplates {
		tc.n.Add(1)
		if t == nil {
			tc.m.Store(s, notCacheable)
		} else {
			tc.m.Store(s, t)
		}
	}
	return t
}

// parseTemplate splits s into text and expressions, or returns nil when
// s needs the general path.
func parseTemplate(e *Engine, s string) *template {
	if strings.Contains(s, `\{{`) {
		return nil
	}
	t := &template{}
	rest := s
	for {
		start := strings.Index(rest, "{{")
		if start < 0 {
			if rest != "" {
				t.parts = append(t.parts, templatePart{lit: rest})
			}
			break
		}
		end := strings.Index(rest[start+2:], "}}")
		if end < 0 {
			return nil
		}
		end += start + 2
		inner := rest[start+2 : end]
		if strings.Contains(inner, "{{") {
			return nil
		}
		expr := strings.TrimSpace(inner)
		if expr == "@" || expr == "" {
			return nil
		}
		q, err := e.jp.Compile(expr)
		if err != nil {
			return nil
		}
		if start > 0 {
			t.parts = append(t.parts, templatePart{lit: rest[:start]})
		}
		t.parts = append(t.parts, templatePart{expr: expr, q: q})
		rest = rest[end+2:]
	}
	t.whole = len(t.parts) == 1 && t.parts[0].q != nil
	return t
}
