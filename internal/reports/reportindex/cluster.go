package reportindex

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/tools/cache"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
)

// Cluster checks results against the API server as verify.Checker does,
// but from watches instead of one GET per resource: the first result of
// a kind starts a metadata watch of that kind (list, then follow; only
// name, namespace, uid and resourceVersion are kept), and every check is
// a lookup in it. A replica folding 100,000 resources' results lists
// each kind once rather than getting each object; and the watch tells
// of deletions, which the stream does not (WithGone).
//
// A watch lags the API server a little, so what the lookup cannot
// confirm is Pending within the grace period (counted from when the
// stream stored the message) and only then a final no: NotFound, an
// object of another uid (UIDMismatch), a resourceVersion the object has
// not reached (Future). A kind the API server does not serve is Pending,
// then NotFound. A reference that names no object is Invalid at once.
type Cluster struct {
	meta   metadata.Interface
	mapper meta.RESTMapper
	grace  time.Duration
	now    func() time.Time
	gone   func(uid string)
	// ctx bounds the watches.
	ctx context.Context

	mu    sync.Mutex
	kinds map[schema.GroupVersionResource]*kindWatch
	// seen is signalled (without blocking) whenever a watch adds or
	// changes an object.
	seen chan struct{}
}

// kindWatch is one kind's watch.
type kindWatch struct {
	inf    cache.SharedIndexInformer
	synced chan struct{}
	// refused is closed, with err set, when the API server refuses the
	// watch's list (RBAC): the kind cannot be checked until the right is
	// granted (the informer keeps trying, and synced closes then).
	refused chan struct{}
	once    sync.Once
	err     error
}

func (kw *kindWatch) refuse(err error) {
	kw.once.Do(func() {
		kw.err = err
		close(kw.refused)
	})
}

// ClusterOption configures a Cluster.
type ClusterOption func(*Cluster)

// WithClusterGrace sets how long a result may wait for its object to be
// seen (default 30 s, as verify's).
func WithClusterGrace(d time.Duration) ClusterOption {
	return func(c *Cluster) { c.grace = d }
}

// WithGone calls fn with the uid of each watched object deleted: the
// index forgets it, so that its report disappears at once.
func WithGone(fn func(uid string)) ClusterOption {
	return func(c *Cluster) { c.gone = fn }
}

// NewCluster returns a Cluster whose watches run until ctx ends.
func NewCluster(ctx context.Context, client metadata.Interface, mapper meta.RESTMapper, opts ...ClusterOption) *Cluster {
	c := &Cluster{meta: client, mapper: mapper, grace: 30 * time.Second, now: time.Now, ctx: ctx, kinds: map[schema.GroupVersionResource]*kindWatch{}, seen: make(chan struct{}, 1)}
	for _, o := range opts {
		o(c)
	}
	return c
}

var (
	_ Checker = (*Cluster)(nil)
	_ seer    = (*Cluster)(nil)
)

// Seen is signalled whenever a watch has added or changed an object: a
// result waiting for it can be confirmed now rather than at its retry.
func (c *Cluster) Seen() <-chan struct{} { return c.seen }

func (c *Cluster) signalSeen() {
	select {
	case c.seen <- struct{}{}:
	default:
	}
}

// Check says whether ref names an object the API server has, with its
// uid, at its resourceVersion or later. An error means the kind's watch
// could not be started or synced in time (ctx): ask again; one wrapping
// verify.ErrForbidden, that the API server refuses the watch (RBAC).
func (c *Cluster) Check(ctx context.Context, ref bus.ResourceRef, stored time.Time) (apicheck.Status, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || ref.UID == "" || ref.APIVersion == "" || ref.Kind == "" || ref.Name == "" {
		return apicheck.Invalid, nil
	}
	late := func(final apicheck.Status) apicheck.Status {
		if c.now().Sub(stored) < c.grace {
			return apicheck.Pending
		}
		return final
	}
	m, err := c.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
	if meta.IsNoMatchError(err) {
		return late(apicheck.NotFound), nil
	}
	if err != nil {
		return "", fmt.Errorf("kind %s %s: %w", ref.APIVersion, ref.Kind, err)
	}
	namespaced := m.Scope.Name() == meta.RESTScopeNameNamespace
	if namespaced != (ref.Namespace != "") {
		return apicheck.Invalid, nil
	}
	kw, err := c.watch(ctx, m.Resource)
	if err != nil {
		return "", err
	}
	key := ref.Name
	if namespaced {
		key = ref.Namespace + "/" + ref.Name
	}
	item, found, err := kw.inf.GetStore().GetByKey(key)
	if err != nil {
		return "", err
	}
	o, _ := item.(*metav1.PartialObjectMetadata)
	switch {
	case !found || o == nil:
		return late(apicheck.NotFound), nil
	case string(o.UID) != ref.UID:
		return late(apicheck.UIDMismatch), nil
	case apicheck.Newer(ref.ResourceVersion, o.ResourceVersion):
		return late(apicheck.Future), nil
	}
	return apicheck.Verified, nil
}

// RetryIn is how long to wait before checking a Pending result again: a
// second, and not past the grace period's end by much.
func (c *Cluster) RetryIn(stored time.Time) time.Duration {
	left := c.grace - c.now().Sub(stored) + 100*time.Millisecond
	return max(min(time.Second, left), 100*time.Millisecond)
}

// watch returns the kind's watch, started and synced (waiting within
// ctx for a new one).
func (c *Cluster) watch(ctx context.Context, gvr schema.GroupVersionResource) (*kindWatch, error) {
	c.mu.Lock()
	kw := c.kinds[gvr]
	if kw == nil {
		kw = c.start(gvr)
		c.kinds[gvr] = kw
	}
	c.mu.Unlock()
	select {
	case <-kw.synced:
		return kw, nil
	default:
	}
	select {
	case <-kw.synced:
		return kw, nil
	case <-kw.refused:
		return nil, fmt.Errorf("%w: watch of %s: %w", apicheck.ErrForbidden, gvr, kw.err)
	case <-ctx.Done():
		return nil, fmt.Errorf("watch of %s not synced: %w", gvr, ctx.Err())
	case <-c.ctx.Done():
		return nil, fmt.Errorf("watch of %s: %w", gvr, c.ctx.Err())
	}
}

// start starts a metadata watch of gvr that keeps only what checks read.
func (c *Cluster) start(gvr schema.GroupVersionResource) *kindWatch {
	inf := metadatainformer.NewFilteredMetadataInformer(c.meta, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	_ = inf.SetTransform(func(obj any) (any, error) {
		if o, ok := obj.(*metav1.PartialObjectMetadata); ok {
			return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
				Name: o.Name, Namespace: o.Namespace, UID: o.UID, ResourceVersion: o.ResourceVersion,
			}}, nil
		}
		return obj, nil
	})
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { c.signalSeen() },
		UpdateFunc: func(any, any) { c.signalSeen() },
	})
	if c.gone != nil {
		_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if o, ok := obj.(*metav1.PartialObjectMetadata); ok {
				c.gone(string(o.UID))
			}
		}})
	}
	kw := &kindWatch{inf: inf, synced: make(chan struct{}), refused: make(chan struct{})}
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		if apierrors.IsForbidden(err) {
			kw.refuse(err)
		}
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
	go inf.Run(c.ctx.Done())
	go func() {
		if cache.WaitForCacheSync(c.ctx.Done(), inf.HasSynced) {
			close(kw.synced)
		}
	}()
	return kw
}
