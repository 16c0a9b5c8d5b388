package cli

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// ErrNotInCluster is wrapped by the error of a resource name given with
// --cluster that names no resource the policies select.
var ErrNotInCluster = errors.New("not found in the cluster")

// defaultBatchSize is how many objects one list request of apply
// --cluster asks for (Kyverno's --batch-size default).
const defaultBatchSize = 100

// clusterScope is what apply --cluster reads, as Kyverno's apply reads
// it: with neither a namespace nor ClusterWide, every kind the policies
// select; with a namespace, the namespaced kinds in that namespace only;
// ClusterWide, the cluster-scoped kinds (and, with a namespace, the
// namespaced ones in it as well). Names, when given, keep the resources
// of those names; each must name one.
type clusterScope struct {
	Namespace   string
	ClusterWide bool
	Names       []string
	BatchSize   int64
}

// wants says whether the scope reads a kind, and in which namespace.
func (s clusterScope) wants(k servedKind) (namespace string, ok bool) {
	switch {
	case !k.namespaced:
		return "", s.ClusterWide || s.Namespace == ""
	case s.Namespace != "":
		return s.Namespace, true
	default:
		return "", !s.ClusterWide
	}
}

// selectsKind reports whether any rule of the policies, or any cleanup
// policy, may select objects of the kind (a kind wildcard included).
func selectsKind(set *engine.Set, deleting []*engine.CleanupPolicy, k servedKind) bool {
	g, v := k.gvr.Group, k.gvr.Version
	for _, p := range set.Policies {
		for _, t := range []engine.RuleType{engine.TypeValidation, engine.TypeMutation, engine.TypeGeneration, engine.TypeImageVerify} {
			if p.SelectsKind(t, g, v, k.kind) != engine.KindNotSelected {
				return true
			}
		}
	}
	gvk := engine.GroupVersionKind{Group: g, Version: v, Kind: k.kind}
	for _, cp := range deleting {
		for _, sel := range cp.Kinds() {
			if sel.Subresource == "" && sel.Selects(gvk) {
				return true
			}
		}
	}
	return false
}

// clusterResources lists the cluster's resources of the kinds the
// policies select, in the scope, sorted by kind (group, version,
// resource) then as the API server lists them (namespace, name), without
// their metadata.managedFields.
func clusterResources(ctx context.Context, kc *kubeClients, scope clusterScope, set *engine.Set, deleting []*engine.CleanupPolicy) ([]map[string]any, error) {
	kinds, err := kc.disc.listable(ctx)
	if err != nil {
		return nil, err
	}
	batch := scope.BatchSize
	if batch <= 0 {
		batch = defaultBatchSize
	}
	found := make(map[string]bool, len(scope.Names))
	var out []map[string]any
	for _, k := range kinds {
		ns, ok := scope.wants(k)
		if !ok || !selectsKind(set, deleting, k) {
			continue
		}
		err := listPages(ctx, kc.resource(k, ns), metav1.ListOptions{}, batch, func(o map[string]any) error {
			name := document.String(o, "metadata", "name")
			if len(scope.Names) > 0 && !slices.Contains(scope.Names, name) {
				return nil
			}
			found[name] = true
			o["apiVersion"], o["kind"] = k.apiVersion(), k.kind
			// The API server's bookkeeping of who set which field: no
			// policy reads it, and mutated resources are shown without.
			delete(document.Map(o, "metadata"), "managedFields")
			out = append(out, o)
			return nil
		})
		switch {
		case apierrors.IsForbidden(err), apierrors.IsNotFound(err), apierrors.IsMethodNotSupported(err):
			// A kind this identity may not list, or that went away: its
			// resources are left out, as Kyverno's apply leaves them.
			continue
		case err != nil:
			return nil, fmt.Errorf("list %s: %w", k.gvr, err)
		}
	}
	var missing []string
	for _, n := range scope.Names {
		if !found[n] {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		where := "the cluster"
		if scope.Namespace != "" {
			where = "namespace " + scope.Namespace
		}
		return nil, fmt.Errorf("resources: %s: %w (with --cluster, -r names resources: none of a kind the policies select has that name in %s)", strings.Join(missing, ", "), ErrNotInCluster, where)
	}
	return out, nil
}

var namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// namespaceCache reads each namespace of the cluster once, for the
// namespace selectors of the policies.
type namespaceCache struct {
	kc *kubeClients
	mu sync.Mutex
	ns map[string]map[string]any
}

// get is the namespace's object, or nil when it cannot be read.
func (c *namespaceCache) get(ctx context.Context, name string) map[string]any {
	if name == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if o, ok := c.ns[name]; ok {
		return o
	}
	var obj map[string]any
	if u, err := c.kc.dyn.Resource(namespaces).Get(ctx, name, metav1.GetOptions{}); err == nil {
		obj = u.Object
	}
	if c.ns == nil {
		c.ns = map[string]map[string]any{}
	}
	c.ns[name] = obj
	return obj
}
