package jmespath

import (
	"fmt"

	"github.com/jmespath-community/go-jmespath/pkg/parsing"
)

// validateAST checks that node has the shape the library's interpreter
// expects, so that malformed trees the parser lets through (such as the
// binding-less "let $x in $x") are rejected at compile time rather than
// failing during evaluation.
func validateAST(node parsing.ASTNode) error {
	if err := validateNode(node); err != nil {
		return err
	}
	for _, child := range node.Children {
		if err := validateAST(child); err != nil {
			return err
		}
	}
	return nil
}

func validateNode(node parsing.ASTNode) error {
	switch node.NodeType {
	case parsing.ASTArithmeticUnaryExpression, parsing.ASTExpRef, parsing.ASTFlatten,
		parsing.ASTNotExpression:
		return minChildren(node, 1)
	case parsing.ASTArithmeticExpression, parsing.ASTComparator, parsing.ASTOrExpression,
		parsing.ASTAndExpression, parsing.ASTProjection, parsing.ASTSubexpression,
		parsing.ASTIndexExpression, parsing.ASTValueProjection, parsing.ASTLetExpression:
		return minChildren(node, 2)
	case parsing.ASTFilterProjection:
		return minChildren(node, 3)
	case parsing.ASTFunctionExpression, parsing.ASTField, parsing.ASTVariable:
		return valueOfType[string](node)
	case parsing.ASTIndex:
		return valueOfType[int](node)
	case parsing.ASTSlice:
		return valueOfType[[]*int](node)
	case parsing.ASTKeyValPair:
		if err := minChildren(node, 1); err != nil {
			return err
		}
		return valueOfType[string](node)
	case parsing.ASTMultiSelectHash:
		for _, child := range node.Children {
			if err := valueOfType[string](child); err != nil {
				return err
			}
		}
		return nil
	case parsing.ASTBindings:
		for _, child := range node.Children {
			if child.NodeType != parsing.ASTBinding {
				return malformed(node, "a binding without a value")
			}
			if err := minChildren(child, 2); err != nil {
				return err
			}
			if err := valueOfType[string](child.Children[0]); err != nil {
				return err
			}
		}
		return nil
	default:
		return nil
	}
}

func minChildren(node parsing.ASTNode, n int) error {
	if len(node.Children) < n {
		return malformed(node, fmt.Sprintf("%d operands instead of %d", len(node.Children), n))
	}
	return nil
}

func valueOfType[T any](node parsing.ASTNode) error {
	if _, ok := node.Value.(T); !ok {
		return malformed(node, fmt.Sprintf("a value of type %T", node.Value))
	}
	return nil
}

func malformed(node parsing.ASTNode, what string) error {
	return fmt.Errorf("%w: %s node has %s", ErrInvalidExpression, node.NodeType, what)
}
