package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// ErrOutsideNamespace wraps the refusal of a namespaced policy's read that
// names another namespace or a cluster-scoped resource (the same sentinel
// as policy.ErrOutsideNamespace, which admission gives for literal values).
var ErrOutsideNamespace = policy.ErrOutsideNamespace

// Tenancy: a namespaced policy (CallerNamespace marks its calls) reads and
// writes only its own namespace, whatever loader or lister serves it (the
// CLI's files, the services' API clients), so the rule is kept here, in
// the engine, around every source it is given: confinedLoader and
// confinedLister check each call before it reaches the source. A refusal
// is an error of the rule (never a default, never "not available"), so a
// tenant sees why, and no fallback hides it.

// confinedLoader checks each call of a ContextLoader against the caller's
// namespace.
type confinedLoader struct {
	inner ContextLoader
}

func (l confinedLoader) ConfigMap(ctx context.Context, namespace, name string) (map[string]any, error) {
	ns, err := policy.ConfineNamespace(CallerNamespace(ctx), namespace, "the configMap entry "+name)
	if err != nil {
		return nil, err
	}
	return l.inner.ConfigMap(ctx, ns, name)
}

// APICall checks the path of a call to the API server (service calls are
// the HTTP client's to judge: policyhttp refuses a namespace's unless the
// operator allows them) and passes it on cleaned, as it was checked.
func (l confinedLoader) APICall(ctx context.Context, call *policy.APICall) (any, error) {
	if call.Service == nil {
		clean, err := policy.ConfineAPICall(CallerNamespace(ctx), call.Method, call.URLPath)
		if err != nil {
			return nil, err
		}
		if clean != call.URLPath {
			c := *call
			c.URLPath = clean
			call = &c
		}
	}
	return l.inner.APICall(ctx, call)
}

// GlobalReference refuses a namespaced policy: global context entries are
// cluster-wide, written by the cluster's administrators, and may hold data
// of any namespace.
func (l confinedLoader) GlobalReference(ctx context.Context, name string) (any, error) {
	if ns := CallerNamespace(ctx); ns != "" {
		return nil, fmt.Errorf("%w: global context entry %s: a namespaced policy (namespace %s) may not read global context entries", ErrOutsideNamespace, name, ns)
	}
	return l.inner.GlobalReference(ctx, name)
}

func (l confinedLoader) ImageData(ctx context.Context, reference string) (any, error) {
	return l.inner.ImageData(ctx, reference)
}

// confinedLister checks each read of a ResourceLister against the
// caller's namespace: a namespaced policy reads in its namespace ("" is
// its namespace), never another, and no cluster-scoped kind where the
// lister can tell the scope (ScopeResolver).
type confinedLister struct {
	inner ResourceLister
}

func (l confinedLister) confine(ctx context.Context, apiVersion, kind, namespace string) (string, error) {
	tenant := CallerNamespace(ctx)
	if tenant == "" {
		return namespace, nil
	}
	ns, err := policy.ConfineNamespace(tenant, namespace, "the read of "+kind)
	if err != nil {
		return "", err
	}
	if sr, ok := l.inner.(ScopeResolver); ok {
		namespaced, err := sr.Namespaced(ctx, apiVersion, kind)
		if err != nil {
			return "", err
		}
		if !namespaced {
			return "", fmt.Errorf("%w: %s %s is cluster-scoped; a namespaced policy (namespace %s) reads only its own namespace", ErrOutsideNamespace, apiVersion, kind, tenant)
		}
	}
	return ns, nil
}

func (l confinedLister) GetResource(ctx context.Context, apiVersion, kind, namespace, name string) (map[string]any, error) {
	ns, err := l.confine(ctx, apiVersion, kind, namespace)
	if err != nil {
		return nil, err
	}
	return l.inner.GetResource(ctx, apiVersion, kind, ns, name)
}

func (l confinedLister) ListResources(ctx context.Context, apiVersion, kind, namespace string, selector *policy.LabelSelector) ([]map[string]any, error) {
	ns, err := l.confine(ctx, apiVersion, kind, namespace)
	if err != nil {
		return nil, err
	}
	return l.inner.ListResources(ctx, apiVersion, kind, ns, selector)
}

// isRefusal reports whether err is a refusal no default may stand in for
// (policy.ErrRefused: the engine's tenancy checks, a loader's own).
func isRefusal(err error) bool {
	return errors.Is(err, policy.ErrRefused)
}
