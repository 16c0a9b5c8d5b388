package kube

import (
	"errors"
	"fmt"
)

// ErrProtected wraps the refusal of a policy's read of what is Verdict's
// own: the Secrets of its namespace (its CA's and serving certificate's
// private keys, NATS credentials). No policy reads them, cluster-wide or
// namespaced, whatever rights the service account holds (DESIGN.md,
// invariant 11).
var ErrProtected = errors.New("protected: Verdict's own Secrets")

// Protected is Verdict's namespace, whose Secrets policies never read;
// "" protects nothing (a test, or a process with no namespace of its
// own).
type Protected string

// Check refuses a read of Secrets (core group) in the protected namespace
// or across every namespace (namespace "", a list that would hold them).
// resource is the plural (secrets), as API paths and REST mappings
// name it.
func (p Protected) Check(group, resource, namespace string) error {
	if p == "" || group != "" || resource != "secrets" {
		return nil
	}
	switch namespace {
	case string(p):
		return fmt.Errorf("%w: the Secrets of namespace %s", ErrProtected, namespace)
	case "":
		return fmt.Errorf("%w: a read of Secrets in every namespace would include namespace %s's", ErrProtected, string(p))
	}
	return nil
}
