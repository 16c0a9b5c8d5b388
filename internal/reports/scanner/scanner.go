package scanner

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// PolicySource is what the scanner needs of the policy cache
// (policycache.Cache): the compiled set, a signal after each change, and
// namespace labels for namespaceSelector.
type PolicySource interface {
	Set(ctx context.Context) (*engine.Set, error)
	// Candidates are the candidate policies (policy.AnnotationCandidate),
	// which Set leaves out.
	Candidates() []*engine.Policy
	Changed() <-chan struct{}
	NamespaceLabels(ctx context.Context, name string) (map[string]string, error)
}

// ScheduleKey is the key of the periodic scan's JetStream message
// schedule (queue.PutSchedule, kind scan) and of its ticks' work subject.
const ScheduleKey = string(bus.ScanAll)

// legacyScheduleSubject is where versions before pkg/queue's schedules
// kept the periodic scan's schedule.
const legacyScheduleSubject = "verdict.schedule.background-scan"

// Reasons of scan items.
const (
	ReasonStarted  = "started"
	ReasonCreated  = "created"
	ReasonChanged  = "changed"
	ReasonDeleted  = "deleted"
	ReasonInterval = "interval"
	ReasonReport   = "reportDeleted"
)

// Scanner is the background scan: any number of replicas share the
// durable consumer "scanner" on VERDICT_WORK and none leads. Work is
// partitioned by policy: a scan item asks for one policy to be evaluated
// on every resource it selects, and whichever replica takes the item does
// it. Items are published with deterministic ids, so the replicas that all
// see the same policy change publish one item between them:
//
//   - a policy created or changed (id: policy uid and resourceVersion), and
//     every policy when a replica starts;
//   - a policy deleted (id: policy uid): its results are retracted;
//   - a tick of the periodic scan, a JetStream message schedule that fires
//     a ScanAll item; the replica that takes it publishes one item per
//     policy (id: policy version and the tick's stream sequence);
//   - a report deleted (id: resource uid): when the resource is gone too
//     (the garbage collector deleted the report with it), its results are
//     purged; otherwise the report is written again.
//
// A policy scan reads the policy's current results from VERDICT_RESULTS,
// lists the kinds the policy's validate and verifyImages rules name (a
// kind wildcard alone is not listed), evaluates each resource, and
// publishes only results that
// changed (deterministic ids: two scans of the same versions collapse). A
// resource the policy no longer selects gets a retraction (a result
// without rules, which reports leave out); a result of a resource that no
// longer exists is purged with the rest of the resource's results and its
// report deleted. Policies with background: false are not scanned.
type Scanner struct {
	conn     *queue.Conn
	eng      *engine.Engine
	dyn      dynamic.Interface
	disc     discovery.DiscoveryInterface
	mapper   meta.ResettableRESTMapper
	policies PolicySource
	// writer writes reports; nil when they are served from the stream
	// (WithServedReports). rm counts the results read.
	writer *reporter.Writer
	rm     *reporter.Metrics
	m      *metrics
	o      options
	log    zerolog.Logger

	kinds *kubeutil.ListableKinds
}

// New returns a scanner; Run runs it.
func New(conn *queue.Conn, eng *engine.Engine, dyn dynamic.Interface, disc discovery.DiscoveryInterface,
	policies PolicySource, writer *reporter.Writer, opts ...Option,
) (*Scanner, error) {
	o := options{interval: time.Hour, pageSize: 500, concurrency: 2, maxDeliver: 10, waitDeliveries: 5,
		kindsTTL: 30 * time.Second, now: time.Now}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if conn == nil || eng == nil || dyn == nil || disc == nil || policies == nil || (writer == nil && o.served == nil) || o.check == nil {
		return nil, fmt.Errorf("%w: the scanner needs a queue connection, an engine, API clients, a policy source, a writer (or WithServedReports) and a checker (WithChecker)", ErrInvalidOption)
	}
	rm := o.served
	if rm == nil {
		rm = writer.Metrics()
	}
	reg := o.reg
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m, err := newMetrics(reg)
	if err != nil {
		return nil, err
	}
	log := zerolog.Nop()
	if o.log != nil {
		log = *o.log
	}
	return &Scanner{
		conn: conn, eng: eng, dyn: dyn, disc: disc, policies: policies, writer: writer, rm: rm, m: m, o: o,
		mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		kinds:  kubeutil.NewListableKinds(disc, o.kindsTTL),
		log:    log.With().Str(logkey.Component, "scanner").Logger(),
	}, nil
}

// Run publishes scan items for policy changes, keeps the periodic scan's
// schedule, watches reports, and works on scan items until ctx ends. The
// policy source must be started (synced) first.
func (s *Scanner) Run(ctx context.Context) error {
	ctx = s.log.WithContext(ctx)
	r, err := s.conn.NewRunner(bus.StreamWork, bus.ConsumerScanner, s.handle,
		queue.WithConcurrency(s.o.concurrency),
		queue.WithMaxDeliver(s.o.maxDeliver),
		queue.WithRetryDelays(time.Second, time.Minute),
		queue.WithMaxWorkTime(30*time.Minute),
	)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() { s.watchPolicies(ctx) })
	if s.o.interval > 0 {
		wg.Go(func() { s.keepSchedule(ctx) })
	}
	if s.o.metadata != nil {
		wg.Go(func() { s.watchReports(ctx) })
	}
	err = r.Run(ctx)
	wg.Wait()
	return err
}

// policyVersion is what a policy change is detected on.
type policyVersion struct {
	ref  bus.PolicyRef
	scan bool // background on, and validate or verifyImages rules
	// bindings is a Kubernetes admission policy's bindings' version
	// (bus.BindingsOf).
	bindings string
}

func versions(set *engine.Set) map[string]policyVersion {
	out := make(map[string]policyVersion, len(set.Policies))
	for _, p := range set.Policies {
		ref := bus.PolicyRefOf(p)
		out[ref.ResultKey()] = policyVersion{ref: ref, scan: scanned(p), bindings: bus.BindingsOf(p)}
	}
	return out
}

// scanned reports whether background scans evaluate p.
func scanned(p *engine.Policy) bool {
	return p.Raw.Spec.BackgroundEnabled() && p.HasChecks()
}

// watchPolicies publishes a scan item per created or changed policy (all
// of them at start) and a retraction item per deleted one.
func (s *Scanner) watchPolicies(ctx context.Context) {
	var prev map[string]policyVersion
	var prevCandidates map[string]candidateVersion
	for {
		set, err := s.policies.Set(ctx)
		if err == nil {
			cur := versions(set)
			s.publishChanges(ctx, prev, cur)
			prev = cur
			if s.o.candidates.enabled {
				cur := candidateVersions(s.policies.Candidates())
				s.publishCandidateChanges(ctx, prevCandidates, cur)
				prevCandidates = cur
			}
		} else {
			s.log.Warn().Err(err).Msg("policiesUnavailable")
		}
		select {
		case <-ctx.Done():
			return
		case <-s.policies.Changed():
		}
	}
}

func (s *Scanner) publishChanges(ctx context.Context, prev, cur map[string]policyVersion) {
	now := s.o.now().UTC()
	for key, v := range cur {
		old, had := prev[key]
		switch {
		case had && old == v:
			continue
		case had && old.ref.UID != v.ref.UID:
			// Replaced under the same name: the old one's results go.
			s.publish(ctx, bus.ScanItem{Action: bus.ScanPolicyDeleted, Policy: old.ref, Reason: ReasonDeleted, Timestamp: now}, old.ref.UID)
		}
		if !v.scan {
			continue
		}
		reason := ReasonChanged
		switch {
		case prev == nil:
			reason = ReasonStarted
		case !had:
			reason = ReasonCreated
		}
		s.publish(ctx, bus.ScanItem{Action: bus.ScanPolicy, Policy: v.ref, Reason: reason, Timestamp: now, Bindings: v.bindings}, v.ref.UID, v.ref.ResourceVersion, v.bindings)
	}
	for key, old := range prev {
		if _, ok := cur[key]; !ok {
			s.publish(ctx, bus.ScanItem{Action: bus.ScanPolicyDeleted, Policy: old.ref, Reason: ReasonDeleted, Timestamp: now}, old.ref.UID)
		}
	}
}

// publish publishes a scan item, retrying for a while; an item that
// cannot be published is counted and logged (the periodic scan
// reconciles).
func (s *Scanner) publish(ctx context.Context, item bus.ScanItem, id ...string) {
	msg, err := bus.ScanMessage(item, id...)
	if err != nil {
		s.m.unpublished.WithLabelValues("invalid").Inc()
		s.log.Error().Err(err).Msg("scanItemInvalid")
		return
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	delay := 100 * time.Millisecond
	for {
		_, err := s.conn.PublishSync(pctx, msg)
		if err == nil {
			s.m.published.WithLabelValues(string(item.Action)).Inc()
			return
		}
		t := time.NewTimer(delay)
		select {
		case <-pctx.Done():
			t.Stop()
			s.m.unpublished.WithLabelValues("unavailable").Inc()
			s.log.Error().Err(err).Str(logkey.Subject, msg.Subject).Str(logkey.Reason, item.Reason).Msg("scanItemNotPublished")
			return
		case <-t.C:
		}
		delay = min(2*delay, 5*time.Second)
	}
}

// keepSchedule makes sure the periodic scan's message schedule exists
// with this replica's interval, retrying until it does or ctx ends.
func (s *Scanner) keepSchedule(ctx context.Context) {
	delay := time.Second
	for {
		err := s.ensureSchedule(ctx)
		if err == nil {
			return
		}
		s.log.Warn().Err(err).Msg("scanScheduleNotSet")
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

func (s *Scanner) ensureSchedule(ctx context.Context) error {
	// The tick lands in VERDICT_SCHEDULES; VERDICT_WORK sources it as
	// WorkSubject(WorkScan, "all"), where the scanner consumer takes it.
	data, err := json.Marshal(bus.ScanItem{Action: bus.ScanAll, Reason: ReasonInterval})
	if err != nil {
		return err
	}
	spec := "@every " + s.o.interval.String()
	change, err := s.conn.PutSchedule(ctx, queue.Schedule{Kind: bus.WorkScan, Key: ScheduleKey, Spec: spec, Data: data}, nil)
	if err != nil {
		return fmt.Errorf("set the scan schedule: %w", err)
	}
	// Versions before the schedules of pkg/queue kept it on a subject of
	// its own: one schedule, not two.
	if _, err := s.conn.Purge(ctx, bus.StreamSchedules, legacyScheduleSubject); err != nil {
		s.log.Debug().Err(err).Msg("legacyScanScheduleNotPurged")
	}
	if change != queue.ScheduleUnchanged {
		s.log.Info().Str(logkey.Schedule, spec).Str(logkey.Change, string(change)).Msg("scanScheduleSet")
	}
	return nil
}

// handle works on one scan item.
func (s *Scanner) handle(ctx context.Context, m *queue.Msg) queue.Outcome {
	var item bus.ScanItem
	if err := json.Unmarshal(m.Data, &item); err != nil {
		s.m.items.WithLabelValues("undecodable", "poison").Inc()
		return queue.Poison("decode scan item: " + err.Error())
	}
	start := time.Now()
	var out queue.Outcome
	switch item.Action {
	case bus.ScanAll:
		out = s.fanOut(ctx, m)
	case bus.ScanPolicy:
		out = s.scanPolicy(ctx, m, item)
	case bus.ScanPolicyDeleted:
		out = s.retractPolicy(ctx, item)
	case bus.ScanResourceGone:
		out = s.resourceGone(ctx, item.Resource)
	case bus.ScanCandidate:
		out = s.evaluateCandidate(ctx, m, item)
	case bus.ScanCandidateGone:
		out = s.clearCandidate(ctx, item)
	default:
		s.m.items.WithLabelValues("unknown", "poison").Inc()
		return queue.Poison(fmt.Sprintf("unknown scan action %q", item.Action))
	}
	s.m.items.WithLabelValues(string(item.Action), outcomeLabel(out)).Inc()
	s.m.duration.WithLabelValues(string(item.Action)).Observe(time.Since(start).Seconds())
	return out
}

// outcomeLabel names an outcome for metrics (its first word).
func outcomeLabel(o queue.Outcome) string {
	s := o.String()
	for i, c := range s {
		if c == ' ' || c == '(' || c == ':' {
			return s[:i]
		}
	}
	return s
}

// retry logs err and asks for a later delivery.
func (s *Scanner) retry(ctx context.Context, what string, err error) queue.Outcome {
	logFrom(ctx).Warn().Err(err).Msg(what)
	return queue.Retry().Because(err)
}

// fanOut publishes one policy scan per scanned policy: a tick of the
// periodic scan. The tick's stream sequence makes the ids of this tick's
// items unique (and the same if the tick is delivered twice).
func (s *Scanner) fanOut(ctx context.Context, m *queue.Msg) queue.Outcome {
	set, err := s.policies.Set(ctx)
	if err != nil {
		return s.retry(ctx, "policiesUnavailable", err)
	}
	tick := strconv.FormatUint(m.Sequence, 10)
	now := s.o.now().UTC()
	for _, p := range set.Policies {
		if !scanned(p) {
			continue
		}
		ref := bus.PolicyRefOf(p)
		msg, err := bus.ScanMessage(bus.ScanItem{Action: bus.ScanPolicy, Policy: ref, Reason: ReasonInterval, Timestamp: now, Bindings: bus.BindingsOf(p)},
			ref.UID, ref.ResourceVersion, "tick", tick)
		if err != nil {
			return queue.Poison(err.Error())
		}
		if _, err := s.conn.PublishSync(ctx, msg); err != nil {
			return s.retry(ctx, "scanItemNotPublished", err)
		}
		s.m.published.WithLabelValues(string(bus.ScanPolicy)).Inc()
	}
	if !s.o.candidates.enabled {
		return queue.Done()
	}
	// Candidates are evaluated again on each tick: the log has grown.
	for _, p := range s.policies.Candidates() {
		ref := bus.PolicyRefOf(p)
		ref.ResourceVersion = ""
		msg, err := bus.ScanMessage(bus.ScanItem{Action: bus.ScanCandidate, Policy: ref, Generation: p.Raw.Metadata.Generation, Reason: ReasonInterval, Timestamp: now},
			ref.UID, "tick", tick)
		if err != nil {
			return queue.Poison(err.Error())
		}
		if _, err := s.conn.PublishSync(ctx, msg); err != nil {
			return s.retry(ctx, "scanItemNotPublished", err)
		}
		s.m.published.WithLabelValues(string(bus.ScanCandidate)).Inc()
	}
	return queue.Done()
}

// lookup finds the policy an item names in the local set, at the item's
// version and, for a Kubernetes admission policy, its bindings' version.
// It asks for a later delivery while the local cache may be behind the
// item.
func (s *Scanner) lookup(ctx context.Context, m *queue.Msg, ref bus.PolicyRef, bindings string) (*engine.Policy, *engine.Set, queue.Outcome, bool) {
	set, err := s.policies.Set(ctx)
	if err != nil {
		return nil, nil, s.retry(ctx, "policiesUnavailable", err), false
	}
	var p *engine.Policy
	for _, c := range set.Policies {
		if bus.PolicyRefOf(c).ResultKey() == ref.ResultKey() {
			p = c
			break
		}
	}
	switch {
	case p != nil && p.Raw.Metadata.UID == ref.UID && p.Raw.Metadata.ResourceVersion == ref.ResourceVersion && bus.BindingsOf(p) == bindings:
		return p, set, queue.Done(), true
	case p != nil && p.Raw.Metadata.UID == ref.UID && newer(p.Raw.Metadata.ResourceVersion, ref.ResourceVersion):
		// This replica already has a later version, which has its own
		// item: this one is superseded.
		return nil, nil, queue.Done(), false
	case m.Delivery < s.o.waitDeliveries && (p == nil || p.Raw.Metadata.UID == ref.UID):
		// Not (yet) the item's version here: the informer may be behind.
		return nil, nil, queue.RetryAfter(time.Second), false
	case p != nil && p.Raw.Metadata.UID == ref.UID:
		// Still another version: scan what this replica has.
		return p, set, queue.Done(), true
	}
	// Deleted or replaced: the deletion has its own item.
	return nil, nil, queue.Done(), false
}

// newer reports whether resourceVersion a is later than b, when both are
// the API server's (etcd) integers; false when it cannot tell.
func newer(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}

// publishResult publishes a result (or retraction) and waits for the
// stream's acknowledgement.
func (s *Scanner) publishResult(ctx context.Context, ev bus.ResultEvent) error {
	msg, err := bus.ResultMessage(ev)
	if err != nil {
		return err
	}
	if _, err := s.conn.PublishSync(ctx, msg); err != nil {
		return fmt.Errorf("publish result of %s on %s: %w", ev.Policy.Key, ev.Resource.UID, err)
	}
	return nil
}

// exists reports whether the resource is still there (same UID).
func (s *Scanner) exists(ctx context.Context, res bus.ResourceRef) (bool, error) {
	gv, err := schema.ParseGroupVersion(res.APIVersion)
	if err != nil || res.Kind == "" || res.Name == "" {
		return false, fmt.Errorf("resource %s is not named well enough to look up (%q %q %q)", res.UID, res.APIVersion, res.Kind, res.Name)
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: res.Kind}
	mapping, err := s.mapper.RESTMapping(gk, gv.Version)
	if meta.IsNoMatchError(err) {
		s.mapper.Reset()
		mapping, err = s.mapper.RESTMapping(gk, gv.Version)
	}
	switch {
	case meta.IsNoMatchError(err):
		return false, nil // the kind is no longer served
	case err != nil:
		return false, fmt.Errorf("map %s: %w", gk, err)
	}
	var client dynamic.ResourceInterface = s.dyn.Resource(mapping.Resource)
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		client = s.dyn.Resource(mapping.Resource).Namespace(res.Namespace)
	}
	obj, err := client.Get(ctx, res.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("read %s %s/%s: %w", res.Kind, res.Namespace, res.Name, err)
	}
	return string(obj.GetUID()) == res.UID, nil
}

// purge removes every result of a resource that no longer exists and its
// report.
func (s *Scanner) purge(ctx context.Context, res bus.ResourceRef) error {
	n, err := s.conn.Purge(ctx, bus.StreamResults, bus.ResultsOfResource(res.UID))
	if err != nil {
		return err
	}
	// And the reporter's verified copies of them.
	if _, err := s.conn.Purge(ctx, bus.StreamResults, bus.VerifiedOfResource(res.UID)); err != nil {
		return err
	}
	s.o.check.Forget(res.UID)
	res.ResourceVersion = ""
	if s.writer != nil {
		if _, err := s.writer.Write(ctx, model.Report{Resource: res}, nil); err != nil {
			return fmt.Errorf("delete the report of %s: %w", res.UID, err)
		}
	}
	s.m.purged.Add(float64(n))
	logFrom(ctx).Debug().Str(logkey.ResourceUID, res.UID).Uint64(logkey.Results, n).Msg("resourceResultsPurged")
	return nil
}

// retractPolicy retracts every result of a deleted policy (of that
// policy's uid: a new policy of the same name keeps its own).
func (s *Scanner) retractPolicy(ctx context.Context, item bus.ScanItem) queue.Outcome {
	existing, err := s.policyResults(ctx, item.Policy.ResultKey())
	if err != nil {
		return s.retry(ctx, "resultsUnreadable", err)
	}
	now := s.o.now().UTC()
	n := 0
	for _, rs := range existing {
		r, ok, err := s.newestVerified(ctx, rs)
		if err != nil {
			return s.retry(ctx, "resultsUncheckable", err)
		}
		if !ok || r.Event.Policy.UID != item.Policy.UID || len(r.Event.Rules) == 0 {
			continue
		}
		// Carries the deleted policy's last version: final for every
		// result of that policy, late ones included.
		policy := item.Policy
		if newer(r.Event.Policy.ResourceVersion, policy.ResourceVersion) {
			policy = r.Event.Policy
		}
		if err := s.publishResult(ctx, retraction(policy, r.Event.Resource, bus.RetractedPolicyDeleted, now)); err != nil {
			return s.retry(ctx, "retractionNotPublished", err)
		}
		n++
		s.m.results.WithLabelValues("retracted").Inc()
	}
	logFrom(ctx).Info().Str(logkey.Policy, item.Policy.Key).Int(logkey.Results, n).Msg("policyResultsRetracted")
	return queue.Done()
}

// resourceGone handles a deleted report: when its resource is gone its
// results are purged; otherwise the report is written again from the
// stream.
func (s *Scanner) resourceGone(ctx context.Context, res bus.ResourceRef) queue.Outcome {
	if res.UID == "" {
		return queue.Poison("resourceGone item without a resource uid")
	}
	exists := false
	if res.Kind != "" {
		var err error
		if exists, err = s.exists(ctx, res); err != nil {
			return s.retry(ctx, "resourceUnreadable", err)
		}
	}
	if !exists {
		if err := s.purge(ctx, res); err != nil {
			return s.retry(ctx, "purgeFailed", err)
		}
		return queue.Done()
	}
	if s.writer == nil {
		return queue.Done() // served from the stream: nothing to write again
	}
	cur, err := reporter.ReadResults(ctx, s.conn, s.rm, s.o.check, []string{res.UID})
	if err != nil {
		return s.retry(ctx, "resultsUnreadable", err)
	}
	rep, err := cur.Fold(res.UID)
	if err != nil {
		return queue.Poison(err.Error())
	}
	if _, err := s.writer.Write(ctx, rep.WithHint(res), reporter.Refolder(s.conn, s.rm, s.o.check, res.UID, res)); err != nil {
		return s.retry(ctx, "reportNotWritten", err)
	}
	return queue.Done()
}

// watchReports publishes a resourceGone item for each of Verdict's
// reports that is deleted (by the garbage collector with its resource, by
// a user, or by the writer itself; the item sorts it out).
func (s *Scanner) watchReports(ctx context.Context) {
	f := metadatainformer.NewFilteredSharedInformerFactory(s.o.metadata, 0, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.LabelSelector = model.LabelManagedBy + "=" + model.ManagedByValue
	})
	gone := make(chan bus.ResourceRef, 4096)
	handler := cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		pom, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return
		}
		res, ok := reportSubject(pom, s.writer)
		if !ok {
			return // named as this reporter does not name reports
		}
		select {
		case gone <- res:
		default:
			s.m.unpublished.WithLabelValues("buffer full").Inc()
		}
	}}
	for _, gvr := range []schema.GroupVersionResource{model.PolicyReports, model.ClusterPolicyReports} {
		if _, err := f.ForResource(gvr).Informer().AddEventHandler(handler); err != nil {
			s.log.Error().Err(err).Msg("reportWatchFailed")
			return
		}
	}
	f.Start(ctx.Done())
	defer f.Shutdown()
	for {
		select {
		case <-ctx.Done():
			return
		case res := <-gone:
			s.publish(ctx, bus.ScanItem{Action: bus.ScanResourceGone, Resource: res, Reason: ReasonReport, Timestamp: s.o.now().UTC()})
		}
	}
}

// reportSubject is the resource a report is about, from its metadata: the
// owner reference names it; without one only the UID (the report's name)
// and namespace are known.
func reportSubject(pom *metav1.PartialObjectMetadata, w *reporter.Writer) (bus.ResourceRef, bool) {
	uid, ok := w.UIDOf(pom.Name)
	if !ok {
		return bus.ResourceRef{}, false
	}
	res := bus.ResourceRef{UID: uid, Namespace: pom.Namespace}
	for _, o := range pom.OwnerReferences {
		if string(o.UID) == uid {
			res.APIVersion, res.Kind, res.Name = o.APIVersion, o.Kind, o.Name
		}
	}
	return res, true
}
