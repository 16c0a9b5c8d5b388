package engine

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine/celeval"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// KindResolver is implemented by a ResourceLister that can tell the kind
// a resource (plural) name stands for: CEL's resource.Get and
// resource.List name resources, the lister reads kinds. ErrNotFound means
// there is no such resource (no object, for resource.Get; an empty list).
type KindResolver interface {
	KindFor(ctx context.Context, apiVersion, resource string) (string, error)
}

// HTTPResponder is implemented by a ContextLoader that answers CEL's
// http.Get and http.Post itself (the CLI, from its mocks, in the
// reference CLI's {body, statusCode} form). Otherwise they are service
// apiCalls, answered as Kyverno's HTTP client answers: a JSON object
// body with its statusCode added, any other body as {body, statusCode}.
type HTTPResponder interface {
	HTTP(ctx context.Context, method, url string, body any, headers map[string]string) (any, error)
}

// celContext serves CEL's Kyverno functions from the engine's context
// loader and context resources, the sources of the classic context entries:
// http calls are service apiCalls, globalContext reads global references
// ("entry.projection"), image metadata comes from imageRegistry's source.
type celContext struct {
	e *Engine
}

func (c celContext) HTTP(ctx context.Context, method, url string, body any, headers map[string]string) (any, error) {
	if r, ok := c.e.loader.inner.(HTTPResponder); ok {
		return r.HTTP(ctx, method, url, body, headers)
	}
	call := &policy.APICall{Method: method, Service: &policy.ServiceCall{URL: url, CABundle: celeval.CABundle(ctx)}}
	keys := make([]string, 0, len(headers))
	for k := range headers {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		call.Service.Headers = append(call.Service.Headers, map[string]any{"key": k, "value": headers[k]})
	}
	switch b := body.(type) {
	case nil:
	case map[string]any:
		keys := make([]string, 0, len(b))
		for k := range b {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			call.Data = append(call.Data, policy.RequestData{Key: k, Value: b[k]})
		}
	default:
		return nil, fmt.Errorf("the body of a POST must be a map, not %T", body)
	}
	out, err := c.e.loader.APICall(ctx, call)
	if err != nil {
		return nil, err
	}
	// The loader answers 2xx responses only (anything else is its error).
	if m, ok := out.(map[string]any); ok {
		m["statusCode"] = float64(200)
		return m, nil
	}
	return map[string]any{"body": out, "statusCode": float64(200)}, nil
}

func (c celContext) Now() time.Time { return c.e.now() }

func (c celContext) GlobalReference(ctx context.Context, name, projection string) (any, error) {
	if projection != "" {
		name += "." + projection
	}
	return c.e.loader.GlobalReference(ctx, name)
}

func (c celContext) kind(ctx context.Context, apiVersion, resource string) (string, error) {
	r, ok := c.e.reader.inner.(KindResolver)
	if !ok {
		return "", fmt.Errorf("resources by name (%s %s): %w", apiVersion, resource, ErrNotAvailable)
	}
	return r.KindFor(ctx, apiVersion, resource)
}

func (c celContext) GetResource(ctx context.Context, apiVersion, resource, namespace, name string) (map[string]any, error) {
	kind, err := c.kind(ctx, apiVersion, resource)
	if errors.Is(err, ErrNotFound) {
		return nil, celeval.ErrNotFound
	}
	if err != nil {
		return nil, err
	}
	obj, err := c.e.reader.GetResource(ctx, apiVersion, kind, namespace, name)
	// The lister knows the kind (KindFor answered), so "not available"
	// is this object's absence from its source (the CLI's files).
	if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotAvailable) || (err == nil && obj == nil) {
		return nil, celeval.ErrNotFound
	}
	return obj, err
}

// PostResource is a POST apiCall to the resource's path (an empty
// namespace being a namespaced policy's own): the loader's rules hold (only
// reviews; a namespaced policy only a LocalSubjectAccessReview of its own
// namespace).
func (c celContext) PostResource(ctx context.Context, apiVersion, resource, namespace string, data map[string]any) (map[string]any, error) {
	if namespace == "" {
		// A namespaced policy's '' is its own namespace, as for reads.
		namespace = CallerNamespace(ctx)
	}
	path := "/apis/" + apiVersion
	if !strings.Contains(apiVersion, "/") {
		path = "/api/" + apiVersion
	}
	if namespace != "" {
		path += "/namespaces/" + namespace
	}
	path += "/" + resource
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	call := &policy.APICall{Method: "POST", URLPath: path}
	for _, k := range keys {
		call.Data = append(call.Data, policy.RequestData{Key: k, Value: data[k]})
	}
	out, err := c.e.loader.APICall(ctx, call)
	if err != nil {
		return nil, err
	}
	m, ok := out.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("POST %s: the answer is not an object", path)
	}
	return m, nil
}

func (c celContext) ListResources(ctx context.Context, apiVersion, resource, namespace string, labels map[string]string) ([]map[string]any, error) {
	kind, err := c.kind(ctx, apiVersion, resource)
	if errors.Is(err, ErrNotFound) {
		return nil, nil // no such resources: an empty list
	}
	if err != nil {
		return nil, err
	}
	var sel *policy.LabelSelector
	if len(labels) > 0 {
		sel = &policy.LabelSelector{MatchLabels: labels}
	}
	return c.e.reader.ListResources(ctx, apiVersion, kind, namespace, sel)
}

func (c celContext) ImageData(ctx context.Context, reference string) (any, error) {
	return c.e.loader.ImageData(ctx, reference)
}

// callerKey marks a context with the namespace of the namespaced policy
// whose evaluation it carries.
type callerKey struct{}

// CallerNamespace is the namespace of the namespaced policy (Policy,
// NamespacedValidatingPolicy, NamespacedMutatingPolicy,
// NamespacedGeneratingPolicy, NamespacedImageValidatingPolicy,
// NamespacedDeletingPolicy, CleanupPolicy)
// whose evaluation calls a ContextLoader or ResourceLister with ctx, and
// "" for a cluster-wide policy: a loader may refuse a namespace's
// policies what it grants the cluster's (the services' HTTP calls).
func CallerNamespace(ctx context.Context) string {
	ns, _ := ctx.Value(callerKey{}).(string)
	return ns
}

// withCaller marks ctx with p's namespace when p is a namespaced kind.
func withCaller(ctx context.Context, p *Policy) context.Context {
	if p == nil || p.Raw == nil {
		return ctx
	}
	switch p.Raw.Kind {
	case policy.KindPolicy, policy.KindNamespacedValidatingPolicy, policy.KindNamespacedMutatingPolicy,
		policy.KindNamespacedGeneratingPolicy, policy.KindNamespacedImageValidatingPolicy, policy.KindNamespacedDeletingPolicy, policy.KindCleanupPolicy:
		return context.WithValue(ctx, callerKey{}, p.Raw.Metadata.Namespace)
	}
	return ctx
}

// callCtx is the context of the rule's CEL evaluations and context
// entries: the meter's, marked with a namespaced policy's namespace
// (CallerNamespace).
func (run *ruleRun) callCtx() context.Context {
	return withCaller(run.m.ctx, run.policy)
}
