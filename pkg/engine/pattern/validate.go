package pattern

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
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
)

// Error is a pattern mismatch.
type Error struct {
	Kind ErrorKind
	// Path is where the resource failed, as /spec/containers/0/image/.
	Path string
	Msg  string
}

func (e *Error) Error() string { return e.Msg }

// Skip reports whether the mismatch means "does not apply".
func (e *Error) Skip() bool { return e.Kind == ConditionFailed || e.Kind == GlobalFailed }

// Validate matches resource against pattern from the root. It returns nil
// when the resource satisfies the pattern.
func Validate(resource, pattern any) *Error {
	_, err := element(resource, pattern, "/")
	if err == nil {
		return nil
	}
	return err
}

// element dispatches on the pattern's type. It returns the path of the
// failure and the error.
func element(res, pat any, path string) (string, *Error) {
	switch p := pat.(type) {
	case map[string]any:
		r, ok := res.(map[string]any)
		if !ok {
			return path, &Error{Path: path, Msg: fmt.Sprintf("pattern and resource have different structures. Path: %s. Expected %s, found %s", path, "object", typeName(res))}
		}
		return mapElement(r, p, path)
	case []any:
		r, ok := res.([]any)
		if !ok {
			return path, &Error{Path: path, Msg: fmt.Sprintf("validation rule failed at path %s, resource does not satisfy the expected overlay pattern", path)}
		}
		return arrayElement(r, p, path)
	case string, float64, int64, int, bool, nil:
		if arr, ok := res.([]any); ok {
			for _, e := range arr {
				if !Value(e, pat) {
					return path, &Error{Path: path, Msg: fmt.Sprintf("resource value '%v' does not match '%v' at path %s", display(res), display(pat), path)}
				}
			}
			return "", nil
		}
		if !Value(res, pat) {
			return path, &Error{Path: path, Msg: fmt.Sprintf("resource value '%v' does not match '%v' at path %s", display(res), display(pat), path)}
		}
		return "", nil
	}
	return path, &Error{Path: path, Msg: fmt.Sprintf("failed at '%s', pattern contains unknown type", path)}
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

func mapElement(res, pat map[string]any, path string) (string, *Error) {
	pat = expandMetadataWildcards(pat, res)
	var abuf, pbuf [16]string
	anchored, plain := abuf[:0], pbuf[:0]
	for k := range pat {
		if a, _ := ParseAnchor(k); a != NoAnchor {
			anchored = append(anchored, k)
		} else {
			plain = append(plain, k)
		}
	}
	// Anchors first, in a fixed order: globals, then conditions, then the
	// rest; conditions and globals decide whether the rest applies.
	slices.SortFunc(anchored, func(a, b string) int {
		ka, _ := ParseAnchor(a)
		kb, _ := ParseAnchor(b)
		if ra, rb := anchorRank(ka), anchorRank(kb); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})
	for _, k := range anchored {
		if p, err := handleAnchor(k, pat[k], res, path); err != nil {
			return p, err
		}
	}
	// Keys whose values hold anchors go before the others, so that a
	// condition below decides before an unrelated mismatch fails.
	if len(plain) > 1 {
		var nbuf [16]bool
		nested := nbuf[:0]
		anyNested := false
		for _, k := range plain {
			h := HasAnchors(pat[k])
			anyNested = anyNested || h
			nested = append(nested, h)
		}
		if anyNested {
			// Stable partition: keys holding anchors first, each part
			// sorted.
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
			plain = append(first, rest...)
		} else {
			slices.Sort(plain)
		}
	}
	for _, k := range plain {
		pv := pat[k]
		rv, present := res[k]
		if s, ok := pv.(string); ok && s == "*" {
			if !present || rv == nil {
				return path, &Error{Path: path, Msg: fmt.Sprintf("%s/%s not found", strings.TrimSuffix(path, "/"), k)}
			}
			continue
		}
		if p, err := element(rv, pv, path+k+"/"); err != nil {
			return p, err
		}
	}
	return "", nil
}

func anchorRank(a AnchorKind) int {
	switch a {
	case Global:
		return 0
	case Condition:
		return 1
	default:
		return 2
	}
}

func handleAnchor(key string, pv any, res map[string]any, path string) (string, *Error) {
	kind, k := ParseAnchor(key)
	cur := path + k + "/"
	rv, present := res[k]
	switch kind {
	case Condition:
		if !present {
			return cur, &Error{Kind: ConditionFailed, Path: cur, Msg: "conditional anchor mismatch: conditional anchor key doesn't exist in the resource"}
		}
		if p, err := element(rv, pv, cur); err != nil {
			return p, &Error{Kind: ConditionFailed, Path: p, Msg: "conditional anchor mismatch: " + err.Msg}
		}
	case Global:
		if present {
			if p, err := element(rv, pv, cur); err != nil {
				return p, &Error{Kind: GlobalFailed, Path: p, Msg: "global anchor mismatch: " + err.Msg}
			}
		}
	case Negation:
		if present {
			return cur, &Error{Kind: NegationFailed, Path: cur, Msg: fmt.Sprintf("negation anchor matched in resource: %s is not allowed", cur)}
		}
	case Existence:
		if !present {
			return "", nil
		}
		list, ok := rv.([]any)
		if !ok {
			return cur, &Error{Path: cur, Msg: fmt.Sprintf("invalid resource type %s: existence anchor ^() can only be used on a list", typeName(rv))}
		}
		pats, ok := pv.([]any)
		if !ok {
			return cur, &Error{Path: cur, Msg: "invalid pattern: existence anchor ^() needs a list of objects"}
		}
		for _, pp := range pats {
			pm, ok := pp.(map[string]any)
			if !ok {
				return cur, &Error{Path: cur, Msg: "invalid pattern: existence anchor ^() needs a list of objects"}
			}
			found := false
			for i, e := range list {
				if _, err := element(e, pm, cur+strconv.Itoa(i)+"/"); err == nil {
					found = true
					break
				}
			}
			if !found {
				return cur, &Error{Path: cur, Msg: fmt.Sprintf("existence anchor validation failed at path %s", cur)}
			}
		}
	case Equality, AddIfAbsent:
		if present {
			if p, err := element(rv, pv, cur); err != nil {
				return p, err
			}
		}
	}
	return "", nil
}

func arrayElement(res, pat []any, path string) (string, *Error) {
	if len(pat) == 0 {
		return path, &Error{Path: path, Msg: "pattern array is empty"}
	}
	switch p0 := pat[0].(type) {
	case map[string]any:
		applied := 0
		var skipped *Error
		for i, e := range res {
			p, err := element(e, p0, path+strconv.Itoa(i)+"/")
			if err != nil {
				if err.Skip() {
					skipped = err
					continue
				}
				return p, err
			}
			applied++
		}
		if applied == 0 && skipped != nil {
			return path, &Error{Kind: skipped.Kind, Path: path, Msg: skipped.Msg}
		}
		return "", nil
	case string, float64, int64, int, bool, nil:
		return element(res, p0, path)
	default:
		if len(res) < len(pat) {
			return path, &Error{Path: path, Msg: fmt.Sprintf("validate array failed, array length mismatch, resource array len is %d and pattern array len is %d", len(res), len(pat))}
		}
		applied := 0
		var skipped *Error
		for i, pe := range pat {
			p, err := element(res[i], pe, path+strconv.Itoa(i)+"/")
			if err != nil {
				if err.Skip() {
					skipped = err
					continue
				}
				return p, err
			}
			applied++
		}
		if applied == 0 && skipped != nil {
			return path, &Error{Kind: skipped.Kind, Path: path, Msg: skipped.Msg}
		}
		return "", nil
	}
}

// expandMetadataWildcards replaces wildcard keys of metadata.labels and
// metadata.annotations in a pattern (anchored or not) by the resource keys
// they match.
func expandMetadataWildcards(pat, res map[string]any) map[string]any {
	metaKey, pm := anchoredField(pat, "metadata")
	if pm == nil {
		return pat
	}
	rm, _ := res["metadata"].(map[string]any)
	var newMeta map[string]any
	for _, field := range []string{"labels", "annotations"} {
		fieldKey, pf := anchoredField(pm, field)
		if pf == nil || !hasWildcardKey(pf) {
			continue
		}
		rf, _ := rm[field].(map[string]any)
		expanded := make(map[string]any, len(pf))
		for k, v := range pf {
			kind, plainKey := ParseAnchor(k)
			if !wildcard.Contains(plainKey) {
				expanded[k] = v
				continue
			}
			matched := false
			for rk := range rf {
				if wildcard.Match(plainKey, rk) {
					expanded[rebuildAnchor(kind, rk)] = v
					matched = true
				}
			}
			if !matched {
				expanded[k] = v
			}
		}
		if newMeta == nil {
			newMeta = make(map[string]any, len(pm))
			for mk, mv := range pm {
				newMeta[mk] = mv
			}
		}
		newMeta[fieldKey] = expanded
	}
	if newMeta == nil {
		return pat
	}
	out := make(map[string]any, len(pat))
	for k, v := range pat {
		out[k] = v
	}
	out[metaKey] = newMeta
	return out
}

// anchoredField finds the object under name, whatever its anchor.
func anchoredField(m map[string]any, name string) (string, map[string]any) {
	if v, ok := m[name].(map[string]any); ok {
		return name, v
	}
	for k, v := range m {
		if StripAnchor(k) == name {
			if vm, ok := v.(map[string]any); ok {
				return k, vm
			}
		}
	}
	return "", nil
}

func hasWildcardKey(m map[string]any) bool {
	for k := range m {
		if wildcard.Contains(StripAnchor(k)) {
			return true
		}
	}
	return false
}

func rebuildAnchor(kind AnchorKind, key string) string {
	switch kind {
	case Condition:
		return "(" + key + ")"
	case Equality:
		return "=(" + key + ")"
	case AddIfAbsent:
		return "+(" + key + ")"
	case Global:
		return "<(" + key + ")"
	case Negation:
		return "X(" + key + ")"
	case Existence:
		return "^(" + key + ")"
	}
	return key
}
