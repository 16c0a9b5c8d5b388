package cleaner

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// keepTTLSchedule puts the TTL sweep's schedule (every TTL interval),
// retrying until it is there or ctx ends. Every replica puts the same
// one: the first creates it, the others find it unchanged.
func (c *Cleaner) keepTTLSchedule(ctx context.Context) {
	data, _ := json.Marshal(Tick{Action: TickTTL})
	s := queue.Schedule{Kind: queue.WorkCleanup, Key: TTLKey, Spec: "@every " + c.o.ttlInterval.String(), Data: data}
	retry(ctx, func() error {
		ch, err := c.conn.PutSchedule(ctx, s, nil)
		if err != nil {
			c.m.schedules.WithLabelValues("failed").Inc()
			c.o.log.Warn().Err(err).Msg("ttlScheduleNotSet")
			return err
		}
		c.m.schedules.WithLabelValues(string(ch)).Inc()
		c.o.log.Info().Str(logKeyChange, string(ch)).Str("schedule", s.Spec).Msg("ttlScheduleSet")
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

// keepSchedules watches the cleanup policies and keeps one schedule per
// policy: created when the policy is, replaced when its schedule or
// spec changes, removed when it is deleted (or does not parse). Every
// replica does it at once: the writes are idempotent and compare before
// they replace, and a schedule made from a newer generation of the same
// policy is never replaced by an older one. At start-up, once the
// policies are listed, every stored schedule is checked too (a policy
// deleted while no cleaner ran loses its schedule).
func (c *Cleaner) keepSchedules(ctx context.Context) {
	q := workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](time.Second, time.Minute),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "cleanup-schedules"},
	)
	defer q.ShutDown()
	factory := dynamicinformer.NewDynamicSharedInformerFactory(c.dyn, c.o.resync)
	informers := map[string]cache.SharedIndexInformer{}
	for kind, gvr := range map[string]schema.GroupVersionResource{policy.KindClusterCleanupPolicy: ClusterCleanupPolicies, policy.KindCleanupPolicy: CleanupPolicies} {
		inf := factory.ForResource(gvr).Informer()
		enqueue := func(obj any) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				q.Add(policyKey(kind, u.GetNamespace(), u.GetName()))
				return
			}
			if ts, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				if u, ok := ts.Obj.(*unstructured.Unstructured); ok {
					q.Add(policyKey(kind, u.GetNamespace(), u.GetName()))
				}
			}
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    enqueue,
			UpdateFunc: func(_, obj any) { enqueue(obj) },
			DeleteFunc: enqueue,
		}); err != nil {
			c.o.log.Error().Err(err).Msg("cleanupPolicyWatchFailed")
			return
		}
		informers[kind] = inf
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	synced := make([]cache.InformerSynced, 0, len(informers))
	for _, inf := range informers {
		synced = append(synced, inf.HasSynced)
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return
	}
	c.o.log.Info().Msg("cleanupPoliciesSynced")
	// Stored schedules of policies this replica does not know: each key
	// is reconciled (removed when its policy is gone).
	go retry(ctx, func() error {
		list, err := c.conn.Schedules(ctx, queue.WorkCleanup)
		if err != nil {
			c.o.log.Warn().Err(err).Msg("cleanupSchedulesNotListed")
			return err
		}
		for _, s := range list {
			if ref := policyOfSchedule(s); ref != nil {
				q.Add(ref.ScheduleKey())
			}
		}
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
		if err := c.reconcileSchedule(ctx, informers, key); err != nil && ctx.Err() == nil {
			c.o.log.Warn().Err(err).Str(logKeyPolicy, key).Msg("cleanupScheduleRetried")
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

// reconcileSchedule makes the schedule of the policy key ("Kind/name" or
// "Kind/namespace/name") what the policy, as this replica's cache holds
// it, says.
func (c *Cleaner) reconcileSchedule(ctx context.Context, informers map[string]cache.SharedIndexInformer, key string) error {
	kind, cacheKey, _ := strings.Cut(key, "/")
	inf, ok := informers[kind]
	if !ok {
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
			c.o.log.Warn().Err(err).Str(logKeyPolicy, key).Msg("cleanupPolicyInvalid")
			exists = false
		}
	}
	if !exists {
		removed, err := c.conn.DeleteSchedule(ctx, queue.WorkCleanup, key, nil)
		if err != nil {
			c.m.schedules.WithLabelValues("failed").Inc()
			return err
		}
		if removed {
			c.m.schedules.WithLabelValues("deleted").Inc()
			c.o.log.Info().Str(logKeyPolicy, key).Msg("cleanupScheduleDeleted")
		}
		return nil
	}
	s, err := PolicySchedule(p)
	if err != nil {
		c.m.schedules.WithLabelValues("rejected").Inc()
		c.o.log.Warn().Err(err).Str(logKeyPolicy, key).Msg("cleanupScheduleRejected")
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
		c.o.log.Warn().Err(err).Str(logKeyPolicy, key).Msg("cleanupScheduleRejected")
		ref := RefOf(p)
		c.recordEvent(ctx, ref, nil, errors.New("the schedule cannot be set: "+err.Error()))
		return nil
	case err != nil:
		c.m.schedules.WithLabelValues("failed").Inc()
		return err
	}
	c.m.schedules.WithLabelValues(string(ch)).Inc()
	if ch != queue.ScheduleUnchanged {
		c.o.log.Info().Str(logKeyPolicy, key).Str(logKeyChange, string(ch)).Str("schedule", s.Spec).Str("timeZone", s.TimeZone).Msg("cleanupScheduleSet")
	}
	return nil
}

// removeSchedule removes the schedule of a policy that is gone (the
// tick's own word is enough for that: the schedule goes only if it still
// names the policy the tick was made for).
func (c *Cleaner) removeSchedule(ctx context.Context, ref PolicyRef) {
	removed, err := c.conn.DeleteSchedule(ctx, queue.WorkCleanup, ref.ScheduleKey(), func(cur queue.Schedule) bool {
		r := policyOfSchedule(cur)
		return r != nil && r.UID == ref.UID
	})
	switch {
	case err != nil:
		c.m.schedules.WithLabelValues("failed").Inc()
		c.o.log.Warn().Err(err).Str(logKeyPolicy, ref.ScheduleKey()).Msg("cleanupScheduleNotDeleted")
	case removed:
		c.m.schedules.WithLabelValues("deleted").Inc()
		c.o.log.Info().Str(logKeyPolicy, ref.ScheduleKey()).Msg("cleanupScheduleDeleted")
	}
}
