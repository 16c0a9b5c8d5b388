package jmespath

import (
	"github.com/jmespath-community/go-jmespath/pkg/parsing"
	"github.com/jmespath-community/go-jmespath/pkg/util"
)

// Direct evaluation. Most expressions in policies are field chains,
// flattens and projections of them, lists of them and `||` defaults:
// `request.operation || 'BACKGROUND'`,
// `request.object.spec.[initContainers, containers][].ports[].hostPort`,
// `element.securityContext.capabilities.add[] || `[]“. For those,
// compileDirect builds a tree of Go closures at compile time that
// computes what the library's tree interpreter computes, without the
// interpreter's per-search set-up and boxing.
//
// A direct evaluator gives exactly the interpreter's result or none: where
// the interpreter would look at a value through reflection (a Go struct,
// pointer or typed slice passed as data instead of the JSON types
// map[string]any, []any, string, float64, bool and nil), it reports
// false and the search runs the interpreter. None of the node kinds it
// handles can fail or call a function, so it has no error and no steps to
// count; only queries that are not metered get one.

// directEval evaluates a compiled expression against value. ok is false
// when the interpreter must evaluate the expression instead.
type directEval func(value any) (result any, ok bool)

// compileDirect returns a direct evaluator for node, or nil when node
// holds a kind of node it does not handle.
func compileDirect(node parsing.ASTNode) directEval {
	switch node.NodeType {
	case parsing.ASTField:
		key, _ := node.Value.(string)
		return func(value any) (any, bool) {
			if m, isMap := value.(map[string]any); isMap {
				// A key holding null gives null, as a missing one does.
				return m[key], true
			}
			return nil, isPlain(value)
		}
	case parsing.ASTIdentity, parsing.ASTCurrentNode:
		return func(value any) (any, bool) { return value, true }
	case parsing.ASTLiteral:
		lit := node.Value
		return func(any) (any, bool) { return lit, true }
	case parsing.ASTIndex:
		index, _ := node.Value.(int)
		return func(value any) (any, bool) {
			list, isList := value.([]any)
			if !isList {
				return nil, isPlain(value)
			}
			i := index
			if i < 0 {
				i += len(list)
			}
			if i < 0 || i >= len(list) {
				return nil, true
			}
			return list[i], true
		}
	case parsing.ASTSubexpression, parsing.ASTIndexExpression:
		left, right := compileDirect(node.Children[0]), compileDirect(node.Children[1])
		if left == nil || right == nil {
			return nil
		}
		return func(value any) (any, bool) {
			v, ok := left(value)
			if !ok || v == nil {
				return nil, ok
			}
			return right(v)
		}
	case parsing.ASTPipe:
		steps := make([]directEval, len(node.Children))
		for i, child := range node.Children {
			if steps[i] = compileDirect(child); steps[i] == nil {
				return nil
			}
		}
		return func(value any) (any, bool) {
			for _, step := range steps {
				var ok bool
				if value, ok = step(value); !ok {
					return nil, false
				}
			}
			return value, true
		}
	case parsing.ASTOrExpression, parsing.ASTAndExpression:
		left, right := compileDirect(node.Children[0]), compileDirect(node.Children[1])
		if left == nil || right == nil {
			return nil
		}
		// `a || b` is b when a is false, `a && b` is a when a is false.
		or := node.NodeType == parsing.ASTOrExpression
		return func(value any) (any, bool) {
			v, ok := left(value)
			if !ok {
				return nil, false
			}
			falsy, ok := isFalse(v)
			if !ok {
				return nil, false
			}
			if falsy != or {
				return v, true
			}
			return right(value)
		}
	case parsing.ASTNotExpression:
		operand := compileDirect(node.Children[0])
		if operand == nil {
			return nil
		}
		return func(value any) (any, bool) {
			v, ok := operand(value)
			if !ok {
				return nil, false
			}
			falsy, ok := isFalse(v)
			return falsy, ok
		}
	case parsing.ASTMultiSelectList, parsing.ASTFlatten, parsing.ASTProjection:
		list := compileList(node)
		if list == nil {
			return nil
		}
		return func(value any) (any, bool) {
			l, ok := list(value)
			if !ok || l == nil {
				return nil, ok
			}
			return l, true
		}
	}
	return nil
}

// directList evaluates a node whose value is a list or null: a list
// (never nil, empty or not) or nil for null. It saves boxing the lists a
// flatten or a projection iterates. ok is false when the interpreter must
// evaluate the expression instead.
type directList func(value any) (list []any, ok bool)

// emptyList is the value of a null list held in a Go value: the
// interpreter iterates it as an empty list. It is never modified.
var emptyList = []any{}

// compileList returns a list evaluator for a multi-select list, a flatten
// or a projection, or nil for other nodes and for nodes compileDirect
// does not handle.
func compileList(node parsing.ASTNode) directList {
	switch node.NodeType {
	case parsing.ASTMultiSelectList:
		items := make([]directEval, len(node.Children))
		for i, child := range node.Children {
			if items[i] = compileDirect(child); items[i] == nil {
				return nil
			}
		}
		return func(value any) ([]any, bool) {
			out := make([]any, len(items))
			for i, item := range items {
				v, ok := item(value)
				if !ok {
					return nil, false
				}
				out[i] = v
			}
			return out, true
		}
	case parsing.ASTFlatten:
		inner := compileIterated(node.Children[0])
		if inner == nil {
			return nil
		}
		return func(value any) ([]any, bool) {
			list, ok := inner(value)
			if !ok || list == nil {
				return nil, ok
			}
			n := 0
			for _, el := range list {
				if sub, isList := el.([]any); isList {
					n += len(sub)
					continue
				}
				if !isPlain(el) {
					return nil, false
				}
				n++
			}
			out := make([]any, 0, n)
			for _, el := range list {
				if sub, isList := el.([]any); isList {
					out = append(out, sub...)
				} else {
					out = append(out, el)
				}
			}
			return out, true
		}
	case parsing.ASTProjection:
		// A projection over a slice ([1:3]) may keep a string: not handled.
		if first := node.Children[0]; first.NodeType == parsing.ASTIndexExpression &&
			len(first.Children) > 1 && first.Children[1].NodeType == parsing.ASTSlice {
			return nil
		}
		left, right := compileIterated(node.Children[0]), compileDirect(node.Children[1])
		if left == nil || right == nil {
			return nil
		}
		identity := node.Children[1].NodeType == parsing.ASTIdentity
		return func(value any) ([]any, bool) {
			list, ok := left(value)
			if !ok || list == nil {
				return nil, ok
			}
			out := make([]any, 0, len(list))
			for _, el := range list {
				cur := el
				if !identity {
					if cur, ok = right(el); !ok {
						return nil, false
					}
				}
				if cur != nil {
					out = append(out, cur)
				}
			}
			return out, true
		}
	}
	return nil
}

// compileIterated returns a list evaluator for the node a flatten or a
// projection iterates: its value when it is a list, nil when it is any
// other plain value (the flatten or projection is then null).
func compileIterated(node parsing.ASTNode) directList {
	if list := compileList(node); list != nil {
		return list
	}
	eval := compileDirect(node)
	if eval == nil {
		return nil
	}
	return func(value any) ([]any, bool) {
		v, ok := eval(value)
		if !ok {
			return nil, false
		}
		if list, isList := v.([]any); isList {
			if list == nil {
				return emptyList, true
			}
			return list, true
		}
		return nil, isPlain(v)
	}
}

// isPlain reports whether v is a JSON value the interpreter handles
// without reflection: a non-slice value it meets where it wants an object
// or a list gives null. Values of other types (structs, pointers, typed
// slices) make the caller fall back to the interpreter.
func isPlain(v any) bool {
	switch v.(type) {
	case nil, string, float64, bool, map[string]any, []any:
		return true
	}
	return false
}

// isFalse is the interpreter's truth test (false, null, "", empty list or
// object), for plain values only.
func isFalse(v any) (falsy, ok bool) {
	if !isPlain(v) {
		return false, false
	}
	return util.IsFalse(v), true
}
