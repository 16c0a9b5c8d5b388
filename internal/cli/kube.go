package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// The CLI reaches a cluster with three client-go packages only: clientcmd
// (the kubeconfig), rest and dynamic. Discovery is read here with plain
// GETs: client-go's discovery package links the typed clientset's scheme
// (every built-in API type registered at start-up), which the CLI does
// not carry (cmd/verdict's TestLeanDependencies).

// ErrKubeconfig is wrapped by the error of a kubeconfig that cannot be
// read or names no usable cluster.
var ErrKubeconfig = errors.New("kubeconfig")

// KubeOptions say which cluster the commands that read one (apply
// --cluster, compare) talk to: the kubeconfig of --kubeconfig, else of
// $KUBECONFIG, else ~/.kube/config, and its current context unless
// Context names another.
type KubeOptions struct {
	Kubeconfig string
	Context    string
}

// The CLI's request rate: a one-off run listing many kinds, not a
// controller sharing the API server for hours (client-go's default is 5
// requests a second).
const (
	cliQPS   = 50
	cliBurst = 100
)

// kubeClients are the clients of one cluster.
type kubeClients struct {
	dyn dynamic.Interface
	// raw reads paths as they are: discovery, apiCall urlPaths.
	raw  rest.Interface
	disc *discovery
}

func (o KubeOptions) clients() (*kubeClients, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if o.Kubeconfig != "" {
		rules.ExplicitPath = o.Kubeconfig
	}
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.Context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKubeconfig, err)
	}
	return newKubeClients(cfg)
}

func newKubeClients(base *rest.Config) (*kubeClients, error) {
	cfg := rest.CopyConfig(base)
	cfg.QPS, cfg.Burst = cliQPS, cliBurst
	cfg.UserAgent = "verdict-cli"
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKubeconfig, err)
	}
	rawCfg := rest.CopyConfig(cfg)
	rawCfg.GroupVersion = &schema.GroupVersion{}
	rawCfg.APIPath = "/"
	rawCfg.NegotiatedSerializer = serializer.NewCodecFactory(runtime.NewScheme()).WithoutConversion()
	raw, err := rest.UnversionedRESTClientFor(rawCfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKubeconfig, err)
	}
	return &kubeClients{dyn: dyn, raw: raw, disc: &discovery{raw: raw, lists: map[string]*metav1.APIResourceList{}}}, nil
}

// servedKind is one kind the API server serves, in the version discovery
// prefers.
type servedKind struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
}

func (k servedKind) apiVersion() string { return k.gvr.GroupVersion().String() }

// discovery reads and keeps what the API server serves.
type discovery struct {
	raw   rest.Interface
	mu    sync.Mutex
	lists map[string]*metav1.APIResourceList // by group/version
	// preferred holds the listable kinds of each group's preferred
	// version, once read.
	preferred []servedKind
}

func (d *discovery) get(ctx context.Context, path string, out any) error {
	b, err := d.raw.Get().AbsPath(path).DoRaw(ctx)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}

// resources lists the resources of one group/version ("v1", "apps/v1").
func (d *discovery) resources(ctx context.Context, groupVersion string) (*metav1.APIResourceList, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if l, ok := d.lists[groupVersion]; ok {
		return l, nil
	}
	path := "/apis/" + groupVersion
	if !strings.Contains(groupVersion, "/") {
		path = "/api/" + groupVersion
	}
	l := &metav1.APIResourceList{}
	if err := d.get(ctx, path, l); err != nil {
		if apierrors.IsNotFound(err) {
			l = nil // not served: remembered as such
		} else {
			return nil, fmt.Errorf("discovery %s: %w", path, err)
		}
	}
	d.lists[groupVersion] = l
	return l, nil
}

// served reports whether the API server serves groupVersion.
func (d *discovery) served(ctx context.Context, groupVersion string) (bool, error) {
	l, err := d.resources(ctx, groupVersion)
	return l != nil, err
}

// listable lists the kinds that can be listed, each in its group's
// preferred version, sorted by group, version and resource.
func (d *discovery) listable(ctx context.Context) ([]servedKind, error) {
	d.mu.Lock()
	done := d.preferred != nil
	d.mu.Unlock()
	if done {
		return d.preferred, nil
	}
	versions := []string{"v1"}
	var groups metav1.APIGroupList
	if err := d.get(ctx, "/apis", &groups); err != nil {
		return nil, fmt.Errorf("discovery /apis: %w", err)
	}
	for _, g := range groups.Groups {
		if gv := g.PreferredVersion.GroupVersion; gv != "" {
			versions = append(versions, gv)
		}
	}
	out := []servedKind{}
	for _, gv := range versions {
		l, err := d.resources(ctx, gv)
		if err != nil {
			return nil, err
		}
		if l == nil {
			continue
		}
		parsed, err := schema.ParseGroupVersion(gv)
		if err != nil {
			return nil, fmt.Errorf("discovery: %w", err)
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			out = append(out, servedKind{gvr: parsed.WithResource(r.Name), kind: r.Kind, namespaced: r.Namespaced})
		}
	}
	slices.SortFunc(out, func(a, b servedKind) int {
		return strings.Compare(a.gvr.String(), b.gvr.String())
	})
	d.mu.Lock()
	d.preferred = out
	d.mu.Unlock()
	return out, nil
}

// find is the resource of kind in apiVersion, or in the preferred
// version of any group when apiVersion is empty.
func (d *discovery) find(ctx context.Context, apiVersion, kind string) (servedKind, error) {
	if apiVersion == "" {
		kinds, err := d.listable(ctx)
		if err != nil {
			return servedKind{}, err
		}
		for _, k := range kinds {
			if k.kind == kind {
				return k, nil
			}
		}
		return servedKind{}, fmt.Errorf("%w: the cluster serves no kind %s", engine.ErrNotFound, kind)
	}
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return servedKind{}, err
	}
	l, err := d.resources(ctx, apiVersion)
	if err != nil {
		return servedKind{}, err
	}
	if l != nil {
		for _, r := range l.APIResources {
			if r.Kind == kind && !strings.Contains(r.Name, "/") {
				return servedKind{gvr: gv.WithResource(r.Name), kind: r.Kind, namespaced: r.Namespaced}, nil
			}
		}
	}
	return servedKind{}, fmt.Errorf("%w: the cluster serves no kind %s in %s", engine.ErrNotFound, kind, apiVersion)
}

// listPages lists every object of a resource, page by page (limit
// objects a request; 0 is the server's choice), and hands each to visit.
func listPages(ctx context.Context, ri dynamic.ResourceInterface, opts metav1.ListOptions, limit int64, visit func(map[string]any) error) error {
	opts.Limit = limit
	for {
		l, err := ri.List(ctx, opts)
		if err != nil {
			return err
		}
		for i := range l.Items {
			if err := visit(l.Items[i].Object); err != nil {
				return err
			}
		}
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
}

func (c *kubeClients) resource(k servedKind, namespace string) dynamic.ResourceInterface {
	if k.namespaced && namespace != "" {
		return c.dyn.Resource(k.gvr).Namespace(namespace)
	}
	return c.dyn.Resource(k.gvr)
}

// clusterSource serves the engine's context and reads of resources from
// the cluster, as the services do: ConfigMap entries, apiCall paths of the
// API server, CEL resource reads and params, clone sources and the
// targets of mutate-existing rules. What only a service has (policies'
// calls to other services, global context entries, image data) is not
// available: such an entry is left out, as without a cluster.
type clusterSource struct {
	c *kubeClients
	// page is the page size of lists.
	page int64
}

var (
	_ engine.ContextLoader  = (*clusterSource)(nil)
	_ engine.ResourceLister = (*clusterSource)(nil)
	_ engine.KindResolver   = (*clusterSource)(nil)
	_ engine.ScopeResolver  = (*clusterSource)(nil)
)

var configMaps = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

func (s *clusterSource) ConfigMap(ctx context.Context, namespace, name string) (map[string]any, error) {
	cm, err := s.c.dyn.Resource(configMaps).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("configMap %s/%s: %w", namespace, name, err)
	}
	return cm.Object, nil
}

func (s *clusterSource) APICall(ctx context.Context, call *policy.APICall) (any, error) {
	if call.Service != nil {
		return nil, engine.ErrNotAvailable
	}
	p, err := policy.ParseAPIPath(call.URLPath)
	if err != nil {
		return nil, err
	}
	if p.Watch || strings.Contains(p.Clean, "watch=") {
		return nil, fmt.Errorf("%w: apiCall %s: a watch is not an answer", policy.ErrAPICallRefused, p.Clean)
	}
	var req *rest.Request
	switch strings.ToUpper(call.Method) {
	case "", "GET":
		req = s.c.raw.Get()
	case "POST":
		body := map[string]any{}
		for _, d := range call.Data {
			body[d.Key] = d.Value
		}
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		req = s.c.raw.Post().Body(b).SetHeader("Content-Type", "application/json")
	default:
		return nil, fmt.Errorf("apiCall method %q: only GET and POST", call.Method)
	}
	raw, err := req.RequestURI(p.Clean).DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("apiCall %s: %w", p.Clean, err)
	}
	v, err := document.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("apiCall %s: response is not JSON: %w", p.Clean, err)
	}
	return v, nil
}

func (s *clusterSource) GlobalReference(context.Context, string) (any, error) {
	return nil, engine.ErrNotAvailable
}

func (s *clusterSource) ImageData(context.Context, string) (any, error) {
	return nil, engine.ErrNotAvailable
}

func (s *clusterSource) GetResource(ctx context.Context, apiVersion, kind, namespace, name string) (map[string]any, error) {
	k, err := s.c.disc.find(ctx, apiVersion, kind)
	if err != nil {
		return nil, err
	}
	obj, err := s.c.resource(k, namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %s %s/%s", engine.ErrNotFound, kind, namespace, name)
	}
	if err != nil {
		return nil, err
	}
	return obj.Object, nil
}

func (s *clusterSource) ListResources(ctx context.Context, apiVersion, kind, namespace string, selector *policy.LabelSelector) ([]map[string]any, error) {
	k, err := s.c.disc.find(ctx, apiVersion, kind)
	if err != nil {
		return nil, err
	}
	var out []map[string]any
	err = listPages(ctx, s.c.resource(k, namespace), metav1.ListOptions{}, s.page, func(o map[string]any) error {
		if selector == nil || engine.MatchSelector(selector, document.StringMap(o, "metadata", "labels")) {
			out = append(out, o)
		}
		return nil
	})
	return out, err
}

func (s *clusterSource) KindFor(ctx context.Context, apiVersion, resource string) (string, error) {
	l, err := s.c.disc.resources(ctx, apiVersion)
	if err != nil {
		return "", err
	}
	if l != nil {
		for _, r := range l.APIResources {
			if r.Name == resource {
				return r.Kind, nil
			}
		}
	}
	return "", fmt.Errorf("%w: the cluster serves no %s in %s", engine.ErrNotFound, resource, apiVersion)
}

func (s *clusterSource) Namespaced(ctx context.Context, apiVersion, kind string) (bool, error) {
	k, err := s.c.disc.find(ctx, apiVersion, kind)
	if err != nil {
		return false, err
	}
	return k.namespaced, nil
}
