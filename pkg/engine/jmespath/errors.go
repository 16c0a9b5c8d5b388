package jmespath

import (
	"errors"
	"fmt"
)

var (
	// ErrInvalidExpression is wrapped by errors for expressions that cannot be
	// parsed.
	ErrInvalidExpression = errors.New("invalid jmespath expression")
	// ErrEvaluation is wrapped by every error returned while evaluating a
	// compiled expression against a document.
	ErrEvaluation = errors.New("jmespath evaluation failed")
	// ErrFunction is wrapped by errors raised by a function call: unknown
	// function, wrong number or types of arguments, or invalid argument
	// values. Such errors also wrap ErrEvaluation once returned by Search.
	ErrFunction = errors.New("jmespath function failed")
	// ErrInvalidOption is wrapped by errors returned by New for invalid
	// options.
	ErrInvalidOption = errors.New("invalid jmespath option")
	// ErrStepLimit is wrapped, with ErrEvaluation, by the error of a search
	// that did more work than the interpreter's step limit allows.
	ErrStepLimit = errors.New("jmespath step limit exceeded")

	// errPanic marks a panic recovered while evaluating; the fuzz target
	// fails on it.
	errPanic = errors.New("panic")
)

// fnErrorf returns an error for function name wrapping ErrFunction.
func fnErrorf(name, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %s", ErrFunction, name, fmt.Sprintf(format, args...))
}

// fnWrap wraps err, raised by function name, with ErrFunction.
func fnWrap(name string, err error) error {
	return fmt.Errorf("%w: %s: %w", ErrFunction, name, err)
}
