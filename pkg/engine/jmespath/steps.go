package jmespath

import (
	"context"
	"fmt"
	"math/bits"

	"github.com/jmespath-community/go-jmespath/pkg/interpreter"
	"github.com/jmespath-community/go-jmespath/pkg/parsing"
)

// DefaultStepLimit is the work one search may do unless WithStepLimit says
// otherwise. A step is one element of a list or object iterated inside a
// per-element evaluation, or one function call plus the length of its list
// and object arguments (a 64-byte stretch of a string argument counts as
// one element; sort and sort_by count n log n). A step takes from 20 to
// 150 ns (contains over a list, a projection inside a projection, sort
// inside map), so a search stops within about 150 ms; a filter calling a
// function over a list of 1,000 elements for each of 1,000 elements stays
// within it.
const DefaultStepLimit = 1_000_000

// stepFunction is the name of the function instrument inserts to charge
// the length of an iterated list. It cannot be written in an expression:
// identifiers do not hold NUL.
const stepFunction = "\x00step"

// ctxCheckInterval is how many steps a search does between two looks at
// its context.
const ctxCheckInterval = 1024

// Work accounting. A search over a document is linear in the document
// unless a per-element evaluation (the right side of a projection, a
// filter, an expression reference) iterates a list or calls a function:
// only then can an expression do more work than its input holds, for
// example `list[*].other[*]` or `list[?contains(@root.list, @)]`.
// instrument marks those places at compile time, and metered queries count
// their steps at run time.

// instrument returns node with step charges inserted: every list a
// projection, filter, flatten or object projection iterates inside a
// per-element evaluation goes through stepFunction, which charges its
// length. metered reports whether the query needs a step counter: it
// charges lists, or calls a function inside a per-element evaluation.
func instrument(node parsing.ASTNode, inLoop bool) (out parsing.ASTNode, metered bool) {
	metered = inLoop && node.NodeType == parsing.ASTFunctionExpression
	if len(node.Children) > 0 {
		children := make([]parsing.ASTNode, len(node.Children))
		for i, child := range node.Children {
			var m bool
			children[i], m = instrument(child, inLoop || perElement(node, i))
			metered = metered || m
		}
		node.Children = children
	}
	if inLoop && iterates(node) {
		chargeIterated(&node)
		metered = true
	}
	return node, metered
}

// perElement reports whether child i of node is evaluated once per
// element of a list.
func perElement(node parsing.ASTNode, i int) bool {
	switch node.NodeType {
	case parsing.ASTProjection, parsing.ASTValueProjection:
		return i == 1
	case parsing.ASTFilterProjection:
		return i >= 1
	case parsing.ASTExpRef:
		return true
	}
	return false
}

// iterates reports whether node loops over the value of its first child.
func iterates(node parsing.ASTNode) bool {
	switch node.NodeType {
	case parsing.ASTProjection, parsing.ASTFilterProjection, parsing.ASTValueProjection, parsing.ASTFlatten:
		return true
	}
	return false
}

// chargeIterated routes the list a looping node iterates through
// stepFunction. A projection over a slice keeps its shape (the
// interpreter looks at it to allow string slices): the sliced value is
// charged instead.
func chargeIterated(node *parsing.ASTNode) {
	left := &node.Children[0]
	if node.NodeType == parsing.ASTProjection && left.NodeType == parsing.ASTIndexExpression &&
		len(left.Children) > 1 && left.Children[1].NodeType == parsing.ASTSlice {
		left = &left.Children[0]
	}
	*left = parsing.ASTNode{NodeType: parsing.ASTFunctionExpression, Value: stepFunction, Children: []parsing.ASTNode{*left}}
}

// meter counts the steps of one search and stops it at its step limit or
// when its context ends, and charges the memory its function calls
// allocate to a Budget. The first error sticks: the interpreter drops
// some errors (a projection over a failed flatten gives null), so the
// search reports it once the interpreter returns.
type meter struct {
	inner interpreter.FunctionCaller
	ctx   context.Context
	limit int64
	steps int64
	// mem is the memory budget the function calls charge: the caller's,
	// or own, of the interpreter's memory limit.
	mem *Budget
	own Budget
	// countCalls is set when the search counts the steps of every call
	// (the query is metered, see instrument).
	countCalls bool
	// nextCheck is the step count at which ctx is next looked at.
	nextCheck int64
	err       error
}

// CallFunction charges a call and passes it on; stepFunction calls only
// charge the length of their argument.
func (m *meter) CallFunction(name string, args []any) (any, error) {
	if m.err != nil {
		return nil, m.err
	}
	if name == stepFunction {
		if len(args) != 1 {
			return nil, fmt.Errorf("%w: step charge with %d arguments", ErrEvaluation, len(args))
		}
		if err := m.charge(1 + size(args[0])); err != nil {
			return nil, err
		}
		return args[0], nil
	}
	// A wildcard match counts what it may cost, in any search.
	n := matchSteps(name, args)
	if m.countCalls {
		n += callSteps(name, args)
	}
	if err := m.charge(n); err != nil {
		return nil, err
	}
	// Memory: an estimate before the call where the result can be much
	// larger than the arguments, the rest of the result after it.
	est := allocEstimate(name, args)
	if err := m.mem.charge(name, est); err != nil {
		m.err = err
		return nil, err
	}
	v, err := m.inner.CallFunction(name, args)
	if err != nil {
		return nil, err
	}
	if err := m.mem.charge(name, footprint(v)-est); err != nil {
		m.err = err
		return nil, err
	}
	return v, nil
}

// callSteps is the charge of a call: one, plus the length of its list and
// object arguments and 64-byte stretches of its strings.
func callSteps(name string, args []any) int64 {
	n := int64(1)
	for _, a := range args {
		n += size(a)
	}
	if name == "sort" || name == "sort_by" {
		// n log n comparisons, each through an interface.
		n *= int64(bits.Len64(uint64(n)))
	}
	return n
}

func (m *meter) charge(n int64) error {
	m.steps += n
	if m.steps > m.limit {
		m.err = fmt.Errorf("%w: more than %d steps", ErrStepLimit, m.limit)
		return m.err
	}
	if m.ctx != nil && m.steps >= m.nextCheck {
		m.nextCheck = m.steps + ctxCheckInterval
		if err := m.ctx.Err(); err != nil {
			m.err = fmt.Errorf("stopped after %d steps: %w", m.steps, err)
			return m.err
		}
	}
	return nil
}

// size is the number of steps a value counts for as an argument or an
// iterated list.
func size(v any) int64 {
	switch t := v.(type) {
	case []any:
		return int64(len(t))
	case map[string]any:
		return int64(len(t))
	case string:
		return int64(len(t) / 64)
	}
	return 0
}
