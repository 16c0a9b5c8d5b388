package kubeutil

import (
	"context"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// Lister serves the engine's ResourceLister (generate clone and
// cloneList sources, mutate-existing targets, CEL's resource.Get and
// resource.List) from the cluster, through the dynamic client and a REST
// mapper. Each call may be bounded in time and a list in items
// (WithCallTimeout, WithMaxItems), as a webhook's reads must be.
type Lister struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	// pageSize bounds one list call; lists are read page by page.
	pageSize int64
	// timeout bounds each call (0: only the caller's context does).
	timeout time.Duration
	// maxItems bounds the objects one list reads (0: no bound).
	maxItems int
	// protected is Verdict's namespace, whose Secrets it never reads.
	protected Protected
}

var _ engine.ResourceLister = (*Lister)(nil)

// ErrTooManyItems is returned for a list with more objects than the
// Lister's WithMaxItems bound.
var ErrTooManyItems = errors.New("too many resources to list")

// ListerOption bounds a Lister.
type ListerOption func(*Lister)

// WithCallTimeout bounds each call to the API server, within the caller's
// deadline; a list's pages share it.
func WithCallTimeout(d time.Duration) ListerOption {
	return func(l *Lister) { l.timeout = d }
}

// WithMaxItems bounds the objects one list may read (before selectors
// are applied); a larger list is an error wrapping ErrTooManyItems.
func WithMaxItems(n int) ListerOption {
	return func(l *Lister) {
		l.maxItems = n
		if n > 0 && int64(n) < l.pageSize {
			l.pageSize = int64(n)
		}
	}
}

// WithProtectedNamespace refuses reads of the Secrets of Verdict's
// namespace ns (Protected), cluster-wide lists of Secrets with them.
func WithProtectedNamespace(ns string) ListerOption {
	return func(l *Lister) { l.protected = Protected(ns) }
}

// NewLister returns a Lister.
func NewLister(dyn dynamic.Interface, mapper meta.RESTMapper, opts ...ListerOption) *Lister {
	l := &Lister{dyn: dyn, mapper: mapper, pageSize: 500}
	for _, o := range opts {
		o(l)
	}
	return l
}

// bound applies the call timeout to ctx.
func (l *Lister) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	if l.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, l.timeout)
}

// resource maps apiVersion and kind to the resource to call, and says
// whether it is namespaced. Without an apiVersion the kind is a core one
// (a cloneList kind written as "Secret").
func (l *Lister) resource(apiVersion, kind string) (schema.GroupVersionResource, bool, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	var versions []string
	if gv.Version != "" {
		versions = append(versions, gv.Version)
	}
	m, err := l.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: kind}, versions...)
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("kind %s %s: %w", apiVersion, kind, err)
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// GetResource reads one resource; a missing one is engine.ErrNotFound.
func (l *Lister) GetResource(ctx context.Context, apiVersion, kind, namespace, name string) (map[string]any, error) {
	gvr, namespaced, err := l.resource(apiVersion, kind)
	if err != nil {
		return nil, err
	}
	if err := l.protected.Check(gvr.Group, gvr.Resource, namespace); err != nil {
		return nil, err
	}
	ri := l.dyn.Resource(gvr)
	var c dynamic.ResourceInterface = ri
	if namespaced {
		c = ri.Namespace(namespace)
	}
	ctx, cancel := l.bound(ctx)
	defer cancel()
	u, err := c.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%s %s/%s: %w", kind, namespace, name, engine.ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return u.Object, nil
}

// ListResources lists the resources of a kind in a namespace (every
// namespace for "") that match the selector, which may hold wildcards
// (engine.MatchSelector judges it).
func (l *Lister) ListResources(ctx context.Context, apiVersion, kind, namespace string, selector *policy.LabelSelector) ([]map[string]any, error) {
	gvr, namespaced, err := l.resource(apiVersion, kind)
	if err != nil {
		return nil, err
	}
	if err := l.protected.Check(gvr.Group, gvr.Resource, namespace); err != nil {
		return nil, err
	}
	ri := l.dyn.Resource(gvr)
	var c dynamic.ResourceInterface = ri
	if namespaced && namespace != "" {
		c = ri.Namespace(namespace)
	}
	ctx, cancel := l.bound(ctx)
	defer cancel()
	var out []map[string]any
	opts := metav1.ListOptions{Limit: l.pageSize}
	read := 0
	for {
		list, err := c.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		if read += len(list.Items); l.maxItems > 0 && (read > l.maxItems || (read == l.maxItems && list.GetContinue() != "")) {
			return nil, fmt.Errorf("%w: %s in %q has more than %d", ErrTooManyItems, gvr.Resource, namespace, l.maxItems)
		}
		for i := range list.Items {
			o := list.Items[i].Object
			if selector != nil && !engine.MatchSelector(selector, list.Items[i].GetLabels()) {
				continue
			}
			out = append(out, o)
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return l.protected.Filter(gvr.Group, gvr.Resource, out), nil
		}
	}
}

// KindFor is the kind the API server serves resource (a plural) of
// apiVersion as, by the REST mapper (engine.KindResolver: CEL's
// resource.Get and resource.List name resources). A resource the API
// server does not serve is engine.ErrNotFound.
func (l *Lister) KindFor(_ context.Context, apiVersion, resource string) (string, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return "", fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	gvk, err := l.mapper.KindFor(gv.WithResource(resource))
	if meta.IsNoMatchError(err) {
		return "", fmt.Errorf("%w: %s %s is not served", engine.ErrNotFound, apiVersion, resource)
	}
	if err != nil {
		return "", fmt.Errorf("resource %s %s: %w", apiVersion, resource, err)
	}
	return gvk.Kind, nil
}

var _ engine.KindResolver = (*Lister)(nil)

// Bounds of the reads policies make (NewContextLister).
const (
	// ContextReadTimeout bounds each read, as the context loader bounds
	// an apiCall.
	ContextReadTimeout = 3 * time.Second
	// ContextReadMaxItems bounds the objects one resource.List (or one
	// params selector) reads, so that one policy cannot hold a whole
	// kind of a large cluster in memory per request.
	ContextReadMaxItems = 5000
)

// NewContextLister returns the Lister that serves policies' reads of
// resources (CEL's resource.Get and resource.List, validate.cel params)
// in the services: each call bounded by ContextReadTimeout, a list by
// ContextReadMaxItems.
func NewContextLister(dyn dynamic.Interface, mapper meta.RESTMapper, opts ...ListerOption) *Lister {
	return NewLister(dyn, mapper, append([]ListerOption{WithCallTimeout(ContextReadTimeout), WithMaxItems(ContextReadMaxItems)}, opts...)...)
}

// Namespaced reports whether the API server serves kind of apiVersion
// as a namespaced resource (engine.ScopeResolver: validate.cel params).
func (l *Lister) Namespaced(_ context.Context, apiVersion, kind string) (bool, error) {
	_, namespaced, err := l.resource(apiVersion, kind)
	return namespaced, err
}

var _ engine.ScopeResolver = (*Lister)(nil)
