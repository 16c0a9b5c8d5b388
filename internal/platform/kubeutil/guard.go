package kubeutil

import (
	"fmt"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// ErrProtected wraps the refusal of a policy's read of what is Verdict's
// own: the Secrets of its namespace (its CA's and serving certificate's
// private keys, NATS credentials). No policy reads them, cluster-wide or
// namespaced, whatever rights the service account holds (DESIGN.md,
// invariant 11). It matches policy.ErrRefused: no default stands in.
var ErrProtected error = policy.Refusal("protected: Verdict's own Secrets")

// Protected is Verdict's namespace, whose Secrets policies never read;
// "" protects nothing (a test, or a process with no namespace of its
// own).
type Protected string

// covers reports whether a read of resource (a plural, as API paths and
// REST mappings name it) of group touches what p protects.
func (p Protected) covers(group, resource string) bool {
	return p != "" && group == "" && resource == "secrets"
}

// Check refuses a read of Secrets (core group) in the protected
// namespace. A read across every namespace (namespace "") is allowed:
// its answer goes through Filter.
func (p Protected) Check(group, resource, namespace string) error {
	if p.covers(group, resource) && namespace == string(p) {
		return fmt.Errorf("%w: the Secrets of namespace %s", ErrProtected, namespace)
	}
	return nil
}

// Filter drops the protected namespace's objects from a list read across
// every namespace, so a cluster-wide list of Secrets never holds
// Verdict's.
func (p Protected) Filter(group, resource string, items []map[string]any) []map[string]any {
	if !p.covers(group, resource) {
		return items
	}
	out := items[:0]
	for _, o := range items {
		if document.String(o, "metadata", "namespace") != string(p) {
			out = append(out, o)
		}
	}
	return out
}

// FilterList is Filter on a decoded list answer ({"items": [...]}), as an
// apiCall receives it.
func (p Protected) FilterList(group, resource string, list any) any {
	m, ok := list.(map[string]any)
	if !ok || !p.covers(group, resource) {
		return list
	}
	items, _ := m["items"].([]any)
	kept := make([]any, 0, len(items))
	for _, it := range items {
		o, _ := it.(map[string]any)
		if document.String(o, "metadata", "namespace") != string(p) {
			kept = append(kept, it)
		}
	}
	m["items"] = kept
	return m
}
