package cli

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// apiCallResponse is a canned answer to an apiCall context entry, given in
// a test's values file (a Verdict extension; the test file's
// apiCallResponses, read by apiCallMock, is the reference CLI's form):
//
//	apiCallResponses:
//	- urlPath: /api/v1/namespaces/default/pods
//	  method: GET          # optional, GET by default
//	  response: {items: []}
type apiCallResponse struct {
	URLPath  string `json:"urlPath"`
	Method   string `json:"method"`
	Response any    `json:"response"`
}

// ErrMockStatus is wrapped by the error of an apiCall answered by an
// apiCallResponses entry whose statusCode is not 2xx: like the reference
// CLI, the context entry fails.
var ErrMockStatus = errors.New("mocked apiCall failed")

// fileLoader serves context entries from what a test supplies: ConfigMaps
// and other objects among its resources (and its context file), the test
// file's apiCallResponses and globalContextEntries, the values file's
// canned API responses and global references, and image data. What it has
// no answer for is not available, so the entry is left out of the context,
// as the reference CLI does without a cluster.
type fileLoader struct {
	objects   []map[string]any
	mocks     map[string]apiCallAnswer
	responses []apiCallResponse
	images    map[string]any
	// gctx holds the values of the test file's globalContextEntries by
	// name; when it is set, a globalReference to any other name fails.
	gctx    map[string]any
	globals map[string]any
}

var _ engine.ContextLoader = (*fileLoader)(nil)

func (l *fileLoader) ConfigMap(_ context.Context, namespace, name string) (map[string]any, error) {
	for _, o := range l.objects {
		if document.String(o, "kind") == "ConfigMap" &&
			document.String(o, "metadata", "name") == name &&
			document.String(o, "metadata", "namespace") == namespace {
			return o, nil
		}
	}
	return nil, engine.ErrNotAvailable
}

func (l *fileLoader) APICall(_ context.Context, call *policy.APICall) (any, error) {
	method := strings.ToUpper(call.Method)
	if method == "" {
		method = "GET"
	}
	target := call.URLPath
	if call.Service != nil {
		target = call.Service.URL
	}
	if a, ok := lookupAPICallMock(l.mocks, method, target); ok && target != "" {
		if a.status < 200 || a.status > 299 {
			return nil, fmt.Errorf("%w: the apiCallResponses entry for %s answers HTTP %d", ErrMockStatus, target, a.status)
		}
		if m, isMap := a.body.(map[string]any); isMap {
			return document.DeepCopyMap(m), nil
		}
		return a.body, nil
	}
	for _, r := range l.responses {
		m := strings.ToUpper(r.Method)
		if m == "" {
			m = "GET"
		}
		if r.URLPath == call.URLPath && m == method {
			return r.Response, nil
		}
	}
	if call.Service != nil || method != "GET" || call.URLPath == "" {
		return nil, engine.ErrNotAvailable
	}
	return l.serveFromObjects(call.URLPath)
}

var _ engine.HTTPResponder = (*fileLoader)(nil)

// HTTP answers CEL's http.Get and http.Post from the test file's
// apiCallResponses, in the reference CLI's form: {body, statusCode}.
func (l *fileLoader) HTTP(_ context.Context, method, url string, _ any, _ map[string]string) (any, error) {
	a, ok := lookupAPICallMock(l.mocks, method, url)
	if !ok {
		return nil, fmt.Errorf("%w: no apiCallResponses entry for %s %s", engine.ErrNotAvailable, method, url)
	}
	body := a.body
	if m, isMap := body.(map[string]any); isMap {
		body = document.DeepCopyMap(m)
	}
	return map[string]any{"body": body, "statusCode": float64(a.status)}, nil
}

// serveFromObjects answers GET /api/v1/... and /apis/<group>/<version>/...
// paths for lists and single objects from the supplied objects.
func (l *fileLoader) serveFromObjects(urlPath string) (any, error) {
	path := strings.Trim(strings.SplitN(urlPath, "?", 2)[0], "/")
	parts := strings.Split(path, "/")
	var apiVersion string
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		apiVersion, parts = parts[1], parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		apiVersion, parts = parts[1]+"/"+parts[2], parts[3:]
	default:
		return nil, engine.ErrNotAvailable
	}
	namespace := ""
	if len(parts) >= 2 && parts[0] == "namespaces" && len(parts) != 2 {
		namespace, parts = parts[1], parts[2:]
	}
	if len(parts) == 0 || len(parts) > 2 {
		return nil, engine.ErrNotAvailable
	}
	resource := parts[0]
	var items []any
	for _, o := range l.objects {
		if document.String(o, "apiVersion") != apiVersion || plural(document.String(o, "kind")) != resource {
			continue
		}
		if namespace != "" && document.String(o, "metadata", "namespace") != namespace {
			continue
		}
		if len(parts) == 2 {
			if document.String(o, "metadata", "name") == parts[1] {
				return o, nil
			}
			continue
		}
		items = append(items, o)
	}
	if len(parts) == 2 {
		// Not among the supplied objects: without a cluster the entry is
		// left out, as the reference CLI does.
		return nil, engine.ErrNotAvailable
	}
	if items == nil {
		items = []any{}
	}
	return map[string]any{"apiVersion": apiVersion, "kind": "List", "items": items, "metadata": map[string]any{}}, nil
}

// plural is the resource name of a kind, by the API server's default rule.
func plural(kind string) string {
	k := strings.ToLower(kind)
	switch {
	case k == "":
		return ""
	case strings.HasSuffix(k, "s"), strings.HasSuffix(k, "x"), strings.HasSuffix(k, "ch"), strings.HasSuffix(k, "sh"):
		return k + "es"
	case strings.HasSuffix(k, "y") && len(k) > 1 && !strings.ContainsAny(k[len(k)-2:len(k)-1], "aeiou"):
		return k[:len(k)-1] + "ies"
	}
	return k + "s"
}

// GlobalReference reads "entry" or "entry.projection" from the test
// file's globalContextEntries, then from the values file's globalReferences.
func (l *fileLoader) GlobalReference(_ context.Context, name string) (any, error) {
	if v, ok, err := globalEntryValue(l.gctx, name); ok || err != nil {
		return v, err
	}
	if v, ok := l.globals[name]; ok {
		return v, nil
	}
	if l.gctx != nil {
		entry, _, _ := strings.Cut(name, ".")
		return nil, fmt.Errorf("no global context entry %q among the test's globalContextEntries", entry)
	}
	return nil, engine.ErrNotAvailable
}

func (l *fileLoader) ImageData(_ context.Context, reference string) (any, error) {
	if v, ok := l.images[reference]; ok {
		return v, nil
	}
	return nil, engine.ErrNotAvailable
}

var (
	_ engine.ResourceLister = (*fileLoader)(nil)
	_ engine.KindResolver   = (*fileLoader)(nil)
	_ engine.ScopeResolver  = (*fileLoader)(nil)
)

// Namespaced says whether kind is namespaced: as the supplied objects of
// the kind are (the CLI gave namespaced ones the "default" namespace when
// they had none, and cluster-scoped custom kinds none), or else as the
// CLI's list of cluster-scoped kinds says.
func (l *fileLoader) Namespaced(_ context.Context, apiVersion, kind string) (bool, error) {
	for _, o := range l.objects {
		if document.String(o, "kind") == kind && document.String(o, "apiVersion") == apiVersion {
			return document.String(o, "metadata", "namespace") != "", nil
		}
	}
	return !clusterScoped[kind], nil
}

// KindFor is the kind of the supplied objects of apiVersion whose plural
// is resource (CEL's resource.Get and resource.List name resources).
func (l *fileLoader) KindFor(_ context.Context, apiVersion, resource string) (string, error) {
	for _, o := range l.objects {
		kind := document.String(o, "kind")
		if document.String(o, "apiVersion") == apiVersion && plural(kind) == resource {
			return kind, nil
		}
	}
	return "", fmt.Errorf("%w: no supplied resource is one of %s %s", engine.ErrNotFound, apiVersion, resource)
}

// GetResource finds a supplied object by kind, namespace and name (and
// apiVersion when given).
func (l *fileLoader) GetResource(_ context.Context, apiVersion, kind, namespace, name string) (map[string]any, error) {
	for _, o := range l.objects {
		if document.String(o, "kind") != kind || document.String(o, "metadata", "name") != name ||
			document.String(o, "metadata", "namespace") != namespace {
			continue
		}
		if apiVersion != "" && document.String(o, "apiVersion") != apiVersion {
			continue
		}
		return o, nil
	}
	return nil, engine.ErrNotAvailable
}

// ListResources lists supplied objects of a kind in a namespace (every
// namespace for "") that match the selector.
func (l *fileLoader) ListResources(_ context.Context, apiVersion, kind, namespace string, selector *policy.LabelSelector) ([]map[string]any, error) {
	var out []map[string]any
	for _, o := range l.objects {
		if document.String(o, "kind") != kind || (namespace != "" && document.String(o, "metadata", "namespace") != namespace) {
			continue
		}
		if apiVersion != "" && document.String(o, "apiVersion") != apiVersion {
			continue
		}
		if selector != nil && !engine.MatchSelector(selector, document.StringMap(o, "metadata", "labels")) {
			continue
		}
		out = append(out, o)
	}
	return out, nil
}
