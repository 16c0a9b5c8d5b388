package kube

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// Lister serves the engine's ResourceLister (generate clone and
// cloneList sources, mutate-existing targets) from the cluster, through
// the dynamic client and a REST mapper.
type Lister struct {
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	// pageSize bounds one list call; lists are read page by page.
	pageSize int64
}

var _ engine.ResourceLister = (*Lister)(nil)

// NewLister returns a Lister.
func NewLister(dyn dynamic.Interface, mapper meta.RESTMapper) *Lister {
	return &Lister{dyn: dyn, mapper: mapper, pageSize: 500}
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
	ri := l.dyn.Resource(gvr)
	var c dynamic.ResourceInterface = ri
	if namespaced {
		c = ri.Namespace(namespace)
	}
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
	ri := l.dyn.Resource(gvr)
	var c dynamic.ResourceInterface = ri
	if namespaced && namespace != "" {
		c = ri.Namespace(namespace)
	}
	var out []map[string]any
	opts := metav1.ListOptions{Limit: l.pageSize}
	for {
		list, err := c.List(ctx, opts)
		if err != nil {
			return nil, err
		}
		for i := range list.Items {
			o := list.Items[i].Object
			if selector != nil && !engine.MatchSelector(selector, list.Items[i].GetLabels()) {
				continue
			}
			out = append(out, o)
		}
		if opts.Continue = list.GetContinue(); opts.Continue == "" {
			return out, nil
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
