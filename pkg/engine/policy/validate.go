package policy

import (
	"errors"
	"fmt"
	"strings"
)

// FieldError is one problem in a policy, with the path of the field.
type FieldError struct {
	Path string `json:"path"`
	Msg  string `json:"message"`
}

func (e FieldError) Error() string { return e.Path + ": " + e.Msg }

// FieldErrors are all the problems found in a policy.
type FieldErrors []FieldError

// ErrInvalidPolicy wraps the aggregate of a policy's problems.
var ErrInvalidPolicy = errors.New("invalid policy")

// ToAggregate returns one error listing every problem, or nil.
func (errs FieldErrors) ToAggregate() error {
	if len(errs) == 0 {
		return nil
	}
	msgs := make([]string, len(errs))
	for i, e := range errs {
		msgs[i] = e.Error()
	}
	return fmt.Errorf("%w: %s", ErrInvalidPolicy, strings.Join(msgs, "; "))
}

func (errs *FieldErrors) add(path, format string, args ...any) {
	*errs = append(*errs, FieldError{Path: path, Msg: fmt.Sprintf(format, args...)})
}
