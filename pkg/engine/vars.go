package engine

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/pattern"
)

// substitution modes: how an expression that fails or finds nothing is
// treated.
type substMode int

const (
	// substStrict: an expression error is an error.
	substStrict substMode = iota
	// substLenient: an expression error counts as an empty string, as
	// Kyverno does in preconditions and conditions.
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
// non-strings). `\{{` escapes a literal `{{`. v is not modified.
func (e *Engine) substitute(c *evalContext, v any, mode substMode, op string) (any, error) {
	return e.substituteAt(c, v, mode, op, "")
}

func (e *Engine) substituteAt(c *evalContext, v any, mode substMode, op, path string) (any, error) {
	switch t := v.(type) {
	case string:
		if !strings.Contains(t, "{{") {
			return t, nil
		}
		return e.substituteString(c, t, mode, op, path)
	case map[string]any:
		if !hasVariables(t) {
			return t, nil
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
			return t, nil
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
		s = s[:start] + toText(val) + s[end+2:]
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
