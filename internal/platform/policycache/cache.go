// Package policycache keeps the cluster's policies compiled and current:
// informers on Verdict's policy kinds (verdict.dev/v1 ClusterPolicy,
// Policy, PolicyException) feed a compiled engine.Set that is rebuilt on
// every change and swapped in atomically, so readers never lock or see a
// half-built set. It also answers namespace labels from an informer.
package policycache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// ErrNotSynced is returned until the informers have their first lists.
var ErrNotSynced = errors.New("policy cache not synced yet")

// Resources Verdict's policy kinds are served as.
var (
	ClusterPolicies  = schema.GroupVersionResource{Group: policy.GroupVerdict, Version: "v1", Resource: "clusterpolicies"}
	Policies         = schema.GroupVersionResource{Group: policy.GroupVerdict, Version: "v1", Resource: "policies"}
	PolicyExceptions = schema.GroupVersionResource{Group: policy.GroupVerdict, Version: "v1", Resource: "policyexceptions"}
	// The CEL policy kinds: watched when the API server serves them (a
	// cluster whose CRDs predate them runs without).
	ValidatingPolicies                = schema.GroupVersionResource{Group: policy.GroupVerdict, Version: "v1", Resource: "validatingpolicies"}
	NamespacedValidatingPolicies      = schema.GroupVersionResource{Group: policy.GroupVerdict, Version: "v1", Resource: "namespacedvalidatingpolicies"}
	MutatingPolicies                  = schema.GroupVersionResource{Group: policy.GroupVerdict, Version: "v1", Resource: "mutatingpolicies"}
	NamespacedMutatingPolicies        = schema.GroupVersionResource{Group: policy.GroupVerdict, Version: "v1", Resource: "namespacedmutatingpolicies"}
	GeneratingPolicies                = schema.GroupVersionResource{Group: policy.GroupVerdict, Version: "v1", Resource: "generatingpolicies"}
	NamespacedGeneratingPolicies      = schema.GroupVersionResource{Group: policy.GroupVerdict, Version: "v1", Resource: "namespacedgeneratingpolicies"}
	ImageValidatingPolicies           = schema.GroupVersionResource{Group: policy.GroupVerdict, Version: "v1", Resource: "imagevalidatingpolicies"}
	NamespacedImageValidatingPolicies = schema.GroupVersionResource{Group: policy.GroupVerdict, Version: "v1", Resource: "namespacedimagevalidatingpolicies"}
)

// Problem is a policy or exception left out of the set, and why.
type Problem struct {
	Kind, Key string
	Err       error
}

// snapshot is one compiled state.
type snapshot struct {
	set      *engine.Set
	problems []Problem
	// byKey indexes the ClusterPolicies and Policies of set.Policies by
	// Key (Policy looks them up; a ValidatingPolicy may share a name).
	byKey map[string]*engine.Policy
	// byKind indexes the policies of the CEL kinds by kind/key (PolicyOf).
	byKind map[string]*engine.Policy
	// candidates are the compiled candidate policies
	// (policy.AnnotationCandidate): in no set, so nothing that admits,
	// configures webhooks, generates or scans sees them.
	candidates []*engine.Policy
}

// Cache is the informer-backed policy set.
type Cache struct {
	eng    *engine.Engine
	log    zerolog.Logger
	synced atomic.Bool
	snap   atomic.Pointer[snapshot]

	informers []cache.SharedIndexInformer
	// byResource indexes the informers by the resource they watch.
	byResource map[schema.GroupResource]cache.SharedIndexInformer
	nsLister   corelisters.NamespaceLister
	nsSynced   cache.InformerSynced

	dirty          chan struct{}
	changed        chan struct{}
	startFactories func(stop <-chan struct{})
	// addWatches adds the informers of the API's kinds: the required
	// ones, and the others the API server serves (before
	// startFactories).
	addWatches func()
	// api is where the policies are served (WithAPI).
	api API

	mu       sync.Mutex
	compiled map[string]compiledEntry // by kind/key, reused while resourceVersion holds

	// exceptions says which PolicyExceptions count and how far they
	// reach (WithExceptions).
	exceptions ExceptionConfig
	// native is set by WithNativePolicies.
	native bool

	// hmu guards informers and byResource while Start adds the optional
	// kinds, and onChange: the OnPolicyChange handlers, added to a
	// background kind's watch when it starts.
	hmu      sync.Mutex
	onChange []cache.ResourceEventHandler
}

type compiledEntry struct {
	rv  string
	pol *engine.Policy
	err error
}

// New builds a cache; Start runs it.
func New(eng *engine.Engine, dyn dynamic.Interface, kube kubernetes.Interface, log zerolog.Logger) *Cache {
	c := &Cache{
		eng:        eng,
		log:        log,
		dirty:      make(chan struct{}, 1),
		changed:    make(chan struct{}, 1),
		compiled:   map[string]compiledEntry{},
		byResource: map[schema.GroupResource]cache.SharedIndexInformer{},
		api:        VerdictAPI,
	}
	df := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 10*time.Minute)
	watch := func(gvr schema.GroupVersionResource) {
		inf := df.ForResource(gvr).Informer()
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { c.markDirty() },
			UpdateFunc: func(any, any) { c.markDirty() },
			DeleteFunc: func(any) { c.markDirty() },
		})
		c.hmu.Lock()
		defer c.hmu.Unlock()
		c.informers = append(c.informers, inf)
		c.byResource[gvr.GroupResource()] = inf
		if c.background(gvr) {
			for _, h := range c.onChange {
				_, _ = inf.AddEventHandler(h)
			}
		}
	}
	c.addWatches = func() {
		required, optional := c.api.watched()
		for _, gvr := range required {
			watch(gvr)
		}
		for _, gvr := range served(kube, optional, log) {
			watch(gvr)
		}
		if c.native {
			for _, gvr := range servedNative(kube, log) {
				watch(gvr)
			}
		}
	}
	kf := informers.NewSharedInformerFactory(kube, 10*time.Minute)
	nsInf := kf.Core().V1().Namespaces()
	c.nsLister = nsInf.Lister()
	c.nsSynced = nsInf.Informer().HasSynced
	c.startFactories = func(stop <-chan struct{}) {
		df.Start(stop)
		kf.Start(stop)
	}
	return c
}

// served returns the kinds of kinds the API server serves. When it
// cannot tell (discovery fails), every one is returned: the cache then
// waits for them as for the others, rather than start without policies
// that may exist.
func served(kube kubernetes.Interface, kinds []schema.GroupVersionResource, log zerolog.Logger) []schema.GroupVersionResource {
	byGV := map[schema.GroupVersion]map[string]bool{}
	var out []schema.GroupVersionResource
	for _, gvr := range kinds {
		gv := gvr.GroupVersion()
		names, ok := byGV[gv]
		if !ok {
			list, err := kube.Discovery().ServerResourcesForGroupVersion(gv.String())
			switch {
			case apierrors.IsNotFound(err):
				names = map[string]bool{}
			case err != nil:
				log.Warn().Err(err).Str(logkey.Resource, gv.String()).Msg("discovery of the policy kinds failed: waiting for every kind")
				names = nil
			default:
				names = map[string]bool{}
				for _, r := range list.APIResources {
					names[r.Name] = true
				}
			}
			byGV[gv] = names
		}
		if names == nil || names[gvr.Resource] {
			out = append(out, gvr)
			continue
		}
		log.Warn().Str(logkey.Resource, gvr.GroupResource().String()).Msg("policy kind not served (CRD not installed): not watched; install the CRDs of this version and restart")
	}
	return out
}

func (c *Cache) markDirty() {
	select {
	case c.dirty <- struct{}{}:
	default:
	}
}

// Start runs the informers and the rebuild loop until ctx ends. It returns
// once the first lists are in and the first set is built, or with ctx's
// error.
func (c *Cache) Start(ctx context.Context) error {
	c.addWatches()
	c.startFactories(ctx.Done())
	syncs := []cache.InformerSynced{c.nsSynced}
	for _, inf := range c.informers {
		syncs = append(syncs, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), syncs...) {
		return fmt.Errorf("%w: %w", ErrNotSynced, ctx.Err())
	}
	c.rebuild()
	c.synced.Store(true)
	go c.loop(ctx)
	return nil
}

// loop rebuilds after changes, coalescing bursts.
func (c *Cache) loop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.dirty:
		}
		// Let a burst of events settle into one rebuild.
		t := time.NewTimer(50 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		c.rebuild()
	}
}

// rebuild compiles the current objects into a new set; objects whose
// resourceVersion did not change keep their compiled form.
func (c *Cache) rebuild() {
	c.mu.Lock()
	defer c.mu.Unlock()
	var pols []*engine.Policy
	var excs []*policy.Exception
	var celExcs []*policy.CELException
	var problems []Problem
	seen := map[string]bool{}
	bindings, bindingVersions := c.nativeBindings()
	for _, inf := range c.informers {
		for _, obj := range inf.GetStore().List() {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			kind := u.GetKind()
			if isNativeBinding(kind) || u.GetLabels()[policy.LabelGeneratedFrom] != "" {
				// A binding is read with its policy (nativeBindings); a
				// ValidatingAdmissionPolicy generated from a
				// ValidatingPolicy is that policy, which is evaluated
				// itself.
				continue
			}
			key := u.GetName()
			if ns := u.GetNamespace(); ns != "" {
				key = ns + "/" + key
			}
			id := kind + "/" + key
			seen[id] = true
			if kind == policy.KindPolicyException && policy.IsCELException(u.Object) {
				// The CEL shape (policyRefs): compiled into the CEL
				// policies it names, below.
				clusterWide, err := c.exceptions.Admit(u.GetNamespace())
				var e *policy.CELException
				if err == nil {
					e, err = policy.CELExceptionFromObject(u.Object)
				}
				if err == nil {
					err = c.eng.CheckCELException(e)
				}
				if err != nil {
					problems = append(problems, c.exceptionLeftOut(kind, key, err))
					continue
				}
				e.ClusterWide = clusterWide
				celExcs = append(celExcs, e)
				continue
			}
			if kind == policy.KindPolicyException {
				clusterWide, err := c.exceptions.Admit(u.GetNamespace())
				var e *policy.Exception
				if err == nil {
					e, err = policy.ExceptionFromObject(u.Object)
				}
				if err != nil {
					problems = append(problems, c.exceptionLeftOut(kind, key, err))
					continue
				}
				e.ClusterWide = clusterWide
				excs = append(excs, e)
				continue
			}
			rv := u.GetResourceVersion()
			native := kind == policy.KindValidatingAdmissionPolicy || kind == policy.KindMutatingAdmissionPolicy
			if native {
				rv += ";" + bindingVersions[id]
			}
			entry, ok := c.compiled[id]
			if !ok || entry.rv != rv {
				entry = compiledEntry{rv: rv}
				var p *policy.Policy
				var err error
				if native {
					p, err = nativePolicy(u.Object, bindings[id])
				} else {
					p, err = policyFromObject(u.Object)
				}
				if err == nil {
					entry.pol, err = c.eng.Compile(p)
				}
				entry.err = err
				c.compiled[id] = entry
				if err != nil {
					c.log.Warn().Err(err).Str(logkey.Policy, id).Msg("policy left out: it does not compile")
				}
			}
			if entry.err != nil {
				problems = append(problems, Problem{Kind: kind, Key: key, Err: entry.err})
				continue
			}
			pols = append(pols, entry.pol)
		}
	}
	for id := range c.compiled {
		if !seen[id] {
			delete(c.compiled, id)
		}
	}
	if len(celExcs) > 0 {
		for i, p := range pols {
			// The exceptions compile (CheckCELException above).
			if wp, err := c.eng.WithCELExceptions(p, celExcs); err == nil {
				pols[i] = wp
			}
		}
	}
	// Candidates never take part in admission: they are kept apart from
	// the set, for the reporter (Candidates).
	var candidates []*engine.Policy
	pols = slices.DeleteFunc(pols, func(p *engine.Policy) bool {
		if p.Raw.Candidate() {
			candidates = append(candidates, p)
			return true
		}
		return false
	})
	// A stable order: the evaluation order of mutations depends on it.
	sort.Slice(pols, func(i, j int) bool {
		if ki, kj := pols[i].Raw.Key(), pols[j].Raw.Key(); ki != kj {
			return ki < kj
		}
		return pols[i].Raw.Kind < pols[j].Raw.Kind // a ValidatingPolicy may share a name
	})
	engine.OrderForImageEvidence(pols)
	sort.Slice(excs, func(i, j int) bool {
		return excs[i].Metadata.Namespace+"/"+excs[i].Metadata.Name < excs[j].Metadata.Namespace+"/"+excs[j].Metadata.Name
	})
	byKey := make(map[string]*engine.Policy, len(pols))
	byKind := map[string]*engine.Policy{}
	for _, p := range pols {
		if p.Raw.Kind == policy.KindClusterPolicy || p.Raw.Kind == policy.KindPolicy {
			byKey[p.Raw.Key()] = p
		} else {
			byKind[p.Raw.Kind+"/"+p.Raw.Key()] = p
		}
	}
	sort.Slice(candidates, func(i, j int) bool {
		return candidates[i].Raw.Kind+"/"+candidates[i].Raw.Key() < candidates[j].Raw.Kind+"/"+candidates[j].Raw.Key()
	})
	c.snap.Store(&snapshot{set: &engine.Set{Policies: pols, Exceptions: excs}, problems: problems, byKey: byKey, byKind: byKind, candidates: candidates})
	select {
	case c.changed <- struct{}{}:
	default:
	}
}

// exceptionLeftOut is the Problem of an exception left out of the set,
// logged; one the configuration leaves out is logged too, at each
// rebuild, so an exception that silently stopped counting is seen.
func (c *Cache) exceptionLeftOut(kind, key string, err error) Problem {
	c.log.Warn().Err(err).Str(logkey.Exception, key).Msg("exception left out")
	return Problem{Kind: kind, Key: key, Err: err}
}

// Set returns the current compiled set.
func (c *Cache) Set(context.Context) (*engine.Set, error) {
	s := c.snap.Load()
	if s == nil || !c.synced.Load() {
		return nil, ErrNotSynced
	}
	return s.set, nil
}

// Policies returns the current compiled policies (registrar.PolicySource).
func (c *Cache) Policies() []*engine.Policy {
	s := c.snap.Load()
	if s == nil {
		return nil
	}
	return s.set.Policies
}

// Candidates returns the compiled candidate policies
// (policy.AnnotationCandidate), which Set and Policies leave out.
func (c *Cache) Candidates() []*engine.Policy {
	s := c.snap.Load()
	if s == nil || !c.synced.Load() {
		return nil
	}
	return s.candidates
}

// Policy is the compiled policy of key ("name" for a ClusterPolicy,
// "namespace/name" for a Policy) as the cache holds it, or nil (not
// synced, no such policy, or one that does not compile).
//
// The compiled set is rebuilt a moment after the watch delivers a change;
// the policy is returned only while the watch's store still holds it at
// the compiled version, so a policy deleted or changed is not served
// from the set in between.
func (c *Cache) Policy(key string) *engine.Policy {
	s := c.snap.Load()
	if s == nil || !c.synced.Load() {
		return nil
	}
	p := s.byKey[key]
	if p == nil {
		return nil
	}
	kind := policy.KindClusterPolicy
	if strings.Contains(key, "/") {
		kind = policy.KindPolicy
	}
	return stored(c.informer(kind), key, p)
}

// stored is p when the watch's store still holds its object at p's
// version (the compiled set lags the watch by a rebuild), else nil.
func stored(inf cache.SharedIndexInformer, key string, p *engine.Policy) *engine.Policy {
	if inf == nil || p == nil {
		return nil
	}
	obj, ok, err := inf.GetStore().GetByKey(key)
	if err != nil || !ok {
		return nil
	}
	if u, isU := obj.(*unstructured.Unstructured); !isU || u.GetResourceVersion() != p.Raw.Metadata.ResourceVersion {
		return nil
	}
	return p
}

// PolicyOf is Policy for a policy of any kind: kind empty (or
// ClusterPolicy, Policy) is Policy(key); a CEL kind (GeneratingPolicy,
// ...) is looked up by kind and key, on the same terms.
func (c *Cache) PolicyOf(kind, key string) *engine.Policy {
	if kind == "" || kind == policy.KindClusterPolicy || kind == policy.KindPolicy {
		return c.Policy(key)
	}
	s := c.snap.Load()
	if s == nil || !c.synced.Load() {
		return nil
	}
	return stored(c.informer(kind), key, s.byKind[kind+"/"+key])
}

// informer is the watch of a policy kind, or nil.
func (c *Cache) informer(kind string) cache.SharedIndexInformer {
	gvr, ok := c.api.Resource(kind)
	if !ok {
		return nil
	}
	c.hmu.Lock()
	defer c.hmu.Unlock()
	return c.byResource[gvr.GroupResource()]
}

// WithAPI sets where the policies are served (before Start): VerdictAPI
// unless set.
func (c *Cache) WithAPI(a API) *Cache {
	c.api = a.orDefault()
	return c
}

// API is where the cache reads the policies.
func (c *Cache) API() API { return c.api }

// backgroundKinds are the policy kinds whose rules act in the
// background (generate, mutate-existing): OnPolicyChange's.
var backgroundKinds = []string{policy.KindClusterPolicy, policy.KindPolicy, policy.KindGeneratingPolicy, policy.KindNamespacedGeneratingPolicy}

// background reports whether gvr is the resource of one of the
// backgroundKinds.
func (c *Cache) background(gvr schema.GroupVersionResource) bool {
	for _, kind := range backgroundKinds {
		if g, ok := c.api.Resource(kind); ok && g == gvr {
			return true
		}
	}
	return false
}

// OnPolicyChange registers h on the watches of the kinds whose rules act
// in the background: ClusterPolicies, Policies and the GeneratingPolicy
// kinds the API server serves (before or after Start, whose discovery
// adds the optional kinds: a handler added later first sees every stored
// policy as added).
func (c *Cache) OnPolicyChange(h cache.ResourceEventHandler) error {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	c.onChange = append(c.onChange, h)
	for _, kind := range backgroundKinds {
		gvr, _ := c.api.Resource(kind)
		if inf := c.byResource[gvr.GroupResource()]; inf != nil {
			if _, err := inf.AddEventHandler(h); err != nil {
				return err
			}
		}
	}
	return nil
}

// Changed is signalled after each rebuild (registrar.PolicySource).
func (c *Cache) Changed() <-chan struct{} { return c.changed }

// Problems lists what the last rebuild left out.
func (c *Cache) Problems() []Problem {
	s := c.snap.Load()
	if s == nil {
		return nil
	}
	return s.problems
}

// Namespace returns a Namespace as the watch holds it (false when it
// does not, or the cache has not synced).
func (c *Cache) Namespace(name string) (*corev1.Namespace, bool) {
	if !c.synced.Load() {
		return nil, false
	}
	ns, err := c.nsLister.Get(name)
	if err != nil {
		return nil, false
	}
	return ns, true
}

// NamespaceLabels returns a namespace's labels from the informer.
func (c *Cache) NamespaceLabels(_ context.Context, name string) (map[string]string, error) {
	if name == "" {
		return nil, nil
	}
	ns, err := c.nsLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil // an unknown namespace has no labels
	}
	if err != nil {
		return nil, err
	}
	return ns.Labels, nil
}

// NamespaceObject returns a Namespace from the watch as JSON values
// (nil for an unknown one), for CEL's namespaceObject.
func (c *Cache) NamespaceObject(_ context.Context, name string) (map[string]any, error) {
	if name == "" {
		return nil, nil
	}
	ns, err := c.nsLister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(ns)
	if err != nil {
		return nil, err
	}
	v, err := document.Decode(b)
	if err != nil {
		return nil, err
	}
	m, _ := v.(map[string]any)
	return m, nil
}

// policyFromObject converts a stored policy of any kind the cache watches.
func policyFromObject(obj map[string]any) (*policy.Policy, error) {
	return policy.FromObject(obj)
}
