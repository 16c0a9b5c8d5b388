package patch

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Operation is one RFC 6902 operation, as a MutatingPolicy's JSONPatch
// expression gives it: op, path, from (move and copy) and value (JSON
// values; HasValue tells a null value from none).
type Operation struct {
	Op, Path, From string
	Value          any
	HasValue       bool
}

// errTestFailed is a "test" operation that does not hold.
var errTestFailed = errors.New("test failed")

// ApplyOperations applies RFC 6902 operations to resource, in memory, as
// the JSON patch library the API server uses applies a
// MutatingAdmissionPolicy's JSONPatch (FuzzApplyOperations checks them
// against it): strictly (a missing parent, or removing what
// is not there, is an error wrapping ErrApply; "-" appends to a list; a
// negative index counts from its end), and a failed "test" leaves the
// resource as it was. resource is not changed; the result shares no
// memory with it or with the operations' values.
func ApplyOperations(resource map[string]any, ops []Operation) (Result, error) {
	for i, op := range ops {
		switch op.Op {
		case "add", "remove", "replace", "move", "copy", "test":
		default:
			return Result{}, fmt.Errorf("%w: operation %d: unknown operation %q", ErrInvalidPatch, i, op.Op)
		}
	}
	doc := deepCopy(resource)
	for i, op := range ops {
		var err error
		doc, err = applyOperation(doc, op)
		if errors.Is(err, errTestFailed) {
			return newResult(resource, deepCopy(resource).(map[string]any), "test operation failed"), nil
		}
		if err != nil {
			return Result{}, fmt.Errorf("%w: operation %d (%s %s): %w", ErrApply, i, op.Op, op.Path, err)
		}
	}
	out, ok := doc.(map[string]any)
	if !ok {
		return Result{}, fmt.Errorf("%w: the patched document is not an object", ErrApply)
	}
	return newResult(resource, out, ""), nil
}

func applyOperation(doc any, op Operation) (any, error) {
	path, err := parsePointer(op.Path)
	if err != nil {
		return nil, err
	}
	switch op.Op {
	case "add":
		if !op.HasValue {
			return nil, errors.New("add needs a value")
		}
		return addAt(doc, path, deepCopy(op.Value))
	case "remove":
		out, _, err := removeAt(doc, path)
		return out, err
	case "replace":
		if !op.HasValue {
			return nil, errors.New("replace needs a value")
		}
		if _, err := getAt(doc, path); err != nil {
			return nil, err
		}
		if len(path) == 0 {
			return deepCopy(op.Value), nil
		}
		out, _, err := removeAt(doc, path)
		if err != nil {
			return nil, err
		}
		return addAt(out, path, deepCopy(op.Value))
	case "move":
		from, err := parsePointer(op.From)
		if err != nil {
			return nil, fmt.Errorf("from: %w", err)
		}
		if isPrefix(from, path) && len(from) < len(path) {
			return nil, errors.New("a value cannot be moved into itself")
		}
		out, v, err := removeAt(doc, from)
		if err != nil {
			return nil, fmt.Errorf("from: %w", err)
		}
		return addAt(out, path, v)
	case "copy":
		from, err := parsePointer(op.From)
		if err != nil {
			return nil, fmt.Errorf("from: %w", err)
		}
		v, err := getAt(doc, from)
		if err != nil {
			return nil, fmt.Errorf("from: %w", err)
		}
		return addAt(doc, path, deepCopy(v))
	case "test":
		// A value that is not there in a parent that is does not hold
		// either; a missing parent is an error (as the library reads
		// them).
		if len(path) > 0 {
			if _, err := getAt(doc, path[:len(path)-1]); err != nil {
				return nil, err
			}
		}
		v, err := getAt(doc, path)
		if err != nil {
			return nil, errTestFailed
		}
		var want any
		if op.HasValue {
			want = op.Value
		}
		if !jsonEqual(v, want) {
			return nil, errTestFailed
		}
		return doc, nil
	}
	return nil, fmt.Errorf("unknown operation %q", op.Op)
}

// parsePointer splits a JSON pointer into its unescaped tokens.
func parsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("path %q does not start with /", p)
	}
	toks := strings.Split(p[1:], "/")
	for i, t := range toks {
		if strings.Contains(t, "~") {
			t = strings.ReplaceAll(strings.ReplaceAll(t, "~1", "/"), "~0", "~")
		}
		toks[i] = t
	}
	return toks, nil
}

func isPrefix(a, b []string) bool {
	if len(a) > len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// index reads a list index token as RFC6902's library does: a decimal,
// negative ones counting back from n; end is the largest index allowed.
func index(tok string, n int, end int) (int, error) {
	i, err := strconv.Atoi(tok)
	if err != nil {
		return 0, fmt.Errorf("invalid list index %q", tok)
	}
	if i < 0 {
		i += n
	}
	if i < 0 || i > end {
		return 0, fmt.Errorf("list index %s out of range (length %d)", tok, n)
	}
	return i, nil
}

func getAt(doc any, path []string) (any, error) {
	cur := doc
	for depth, tok := range path {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, fmt.Errorf("%s does not exist", pointerOf(path[:depth+1]))
			}
			cur = v
		case []any:
			i, err := index(tok, len(c), len(c)-1)
			if err != nil {
				return nil, err
			}
			cur = c[i]
		default:
			return nil, fmt.Errorf("%s does not exist", pointerOf(path[:depth+1]))
		}
	}
	return cur, nil
}

// addAt adds v at path in doc (which it may change) and returns the
// document.
func addAt(doc any, path []string, v any) (any, error) {
	if len(path) == 0 {
		return v, nil
	}
	parent, err := getAt(doc, path[:len(path)-1])
	if err != nil {
		return nil, err
	}
	last := path[len(path)-1]
	switch p := parent.(type) {
	case map[string]any:
		p[last] = v
		return doc, nil
	case []any:
		i := len(p)
		if last != "-" {
			// An insertion counts back from the end of the grown list.
			if i, err = index(last, len(p)+1, len(p)); err != nil {
				return nil, err
			}
		}
		grown := make([]any, 0, len(p)+1)
		grown = append(append(append(grown, p[:i]...), v), p[i:]...)
		return setAt(doc, path[:len(path)-1], grown)
	}
	return nil, fmt.Errorf("%s is not an object or a list", pointerOf(path[:len(path)-1]))
}

// removeAt removes the value at path from doc and returns the document
// and the value.
func removeAt(doc any, path []string) (any, any, error) {
	if len(path) == 0 {
		return nil, nil, errors.New("the whole document cannot be removed")
	}
	parent, err := getAt(doc, path[:len(path)-1])
	if err != nil {
		return nil, nil, err
	}
	last := path[len(path)-1]
	switch p := parent.(type) {
	case map[string]any:
		v, ok := p[last]
		if !ok {
			return nil, nil, fmt.Errorf("%s does not exist", pointerOf(path))
		}
		delete(p, last)
		return doc, v, nil
	case []any:
		i, err := index(last, len(p), len(p)-1)
		if err != nil {
			return nil, nil, err
		}
		v := p[i]
		shrunk := make([]any, 0, len(p)-1)
		shrunk = append(append(shrunk, p[:i]...), p[i+1:]...)
		out, err := setAt(doc, path[:len(path)-1], shrunk)
		return out, v, err
	}
	return nil, nil, fmt.Errorf("%s is not an object or a list", pointerOf(path[:len(path)-1]))
}

// setAt puts v at path (which exists) in doc and returns the document.
func setAt(doc any, path []string, v any) (any, error) {
	if len(path) == 0 {
		return v, nil
	}
	parent, err := getAt(doc, path[:len(path)-1])
	if err != nil {
		return nil, err
	}
	last := path[len(path)-1]
	switch p := parent.(type) {
	case map[string]any:
		p[last] = v
	case []any:
		i, err := index(last, len(p), len(p)-1)
		if err != nil {
			return nil, err
		}
		p[i] = v
	}
	return doc, nil
}

func pointerOf(path []string) string {
	var b strings.Builder
	for _, t := range path {
		b.WriteByte('/')
		b.WriteString(strings.ReplaceAll(strings.ReplaceAll(t, "~", "~0"), "/", "~1"))
	}
	return b.String()
}

// jsonEqual compares JSON values as JSON does: numbers by value.
func jsonEqual(a, b any) bool {
	if reflect.DeepEqual(a, b) {
		return true
	}
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	if errA != nil || errB != nil {
		return false
	}
	var va, vb any
	if json.Unmarshal(ja, &va) != nil || json.Unmarshal(jb, &vb) != nil {
		return false
	}
	return reflect.DeepEqual(va, vb)
}
