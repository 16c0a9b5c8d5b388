package generator

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// Watch events, the event label of verdict_generator_watch_events_total.
const (
	WatchDownstreamChanged = "downstreamChanged"
	WatchDownstreamDeleted = "downstreamDeleted"
	WatchPolicyChanged     = "policyChanged"
	WatchPolicyDeleted     = "policyDeleted"
)

// Watcher turns changes in the cluster into work items, in every
// generator replica (no leader): a policy created or changed becomes a
// WorkPolicyChanged item per rule that reacts to it (a synchronized
// generate rule with data, generateExisting, mutateExistingOnPolicyUpdate);
// a policy deleted, or a synchronized rule removed from it, a
// WorkPolicyDeleted item per such rule (unless
// orphanDownstreamOnPolicyDelete); a generated resource changed by someone
// else, or deleted, an apply item for its trigger (cause drift). Item ids
// are deterministic, so the same change seen by every replica is queued
// once; a publish that fails is tried again until it succeeds.
type Watcher struct {
	conn   *queue.Conn
	dyn    dynamic.Interface
	mapper meta.RESTMapper
	m      *Metrics
	log    zerolog.Logger

	pc         *policycache.Cache
	downstream dynamicinformer.DynamicSharedInformerFactory

	mu      sync.Mutex
	watched map[schema.GroupVersionResource]bool
	pending []queue.Message
	wake    chan struct{}
	stop    <-chan struct{}
}

// NewWatcher returns a watcher that publishes on conn.
func (g *Generator) NewWatcher() *Watcher {
	managed := func(o *metav1.ListOptions) {
		o.LabelSelector = LabelManagedBy + "=" + ManagedByValue + "," + LabelPolicyName
	}
	return &Watcher{
		conn: g.conn, dyn: g.dyn, mapper: g.mapper, m: g.m, log: g.o.log,
		pc:         g.pc,
		downstream: dynamicinformer.NewFilteredDynamicSharedInformerFactory(g.dyn, 0, metav1.NamespaceAll, managed),
		watched:    map[schema.GroupVersionResource]bool{},
		wake:       make(chan struct{}, 1),
	}
}

// Run watches until ctx ends: policy changes come through the policy
// cache's watches (started by the caller), generated resources through
// watches of their own.
func (w *Watcher) Run(ctx context.Context) error {
	w.stop = ctx.Done()
	if err := w.pc.OnPolicyChange(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { w.policyEvent(nil, o) },
		UpdateFunc: w.policyEvent,
		DeleteFunc: w.policyGone,
	}); err != nil {
		return fmt.Errorf("watch policies: %w", err)
	}
	go w.publish(ctx)
	return nil
}

// policyEvent handles a policy created (old nil) or updated.
func (w *Watcher) policyEvent(oldObj, newObj any) {
	p, _ := w.parse(newObj)
	if p == nil || p.Candidate() {
		// A candidate generates nothing (the reporter evaluates it).
		return
	}
	w.watchDownstream(p)
	var old *policy.Policy
	if oldObj != nil {
		if old, _ = w.parse(oldObj); old != nil && old.Metadata.UID == p.Metadata.UID && old.Metadata.Generation == p.Metadata.Generation {
			return // status or metadata only
		}
	}
	ref := bus.RawPolicyRef(p)
	rules := p.BackgroundRules()
	for i := range rules {
		r := &rules[i]
		var kind queue.WorkKind
		switch {
		case r.Generation != nil && ((old != nil && r.Generation.Synchronize && r.Generation.GeneratesData()) || p.GenerateExisting(r)):
			kind = bus.WorkGenerate
		case p.MutateExistingOnPolicyUpdate(r):
			kind = bus.WorkMutate
		default:
			continue
		}
		w.queue(WatchPolicyChanged, bus.WorkItem{Kind: kind, Policy: ref, Rule: r.Name, Action: bus.WorkPolicyChanged, Cause: bus.CausePolicy})
	}
	if old != nil && old.Metadata.UID == p.Metadata.UID {
		// Synchronized rules the change removed take their downstream along.
		oldRules := old.BackgroundRules()
		for i := range oldRules {
			r := &oldRules[i]
			if now := p.Rule(r.Name); now == nil || now.Generation == nil || !now.Generation.Synchronize {
				w.queueDeleted(old, r)
			}
		}
	}
}

// policyGone handles a deleted policy.
func (w *Watcher) policyGone(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	p, _ := w.parse(obj)
	if p == nil {
		return
	}
	rules := p.BackgroundRules()
	for i := range rules {
		w.queueDeleted(p, &rules[i])
	}
}

// queueDeleted queues the removal of what a synchronized generate rule
// of p made (nothing for other rules, or with
// orphanDownstreamOnPolicyDelete).
func (w *Watcher) queueDeleted(p *policy.Policy, r *policy.Rule) {
	g := r.Generation
	if g == nil || !g.Synchronize || g.OrphanDownstreamOnPolicyDelete {
		return
	}
	var kinds []bus.ResourceRef
	for _, k := range g.DownstreamKinds() {
		kinds = append(kinds, bus.ResourceRef{APIVersion: k.APIVersion, Kind: k.Kind})
	}
	w.queue(WatchPolicyDeleted, bus.WorkItem{
		Kind: bus.WorkGenerate, Policy: bus.RawPolicyRef(p),
		Rule: r.Name, Action: bus.WorkPolicyDeleted, Cause: bus.CausePolicy, Targets: kinds,
	})
}

// parse reads a policy from a watch event; one that does not parse is
// logged and left out (the webhook refuses such policies).
func (w *Watcher) parse(obj any) (*policy.Policy, *unstructured.Unstructured) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, nil
	}
	p, err := policy.FromObject(u.Object)
	if err != nil {
		w.log.Warn().Err(err).Str(logkey.Policy, u.GetNamespace()+"/"+u.GetName()).Msg("policyNotParsed")
		return nil, nil
	}
	p.Metadata.ResourceVersion = u.GetResourceVersion()
	return p, u
}

// watchDownstream starts a watch (by label) on each kind a synchronized
// rule of p generates, if none runs yet.
func (w *Watcher) watchDownstream(p *policy.Policy) {
	rules := p.BackgroundRules()
	for i := range rules {
		g := rules[i].Generation
		if g == nil || !g.Synchronize {
			continue
		}
		for _, k := range g.DownstreamKinds() {
			gv, err := schema.ParseGroupVersion(k.APIVersion)
			if err != nil {
				continue
			}
			mapping, err := w.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: k.Kind}, gv.Version)
			if err != nil {
				// Not served yet: watched once a policy event comes after it is.
				w.log.Debug().Err(err).Str(logkey.Kind, k.Kind).Msg("downstreamKindNotWatched")
				continue
			}
			w.watch(mapping.Resource)
		}
	}
}

func (w *Watcher) watch(gvr schema.GroupVersionResource) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.watched[gvr] {
		return
	}
	w.watched[gvr] = true
	inf := w.downstream.ForResource(gvr).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: w.downstreamChanged,
		DeleteFunc: w.downstreamDeleted,
	}); err != nil {
		w.log.Error().Err(err).Str(logkey.Resource, gvr.String()).Msg("downstreamNotWatched")
		return
	}
	w.downstream.Start(w.stop)
}

// downstreamChanged handles an update of a generated resource: one made
// by someone else than the generator is drift.
func (w *Watcher) downstreamChanged(oldObj, newObj any) {
	o, ok1 := oldObj.(*unstructured.Unstructured)
	n, ok2 := newObj.(*unstructured.Unstructured)
	if !ok1 || !ok2 || !changedByOthers(o, n) {
		return
	}
	w.drift(WatchDownstreamChanged, n, n.GetResourceVersion())
}

// downstreamDeleted handles a deleted generated resource.
func (w *Watcher) downstreamDeleted(obj any) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	if u, ok := obj.(*unstructured.Unstructured); ok {
		w.drift(WatchDownstreamDeleted, u, "")
	}
}

// drift queues an apply item for the trigger of a generated resource.
func (w *Watcher) drift(event string, u *unstructured.Unstructured, rv string) {
	l := u.GetLabels()
	t, ok := triggerOf(l)
	if !ok || l[LabelRuleName] == "" {
		return
	}
	key := l[LabelPolicyName]
	if ns := l[LabelPolicyNamespace]; ns != "" {
		key = ns + "/" + key
	}
	w.queue(event, bus.WorkItem{
		Kind: bus.WorkGenerate, Policy: bus.PolicyRef{Key: key, Kind: l[LabelPolicyKind]}, Rule: l[LabelRuleName], Trigger: t,
		Cause: bus.CauseDrift,
		Downstream: &bus.ResourceRef{
			APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(),
			UID: string(u.GetUID()), ResourceVersion: rv,
		},
	})
}

// changedByOthers reports whether an update was made by another field
// manager than the generator: a managedFields entry of another manager
// appeared or changed. Without managedFields every update counts.
func changedByOthers(old, cur *unstructured.Unstructured) bool {
	mf := cur.GetManagedFields()
	if len(mf) == 0 {
		return true
	}
	type key struct{ manager, op, sub string }
	before := map[key]metav1.ManagedFieldsEntry{}
	for _, e := range old.GetManagedFields() {
		before[key{e.Manager, string(e.Operation), e.Subresource}] = e
	}
	for _, e := range mf {
		if e.Manager == FieldManager {
			continue
		}
		b, ok := before[key{e.Manager, string(e.Operation), e.Subresource}]
		if !ok || !reflect.DeepEqual(b, e) {
			return true
		}
	}
	return false
}

// queue adds an item to what the publisher sends.
func (w *Watcher) queue(event string, item bus.WorkItem) {
	item.Timestamp = time.Now().UTC()
	msg, err := bus.WorkMessage(item)
	if err != nil {
		w.m.watch.WithLabelValues(event, "failed").Inc()
		w.log.Error().Err(err).Str(logkey.Event, event).Str(logkey.Policy, item.Policy.Key).Str(logkey.Rule, item.Rule).Msg("watchItemNotMade")
		return
	}
	w.m.watch.WithLabelValues(event, "queued").Inc()
	w.mu.Lock()
	w.pending = append(w.pending, msg)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// publish sends the queued items in order, each until JetStream takes it
// (backing off while it does not), until ctx ends.
func (w *Watcher) publish(ctx context.Context) {
	delay := 100 * time.Millisecond
	for {
		w.mu.Lock()
		var next *queue.Message
		if len(w.pending) > 0 {
			next = &w.pending[0]
		}
		w.mu.Unlock()
		if next == nil {
			select {
			case <-ctx.Done():
				return
			case <-w.wake:
				continue
			}
		}
		pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		_, err := w.conn.PublishSync(pctx, *next)
		cancel()
		if errors.Is(err, queue.ErrPublishRejected) {
			// Refused for good (too big, a bad subject): trying again changes nothing.
			w.m.watch.WithLabelValues("publish", "rejected").Inc()
			w.log.Error().Err(err).Str(logkey.Subject, next.Subject).Msg("watchItemRejected")
		} else if err != nil {
			w.log.Warn().Err(err).Str(logkey.Subject, next.Subject).Dur(logkey.Delay, delay).Msg("watchItemNotPublished")
			select {
			case <-ctx.Done():
				return
			case <-time.After(delay):
			}
			delay = min(2*delay, 10*time.Second)
			continue
		}
		delay = 100 * time.Millisecond
		w.mu.Lock()
		w.pending = w.pending[1:]
		w.mu.Unlock()
	}
}
