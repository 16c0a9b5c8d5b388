package policycache

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/util/validation"
)

// Why a PolicyException is left out of the set (a Problem's Err wraps
// one of them).
var (
	// ErrExceptionsDisabled: the operator turned PolicyExceptions off.
	ErrExceptionsDisabled = errors.New("policy exceptions are disabled (--policy-exceptions=false)")
	// ErrExceptionNamespace: exception namespaces are set, and the
	// exception is in none of them.
	ErrExceptionNamespace = errors.New("policy exception outside the exception namespaces (--exception-namespaces)")
	// ErrInvalidExceptionConfig wraps the errors of an invalid
	// ExceptionConfig.
	ErrInvalidExceptionConfig = errors.New("invalid policy exception configuration")
)

// ExceptionConfig is how far the cluster's PolicyExceptions (both
// shapes: kyverno.io's and policies.kyverno.io's) reach, as an operator
// sets it (Kyverno's --enablePolicyException and --exceptionNamespace,
// made strict by default):
//
//   - Disabled: none counts.
//   - Namespaces empty (the default): an exception in any namespace
//     counts, and exempts only resources in its own namespace, so whoever
//     may write exceptions in a namespace can exempt only what is in it.
//   - Namespaces set: an exception in one of them exempts resources in
//     every namespace its match selects; one elsewhere is left out (a
//     Problem wrapping ErrExceptionNamespace, logged and counted with
//     the policies left out).
type ExceptionConfig struct {
	Disabled   bool
	Namespaces []string
}

// Validate reports namespaces that are not namespace names.
func (c ExceptionConfig) Validate() error {
	var errs []error
	for _, ns := range c.Namespaces {
		for _, msg := range validation.IsDNS1123Label(ns) {
			errs = append(errs, fmt.Errorf("exception namespace %q: %s", ns, msg))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidExceptionConfig, errors.Join(errs...))
	}
	return nil
}

// Admit says whether an exception in namespace ns counts and whether it
// is cluster-wide (policy.Exception.ClusterWide); an exception that does
// not count is an error wrapping ErrExceptionsDisabled or
// ErrExceptionNamespace.
func (c ExceptionConfig) Admit(ns string) (clusterWide bool, err error) {
	switch {
	case c.Disabled:
		return false, ErrExceptionsDisabled
	case len(c.Namespaces) == 0:
		return false, nil
	case slices.Contains(c.Namespaces, ns):
		return true, nil
	default:
		return false, fmt.Errorf("%w: namespace %s is not one of %v", ErrExceptionNamespace, ns, c.Namespaces)
	}
}

// WithExceptions sets how far the cache's PolicyExceptions reach (the
// zero ExceptionConfig unless called); call it before Start.
func (c *Cache) WithExceptions(cfg ExceptionConfig) *Cache {
	c.exceptions = cfg
	return c
}

// Exceptions returns the cache's ExceptionConfig, for whoever reads
// PolicyExceptions past the cache (the generator before the cache has
// synced).
func (c *Cache) Exceptions() ExceptionConfig { return c.exceptions }
