package cleaner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// keepTTLSchedule puts the TTL sweep's schedule (every TTL interval),
// retrying until it is there or ctx ends. Every replica puts the same
// one: the first creates it, the others find it unchanged.
func (c *Cleaner) keepTTLSchedule(ctx context.Context) {
	data, _ := json.Marshal(Tick{Action: TickTTL})
	s := queue.Schedule{Kind: bus.WorkCleanup, Key: TTLKey, Spec: "@every " + c.o.ttlInterval.String(), Data: data}
	retry(ctx, func() error {
		ch, err := c.conn.PutSchedule(ctx, s, nil)
		if err != nil {
			c.m.schedules.WithLabelValues("failed").Inc()
			c.o.log.Warn().Err(err).Msg("ttlScheduleNotSet")
			return err
		}
		c.m.schedules.WithLabelValues(string(ch)).Inc()
		c.o.log.Info().Str(logkey.Change, string(ch)).Str(logkey.Schedule, s.Spec).Msg("ttlScheduleSet")
		return nil
	})
}

// retry runs fn until it succeeds or ctx ends, with backoff from 1 s to
// 1 m.
func retry(ctx context.Context, fn func() error) {
	delay := time.Second
	for fn() != nil {
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		delay = min(2*delay, time.Minute)
	}
}

// keepSchedules watches the cleanup and deleting policies and keeps one
// schedule per policy: created when the policy is, replaced when its
// schedule or spec changes, removed when it is deleted (or does not
// parse). Every replica does it at once: the writes are idempotent and
// compare before they replace, and a schedule made from a newer
// generation of the same policy is never replaced by an older one. At
// start-up, once the policies are listed, every stored schedule is
// checked too (a policy deleted while no cleaner ran loses its
// schedule). The kinds a cluster may not serve yet (DeletingPolicy,
// NamespacedDeletingPolicy: CRDs older than this cleaner) are watched
// once discovery says they are served (watchOptional), never waited for.
func (c *Cleaner) keepSchedules(ctx context.Context) {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "cleanup-schedules"},
	)
	defer q.ShutDown()
	factory := dynamicinformer.NewDynamicSharedInformerFactory(c.dyn, c.o.resync)
	defer factory.Shutdown()
	w := &policyWatch{q: q, factory: factory, informers: map[string]cache.SharedIndexInformer{}}
	synced := []cache.InformerSynced{}
	for kind := range policyKinds {
		if c.optional(kind) {
			continue
		}
		inf, err := w.watch(kind, c.o.api.MustResource(kind))
		if err != nil {
			c.o.log.Error().Err(err).Msg("cleanupPolicyWatchFailed")
			return
		}
		synced = append(synced, inf.HasSynced)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	c.o.log.Info().Msg("cleanupPoliciesSynced")
	go c.watchOptional(ctx, w)
	// Stored schedules of policies this replica does not know: each key
	// is reconciled (removed when its policy is gone).
	go retry(ctx, func() error {
		list, err := c.conn.Schedules(ctx, bus.WorkCleanup)
		if err != nil {
			c.o.log.Warn().Err(err).Msg("cleanupSchedulesNotListed")
			return err
		}
		for _, s := range list {
			if ref := policyOfSchedule(s); ref != nil {
				q.Add(ref.ScheduleKey())
			}
		}
		// From here on, a schedule put without a policy this replica
		// knows is left to its own tick (runPolicy removes it when the
		// policy is gone) and to the policies' events.
		c.o.log.Info().Int(logkey.Schedules, len(list)).Msg("cleanupSchedulesListed")
		return nil
	})
	go func() {
		<-ctx.Done()
		q.ShutDown()
	}()
	for {
		key, quit := q.Get()
		if quit {
			return
		}
		if err := c.reconcileSchedule(ctx, w, key); err != nil && ctx.Err() == nil {
			c.o.log.Warn().Err(err).Str(logkey.Policy, key).Msg("cleanupScheduleRetried")
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

// policyWatch is the informers of the policy kinds watched, by kind;
// optional kinds are added while the schedules are kept.
type policyWatch struct {
	q       workqueue.TypedRateLimitingInterface[string]
	factory dynamicinformer.DynamicSharedInformerFactory

	mu        sync.RWMutex
	informers map[string]cache.SharedIndexInformer
}

// watch makes the informer of one kind, whose events enqueue the
// policies' keys (started by the factory's next Start).
func (w *policyWatch) watch(kind string, gvr schema.GroupVersionResource) (cache.SharedIndexInformer, error) {
	inf := w.factory.ForResource(gvr).Informer()
	enqueue := func(obj any) {
		if ts, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = ts.Obj
		}
		if u, ok := obj.(*unstructured.Unstructured); ok {
			w.q.Add(policyKey(kind, u.GetNamespace(), u.GetName()))
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
		DeleteFunc: enqueue,
	}); err != nil {
		return nil, fmt.Errorf("watch %s: %w", gvr.Resource, err)
	}
	w.mu.Lock()
	w.informers[kind] = inf
	w.mu.Unlock()
	return inf, nil
}

// informer is the informer of kind (nil: not watched).
func (w *policyWatch) informer(kind string) cache.SharedIndexInformer {
	w.mu.RLock()
	defer w.mu.RUnlock()
	return w.informers[kind]
}

// watchOptional watches each optional policy kind once the API server
// serves it: at once when it does, or when its CRD is installed (asked
// again every resync, or sooner while discovery fails). A kind that is
// not served is logged once, as a warning: the cleaner runs the other
// kinds meanwhile, and is no less ready for it.
func (c *Cleaner) watchOptional(ctx context.Context, w *policyWatch) {
	warned := map[string]bool{}
	delay := time.Second
	for {
		served, err := c.servedKinds()
		missing := 0
		switch {
		case err != nil:
			c.o.log.Warn().Err(err).Msg("policyKindsNotDiscovered")
		default:
			for kind := range policyKinds {
				if !c.optional(kind) || w.informer(kind) != nil {
					continue
				}
				gvr := c.o.api.MustResource(kind)
				if !served[gvr] {
					missing++
					if !warned[kind] {
						warned[kind] = true
						c.o.log.Warn().Str(logkey.Kind, kind).Str(logkey.Resource, gvr.String()).
							Str(logkey.Detail, "the API server does not serve this kind (its CRD is not installed): its policies are not run until it is").
							Msg("policyKindNotServed")
					}
					continue
				}
				inf, err := w.watch(kind, gvr)
				if err != nil {
					c.o.log.Error().Err(err).Msg("cleanupPolicyWatchFailed")
					continue
				}
				w.factory.Start(ctx.Done())
				c.o.log.Info().Str(logkey.Kind, kind).Str(logkey.Resource, gvr.String()).Msg("policyKindWatched")
				go func() {
					if cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
						c.o.log.Info().Str(logkey.Kind, kind).Msg("cleanupPoliciesSynced")
					}
				}()
			}
		}
		next := c.o.resync
		if err != nil {
			next, delay = delay, min(2*delay, time.Minute)
		} else if missing == 0 {
			return
		}
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// servedResources are the resources the API server serves in gv (none
// when it serves no such group version).
// optional reports whether a kind is watched only once served: the
// deleting policies in Verdict's group (CRDs newer than some
// installations), every kind in Kyverno's (the cluster's CRDs, which a
// Kyverno release may have removed).
func (c *Cleaner) optional(kind string) bool {
	return policyKinds[kind].optional || c.o.api.Name == policycache.APIKyverno
}

// servedKinds are the resources of the policy kinds the API server
// serves.
func (c *Cleaner) servedKinds() (map[schema.GroupVersionResource]bool, error) {
	out := map[schema.GroupVersionResource]bool{}
	byGV := map[schema.GroupVersion]map[string]bool{}
	for kind := range policyKinds {
		gvr := c.o.api.MustResource(kind)
		served, ok := byGV[gvr.GroupVersion()]
		if !ok {
			var err error
			if served, err = servedResources(c.disc, gvr.GroupVersion()); err != nil {
				return nil, err
			}
			byGV[gvr.GroupVersion()] = served
		}
		if served[gvr.Resource] {
			out[gvr] = true
		}
	}
	return out, nil
}

func servedResources(disc discovery.DiscoveryInterface, gv schema.GroupVersion) (map[string]bool, error) {
	list, err := disc.ServerResourcesForGroupVersion(gv.String())
	switch {
	case apierrors.IsNotFound(err):
		return map[string]bool{}, nil
	case err != nil:
		return nil, fmt.Errorf("discover %s: %w", gv, err)
	}
	out := make(map[string]bool, len(list.APIResources))
	for _, r := range list.APIResources {
		out[r.Name] = true
	}
	return out, nil
}

// reconcileSchedule makes the schedule of the policy key ("Kind/name" or
// "Kind/namespace/name") what the policy, as this replica's cache holds
// it, says.
func (c *Cleaner) reconcileSchedule(ctx context.Context, w *policyWatch, key string) error {
	kind, cacheKey, _ := strings.Cut(key, "/")
	inf := w.informer(kind)
	if inf == nil {
		// A kind not watched (yet): its schedules are kept; a tick of a
		// policy that is gone removes its own.
		return nil
	}
	if !inf.HasSynced() {
		// A kind just watched: its cache is not full yet, and a policy
		// missing from it may only be still to come.
		w.q.AddAfter(key, time.Second)
		return nil
	}
	obj, exists, err := inf.GetStore().GetByKey(cacheKey)
	if err != nil {
		return err
	}
	var p *policy.CleanupPolicy
	if exists {
		u, _ := obj.(*unstructured.Unstructured)
		if u == nil || u.GetDeletionTimestamp() != nil {
			exists = false
		} else if p, err = policy.CleanupPolicyFromObject(u.Object); err != nil {
			c.o.log.Warn().Err(err).Str(logkey.Policy, key).Msg("cleanupPolicyInvalid")
			exists = false
		}
	}
	if !exists {
		removed, err := c.conn.DeleteSchedule(ctx, bus.WorkCleanup, key, nil)
		if err != nil {
			c.m.schedules.WithLabelValues("failed").Inc()
			return err
		}
		if removed {
			c.m.schedules.WithLabelValues("deleted").Inc()
			c.o.log.Info().Str(logkey.Policy, key).Msg("cleanupScheduleDeleted")
		}
		return nil
	}
	s, err := PolicySchedule(p)
	if err != nil {
		c.m.schedules.WithLabelValues("rejected").Inc()
		c.o.log.Warn().Err(err).Str(logkey.Policy, key).Msg("cleanupScheduleRejected")
		return nil
	}
	uid, gen := p.Metadata.UID, p.Metadata.Generation
	ch, err := c.conn.PutSchedule(ctx, s, func(cur queue.Schedule) bool {
		// Keep a schedule made from a newer generation of this policy
		// (another replica saw it first).
		ref := policyOfSchedule(cur)
		return ref != nil && ref.UID == uid && ref.Generation > gen
	})
	switch {
	case errors.Is(err, queue.ErrPublishRejected):
		c.m.schedules.WithLabelValues("rejected").Inc()
		c.o.log.Warn().Err(err).Str(logkey.Policy, key).Msg("cleanupScheduleRejected")
		ref := RefOf(p)
		c.recordEvent(ctx, ref, nil, errors.New("the schedule cannot be set: "+err.Error()))
		return nil
	case err != nil:
		c.m.schedules.WithLabelValues("failed").Inc()
		return err
	}
	c.m.schedules.WithLabelValues(string(ch)).Inc()
	if ch != queue.ScheduleUnchanged {
		c.o.log.Info().Str(logkey.Policy, key).Str(logkey.Change, string(ch)).Str(logkey.Schedule, s.Spec).Str(logkey.TimeZone, s.TimeZone).Msg("cleanupScheduleSet")
	}
	return nil
}

// removeSchedule removes the schedule of a policy that is gone (the
// tick's own word is enough for that: the schedule goes only if it still
// names the policy the tick was made for).
func (c *Cleaner) removeSchedule(ctx context.Context, ref PolicyRef) {
	removed, err := c.conn.DeleteSchedule(ctx, bus.WorkCleanup, ref.ScheduleKey(), func(cur queue.Schedule) bool {
		r := policyOfSchedule(cur)
		return r != nil && r.UID == ref.UID
	})
	switch {
	case err != nil:
		c.m.schedules.WithLabelValues("failed").Inc()
		c.o.log.Warn().Err(err).Str(logkey.Policy, ref.ScheduleKey()).Msg("cleanupScheduleNotDeleted")
	case removed:
		c.m.schedules.WithLabelValues("deleted").Inc()
		c.o.log.Info().Str(logkey.Policy, ref.ScheduleKey()).Msg("cleanupScheduleDeleted")
	}
}
