package cleaner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// Component is the cleaner's name in Events (reportingController) and
// its user agent.
const Component = "verdict-cleaner"

// PolicyTTL is the policy label of deletions made for the TTL label (no
// policy has this name: "@" is not allowed in names).
const PolicyTTL = "@ttl"

// listPageSize bounds one list call; lists are read page by page.
const listPageSize = 500

// ErrInvalidOption is wrapped by the errors of bad options.
var ErrInvalidOption = errors.New("cleaner: invalid option")

// Option configures New.
type Option func(*options) error

type options struct {
	api         policycache.API
	runner      []queue.RunnerOption
	ttlFilter   admissionfilter.Filter
	ttlInterval time.Duration
	resync      time.Duration
	identity    string
	now         func() time.Time
	reg         prometheus.Registerer
	log         zerolog.Logger
}

// WithTTLFilter sets what the webhooks never receive (the webhook's
// filter): the TTL sweep leaves alone the labelled resources there, since
// no webhook checked that whoever set their label may delete them.
// Default admissionfilter.New(nil, nil): the system namespaces and the
// resources a cluster needs to heal itself.
func WithTTLFilter(f admissionfilter.Filter) Option {
	return func(o *options) error { o.ttlFilter = f; return nil }
}

// WithTTLInterval sets how often the TTL sweep runs (its schedule,
// shared by every replica: give them all the same). Default 1m.
func WithTTLInterval(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Second {
			return fmt.Errorf("%w: TTL interval %s: at least 1s", ErrInvalidOption, d)
		}
		o.ttlInterval = d
		return nil
	}
}

// WithResync sets how often every cleanup policy's schedule is checked
// again (a schedule lost with its stream comes back). Default 10m.
func WithResync(d time.Duration) Option {
	return func(o *options) error {
		if d < time.Second {
			return fmt.Errorf("%w: resync %s", ErrInvalidOption, d)
		}
		o.resync = d
		return nil
	}
}

// WithIdentity names this replica in the Events it records
// (reportingInstance). Default: the host name.
func WithIdentity(id string) Option {
	return func(o *options) error {
		if id == "" {
			return fmt.Errorf("%w: empty identity", ErrInvalidOption)
		}
		o.identity = id
		return nil
	}
}

// WithClock sets the clock TTLs are judged by (default time.Now).
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidOption)
		}
		o.now = now
		return nil
	}
}

// WithRunnerOptions sets how the replica takes ticks from its consumer
// (concurrency, attempts, retry delays, the drain at shutdown: see
// service.WorkerConfig.RunnerOptions); default the queue runner's.
func WithRunnerOptions(opts ...queue.RunnerOption) Option {
	return func(o *options) error { o.runner = append(o.runner, opts...); return nil }
}

// WithRegisterer sets where the metrics are registered (default: a
// registry of their own).
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) error {
		if reg == nil {
			return fmt.Errorf("%w: nil registerer", ErrInvalidOption)
		}
		o.reg = reg
		return nil
	}
}

// WithLogger sets the logger (default: none).
func WithLogger(log zerolog.Logger) Option {
	return func(o *options) error { o.log = log; return nil }
}

// WithAPI sets the group the cleanup and deleting policies are read from
// (policycache.VerdictAPI unless set). In Kyverno's, every kind is
// watched once served: the cluster's CRDs are Kyverno's.
func WithAPI(api policycache.API) Option {
	return func(o *options) error { o.api = api; return nil }
}

// Clients are the Kubernetes clients the cleaner uses.
type Clients struct {
	// Dynamic reads policies and lists and deletes what they match.
	Dynamic dynamic.Interface
	// Metadata lists and deletes TTL-labelled resources (metadata only)
	// and reads namespaces' labels.
	Metadata metadata.Interface
	// Discovery says which kinds are served, listable and deletable.
	Discovery discovery.DiscoveryInterface
	// Kube records Events.
	Kube kubernetes.Interface
}

// Cleaner runs cleanup policies on their schedules and the TTL sweep.
type Cleaner struct {
	conn  *queue.Conn
	dyn   dynamic.Interface
	meta  metadata.Interface
	disc  discovery.DiscoveryInterface
	kinds *kubeutil.ListableKinds
	kube  kubernetes.Interface
	eng   *engine.Engine
	m     *Metrics
	o     options
}

// New prepares a cleaner: ticks come from conn (the cleaner's durable
// consumer), policies are evaluated with eng.
func New(conn *queue.Conn, kc Clients, eng *engine.Engine, opts ...Option) (*Cleaner, error) {
	if conn == nil || kc.Dynamic == nil || kc.Metadata == nil || kc.Discovery == nil || kc.Kube == nil || eng == nil {
		return nil, fmt.Errorf("%w: a cleaner needs a connection, the dynamic, metadata, discovery and typed clients, and an engine", ErrInvalidOption)
	}
	host, _ := os.Hostname()
	if host == "" {
		host = Component
	}
	o := options{
		ttlInterval: time.Minute, resync: 10 * time.Minute, identity: host, now: time.Now, log: zerolog.Nop(),
		ttlFilter: admissionfilter.New(nil, nil),
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.reg == nil {
		o.reg = prometheus.NewRegistry()
	}
	m, err := NewMetrics(o.reg)
	if err != nil {
		return nil, err
	}
	return &Cleaner{conn: conn, dyn: kc.Dynamic, meta: kc.Metadata, disc: kc.Discovery, kinds: kubeutil.NewListableKinds(kc.Discovery, 30*time.Second), kube: kc.Kube, eng: eng, m: m, o: o}, nil
}

// Run keeps the schedules of the cleanup policies (and the TTL sweep's)
// and works ticks until ctx ends, then drains (see queue.Runner.Run).
func (c *Cleaner) Run(ctx context.Context) error {
	r, err := c.conn.NewRunner(bus.StreamWork, bus.ConsumerCleaner, c.handle,
		append(append([]queue.RunnerOption{}, c.o.runner...), queue.WithMaxWorkTime(30*time.Minute))...)
	if err != nil {
		return err
	}
	ctx = c.o.log.WithContext(ctx)
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.keepTTLSchedule(ctx)
	}()
	go func() {
		defer wg.Done()
		c.keepSchedules(ctx)
	}()
	err = r.Run(ctx)
	wg.Wait()
	return err
}

// handle works one tick and counts it by policy (ticks_total; the runner
// counts and logs every message too). A retry on the last attempt is
// counted as dead-lettered: the runner sends it to VERDICT_DEAD.
func (c *Cleaner) handle(ctx context.Context, m *queue.Msg) queue.Outcome {
	start := time.Now()
	tick, err := DecodeTick(m.Data)
	var out queue.Outcome
	var ref *PolicyRef
	if err == nil && tick.Action == TickPolicy {
		ref = tick.Policy
	}
	switch {
	case err != nil:
		out = queue.Poison(err.Error()).For(ReasonUndecodable)
	case c.coalesced(ctx, m):
		out = queue.Skip(ReasonCoalesced, "a newer tick of the same schedule is queued")
	case tick.Action == TickTTL:
		out = c.sweepTTL(ctx)
	default:
		out = c.runPolicy(ctx, *ref)
	}
	res := out.Result(m)
	typ, pol := string(tick.Action), PolicyTTL
	switch {
	case err != nil:
		typ, pol = "unknown", ""
	case ref != nil:
		pol = ref.String()
	}
	c.m.ticks.WithLabelValues(typ, pol, res, out.Reason()).Inc()
	c.m.duration.WithLabelValues(typ).Observe(time.Since(start).Seconds())
	if res == queue.ResultDeadLettered && ref != nil && out.Reason() != ReasonPolicyGone {
		c.recordEvent(ctx, *ref, nil, fmt.Errorf("cleanup tick dead-lettered (%s): %s", out.Reason(), out.Detail()))
	}
	return out
}

// coalesced reports whether a newer tick of the same schedule waits in
// VERDICT_WORK: after an outage the ticks that piled up are worked once,
// not once each.
func (c *Cleaner) coalesced(ctx context.Context, m *queue.Msg) bool {
	last, err := c.conn.LastMsg(ctx, bus.StreamWork, m.Subject)
	return err == nil && last.Sequence > m.Sequence
}

// runPolicy is a policy tick: the policy is read from the API (the tick
// only names it) and run as it is now.
func (c *Cleaner) runPolicy(ctx context.Context, ref PolicyRef) queue.Outcome {
	var ri dynamic.ResourceInterface = c.dyn.Resource(ref.GVR(c.o.api))
	if ref.Namespace != "" {
		ri = c.dyn.Resource(ref.GVR(c.o.api)).Namespace(ref.Namespace)
	}
	obj, err := ri.Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		c.removeSchedule(ctx, ref)
		return queue.Skip(ReasonPolicyGone, fmt.Sprintf("%s %s is gone; its schedule is removed", ref.Kind, ref))
	case err != nil:
		return queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("read %s %s: %w", ref.Kind, ref, err))
	case ref.UID != "" && string(obj.GetUID()) != ref.UID:
		c.removeSchedule(ctx, ref)
		return queue.Skip(ReasonPolicyReplaced, fmt.Sprintf("%s %s was deleted and created again", ref.Kind, ref))
	case obj.GetDeletionTimestamp() != nil:
		return queue.Skip(ReasonPolicyGone, fmt.Sprintf("%s %s is being deleted", ref.Kind, ref))
	}
	raw, err := policy.CleanupPolicyFromObject(obj.Object)
	if err != nil {
		return queue.Poison(err.Error()).For(ReasonPolicyInvalid)
	}
	if raw.Spec.Schedule != ref.Schedule {
		// The policy's schedule changed since this tick was scheduled:
		// the schedule is being replaced; this tick is not one of the
		// new schedule's.
		return queue.Skip(ReasonScheduleChanged, fmt.Sprintf("schedule %q is now %q", ref.Schedule, raw.Spec.Schedule))
	}
	cp, err := c.eng.CompileCleanup(raw)
	if err != nil {
		return queue.Poison(err.Error()).For(ReasonPolicyInvalid)
	}
	run, err := c.eng.StartCleanup(ctx, cp)
	if err != nil {
		return queue.Retry().For(ReasonEvaluationError).Because(err)
	}
	targets, err := c.deletableKinds(ctx)
	if err != nil {
		return queue.Retry().For(ReasonAPIError).Because(err)
	}
	w := &policyRun{c: c, ref: RefOf(raw), raw: raw, run: run, nsLabels: map[string]map[string]string{}}
	if dp := raw.Spec.DeletionPropagationPolicy; dp != nil {
		p := metav1.DeletionPropagation(*dp)
		w.propagation = &p
	}
	var transient []error
	listed := map[schema.GroupVersionResource]bool{}
	for _, sel := range cp.Kinds() {
		matched := false
		for _, t := range targets {
			if !selects(sel, t) {
				continue
			}
			matched = true
			if raw.Namespaced() && !t.Namespaced {
				// A wildcard names no kind in particular: the
				// cluster-scoped ones it selects are left out quietly.
				if wild := sel.Resource == "*" || sel.Resource == "" && sel.Kind == "*"; !wild {
					c.o.log.Warn().Str(logkey.Policy, ref.String()).Str(logkey.Kind, t.GVK.Kind).Msg("clusterScopedKindInNamespacedPolicy")
				}
				continue
			}
			if listed[t.GVR] {
				continue // selected by an earlier selector too
			}
			listed[t.GVR] = true
			if err := w.kind(ctx, t); err != nil {
				transient = append(transient, err)
			}
		}
		if !matched {
			what := selectorString(sel)
			c.m.notServed.WithLabelValues(ref.String(), what).Inc()
			c.o.log.Warn().Str(logkey.Policy, ref.String()).Str(logkey.Kind, what).
				Str(logkey.Detail, "the API server serves no listable, deletable resource of this kind (at its preferred version): nothing of it is listed").
				Msg("kindNotServed")
		}
	}
	w.summarize(ctx)
	if len(transient) > 0 {
		return queue.Retry().For(ReasonAPIError).Because(errors.Join(transient...))
	}
	if raw.DPol == nil {
		// A DeletingPolicy has no status subresource: nothing to record.
		c.recordExecution(ctx, ri, ref.Name, string(obj.GetUID()))
	}
	return queue.Done().For(ReasonDone)
}

// selects reports whether the kind selector of a policy selects the
// served kind t: by kind for a cleanup policy's match block, by the
// resource discovery serves it as for a DeletingPolicy's resource rules
// (its real plural, not one guessed from the kind).
func selects(sel engine.KindSelector, t kubeutil.Kind) bool {
	if sel.Resource == "" {
		return sel.Selects(engine.GroupVersionKind{Group: t.GVK.Group, Version: t.GVK.Version, Kind: t.GVK.Kind})
	}
	return (sel.Group == "*" || sel.Group == t.GVR.Group) && (sel.Version == "*" || sel.Version == t.GVR.Version) &&
		(sel.Resource == "*" || sel.Resource == t.GVR.Resource)
}

// selectorString names what a kind selector selects, for logs and
// metrics: "ConfigMap", "apps/v1/Deployment", or, for a DeletingPolicy's
// resource rule, its group/version/resource ("/v1/configmaps",
// "apps/*/deployments").
func selectorString(sel engine.KindSelector) string {
	if sel.Resource != "" {
		return sel.Group + "/" + sel.Version + "/" + sel.Resource
	}
	s := sel.Kind
	if sel.Version != "" && sel.Version != "*" || sel.Group != "" && sel.Group != "*" {
		s = sel.Version + "/" + s
		if sel.Group != "" && sel.Group != "*" {
			s = sel.Group + "/" + s
		}
	}
	if sel.Subresource != "" {
		s += "/" + sel.Subresource
	}
	return s
}

// recordExecution writes the policy's status.lastExecutionTime, as
// Kyverno's cleanup controller does after a run, with the policy's uid as
// a precondition. Best effort: a failure is logged.
func (c *Cleaner) recordExecution(ctx context.Context, ri dynamic.ResourceInterface, name, uid string) {
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": uid},
		"status":   map[string]any{"lastExecutionTime": c.o.now().UTC().Format(time.RFC3339)},
	})
	if err == nil {
		_, err = ri.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: Component}, "status")
	}
	if err != nil {
		c.o.log.Info().Err(err).Str(logkey.Policy, name).Msg("lastExecutionTimeNotRecorded")
	}
}

// target is one served kind that can be listed and deleted.
// deletableKinds are the kinds the API server serves, at their preferred
// versions, that can be listed and deleted (subresources left out; a
// group whose discovery failed is left out and logged), read through
// discovery at most every 30 s.
func (c *Cleaner) deletableKinds(ctx context.Context) ([]kubeutil.Kind, error) {
	all, err := c.kinds.List(c.o.log.WithContext(ctx))
	if err != nil {
		return nil, err
	}
	out := make([]kubeutil.Kind, 0, len(all))
	for _, k := range all {
		if k.Deletable {
			out = append(out, k)
		}
	}
	return out, nil
}

// policyRun is one tick of one policy.
type policyRun struct {
	c           *Cleaner
	ref         PolicyRef
	raw         *policy.CleanupPolicy
	run         *engine.Cleanup
	propagation *metav1.DeletionPropagation
	// nsLabels are the labels of the namespaces seen, read once a tick.
	nsMu     sync.Mutex
	nsLabels map[string]map[string]string
	// events counts the per-resource Events recorded in this tick
	// (deleted, failed); past maxEventsPerTick the rest are counted in
	// unreported and summed up in one Event at the end of the tick.
	events     [2]atomic.Int64
	unreported [2]atomic.Int64
}

// maxEventsPerTick bounds the per-resource Events of one kind (deleted,
// failed) a tick records: an Event is a write to the API server as
// costly as the delete, so a tick that deletes thousands would spend
// half its time on Events. What is left over is summed up in one Event.
const maxEventsPerTick = 50

// event records the per-resource Event of a deletion (err nil) or a
// failure, or counts it once the tick has recorded maxEventsPerTick of
// that kind.
func (w *policyRun) event(ctx context.Context, u *unstructured.Unstructured, err error) {
	k := 0
	if err != nil {
		k = 1
	}
	if w.events[k].Add(1) > maxEventsPerTick {
		w.unreported[k].Add(1)
		return
	}
	w.c.recordEvent(ctx, w.ref, u, err)
}

// summarize records one Event for the deletions and failures of the tick
// that had no Event of their own.
func (w *policyRun) summarize(ctx context.Context) {
	if n := w.unreported[0].Load(); n > 0 {
		w.c.recordSummary(ctx, w.ref, fmt.Sprintf("successfully cleaned up %d more resources (Events per tick are limited to %d; verdict_cleaner_deletions_total counts every one)", n, maxEventsPerTick), false)
	}
	if n := w.unreported[1].Load(); n > 0 {
		w.c.recordSummary(ctx, w.ref, fmt.Sprintf("failed to clean up %d more resources (Events per tick are limited to %d; the cleaner's log names each)", n, maxEventsPerTick), true)
	}
}

// deleteWorkers bounds the resources of one page judged and deleted at
// once in a tick.
const deleteWorkers = 16

// kind lists one kind (in the policy's namespace for a CleanupPolicy)
// and deletes what the policy selects. It returns a transient error
// (the tick is retried after it has gone through every kind); what can
// never succeed is counted, reported and left.
func (w *policyRun) kind(ctx context.Context, t kubeutil.Kind) error {
	c := w.c
	ri := c.dyn.Resource(t.GVR)
	var list dynamic.ResourceInterface = ri
	if w.raw.Namespaced() {
		list = ri.Namespace(w.raw.Metadata.Namespace)
	}
	var transient []error
	opts := metav1.ListOptions{Limit: listPageSize}
	for {
		page, err := list.List(ctx, opts)
		if err != nil {
			if apierrors.IsForbidden(err) || apierrors.IsNotFound(err) || apierrors.IsMethodNotSupported(err) {
				c.m.deletions.WithLabelValues(w.ref.String(), t.GVK.Kind, DeletionFailed).Inc()
				c.o.log.Warn().Err(err).Str(logkey.Policy, w.ref.String()).Str(logkey.Kind, t.GVK.Kind).Str(logkey.Resource, t.GVR.String()).Msg("cleanupListRefused")
				return nil
			}
			return fmt.Errorf("list %s: %w", t.GVR.Resource, err)
		}
		// The page's resources are judged and deleted deleteWorkers at a
		// time: each delete is one round trip to the API server.
		var mu sync.Mutex
		var wg sync.WaitGroup
		next := make(chan *unstructured.Unstructured)
		for range min(deleteWorkers, len(page.Items)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for u := range next {
					if err := w.resource(ctx, t, u); err != nil {
						mu.Lock()
						transient = append(transient, err)
						mu.Unlock()
					}
				}
			}()
		}
		for i := range page.Items {
			next <- &page.Items[i]
		}
		close(next)
		wg.Wait()
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			break
		}
	}
	return errors.Join(transient...)
}

// resource judges one listed resource and deletes it when the policy
// selects it.
func (w *policyRun) resource(ctx context.Context, t kubeutil.Kind, u *unstructured.Unstructured) error {
	c := w.c
	if u.GetDeletionTimestamp() != nil {
		return nil
	}
	labels, err := w.namespaceLabels(ctx, u.GetNamespace())
	if err != nil {
		return err
	}
	d, err := w.run.DecideResource(ctx, u.Object, labels, t.GVR.Resource)
	if err != nil {
		c.m.evalErrors.WithLabelValues(w.ref.String()).Inc()
		c.o.log.Info().Err(err).Str(logkey.Policy, w.ref.String()).Str(logkey.Kind, t.GVK.Kind).Str(logkey.Resource, path(u.GetNamespace(), u.GetName())).Msg("cleanupConditionsFailed")
		return nil
	}
	if !d.Delete {
		return nil
	}
	uid := u.GetUID()
	ri := c.dyn.Resource(t.GVR)
	var del dynamic.ResourceInterface = ri
	if t.Namespaced {
		del = ri.Namespace(u.GetNamespace())
	}
	err = del.Delete(ctx, u.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}, PropagationPolicy: w.propagation})
	out := deletionOutcome(err)
	c.m.deletions.WithLabelValues(w.ref.String(), t.GVK.Kind, out).Inc()
	switch out {
	case DeletionDeleted:
		c.o.log.Info().Str(logkey.Policy, w.ref.String()).Str(logkey.Kind, t.GVK.Kind).Str(logkey.Resource, path(u.GetNamespace(), u.GetName())).Msg("resourceCleanedUp")
		w.event(ctx, u, nil)
	case DeletionFailed:
		c.o.log.Warn().Err(err).Str(logkey.Policy, w.ref.String()).Str(logkey.Kind, t.GVK.Kind).Str(logkey.Resource, path(u.GetNamespace(), u.GetName())).Msg("cleanupDeleteFailed")
		w.event(ctx, u, err)
		if !permanent(err) {
			return fmt.Errorf("delete %s %s: %w", t.GVK.Kind, path(u.GetNamespace(), u.GetName()), err)
		}
	}
	return nil
}

// namespaceLabels are the labels of a namespace ("": none), read once a
// tick.
func (w *policyRun) namespaceLabels(ctx context.Context, ns string) (map[string]string, error) {
	if ns == "" {
		return nil, nil
	}
	w.nsMu.Lock()
	l, ok := w.nsLabels[ns]
	w.nsMu.Unlock()
	if ok {
		return l, nil
	}
	obj, err := w.c.meta.Resource(namespaces).Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("labels of namespace %s: %w", ns, err)
	}
	w.nsMu.Lock()
	w.nsLabels[ns] = obj.Labels
	w.nsMu.Unlock()
	return obj.Labels, nil
}

var namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// deletionOutcome names what a delete with a UID precondition did:
// deleted; notFound (already gone: done); replaced (the name now belongs
// to another object, which is left alone); failed.
func deletionOutcome(err error) string {
	switch {
	case err == nil:
		return DeletionDeleted
	case apierrors.IsNotFound(err):
		return DeletionNotFound
	case apierrors.IsConflict(err):
		return DeletionReplaced
	}
	return DeletionFailed
}

// permanent reports whether the API server's refusal will not change by
// trying again (forbidden, invalid, not allowed).
func permanent(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsNotAcceptable(err)
}

func path(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
