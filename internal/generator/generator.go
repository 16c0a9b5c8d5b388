package generator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// FieldManager is the field manager of every write of the generator.
const FieldManager = "verdict-generator"

// ErrInvalidOption is wrapped by the errors of bad options.
var ErrInvalidOption = errors.New("generator: invalid option")

var namespaces = schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}

// Option configures New.
type Option func(*options) error

type options struct {
	runner []queue.RunnerOption
	reg    prometheus.Registerer
	log    zerolog.Logger
}

// WithRunnerOptions sets how the replica takes items from its consumer
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

// Generator works the generate items of VERDICT_WORK.
type Generator struct {
	conn   *queue.Conn
	dyn    dynamic.Interface
	mapper meta.ResettableRESTMapper
	kinds  *kubeutil.ListableKinds
	pc     *policycache.Cache
	check  *apicheck.Checker
	eng    *engine.Engine
	m      *Metrics
	o      options
}

// Deps are what a generator works with.
type Deps struct {
	// Conn is the JetStream connection: items come from the generator's
	// durable consumer; fanned-out and watched items are published on it.
	Conn *queue.Conn
	// Dynamic and Mapper read and write objects.
	Dynamic dynamic.Interface
	Mapper  meta.ResettableRESTMapper
	// Kinds are the served kinds a policy's triggers may have.
	Kinds *kubeutil.ListableKinds
	// Policies is the policy cache (compiled policies, exceptions,
	// namespace labels; its policy watches feed the Watcher). The caller
	// starts it.
	Policies *policycache.Cache
	// Check says how long a trigger may be missing (its grace period).
	Check *apicheck.Checker
	// Engine evaluates the rules.
	Engine *engine.Engine
}

// New prepares a generator.
func New(d Deps, opts ...Option) (*Generator, error) {
	if d.Conn == nil || d.Dynamic == nil || d.Mapper == nil || d.Kinds == nil || d.Policies == nil || d.Check == nil || d.Engine == nil {
		return nil, fmt.Errorf("%w: a generator needs a connection, a dynamic client, a REST mapper, the listable kinds, the policy cache, a checker and an engine", ErrInvalidOption)
	}
	o := options{log: zerolog.Nop()}
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
	return &Generator{conn: d.Conn, dyn: d.Dynamic, mapper: d.Mapper, kinds: d.Kinds, pc: d.Policies, check: d.Check, eng: d.Engine, m: m, o: o}, nil
}

// Run works items until ctx ends, then drains (see queue.Runner.Run).
func (g *Generator) Run(ctx context.Context) error {
	r, err := g.conn.NewRunner(bus.StreamWork, bus.ConsumerGenerator, g.handle, g.o.runner...)
	if err != nil {
		return err
	}
	ctx = g.o.log.WithContext(ctx)
	if err := g.NewWatcher().Run(ctx); err != nil {
		return err
	}
	return r.Run(ctx)
}

// handle works one item. The runner counts and logs what became of it
// (verdict_queue_work_items_total{consumer="generator"}, workItemHandled);
// an item dead-lettered after its trigger was read is also reported on the
// trigger as a Warning Event.
func (g *Generator) handle(ctx context.Context, m *queue.Msg) queue.Outcome {
	var trigger *unstructured.Unstructured
	out := g.work(ctx, m, &trigger)
	if trigger != nil && out.Result(m) == queue.ResultDeadLettered {
		g.reportDeadLetter(ctx, trigger, out)
	}
	return out
}

// EventReasonDeadLettered is the reason of the Warning Event the
// generator records on a trigger whose work item was dead-lettered.
const EventReasonDeadLettered = "GenerateFailed"

// reportDeadLetter records a Warning Event on the trigger (read from the
// API, never only named by the item) saying its generate work was
// dead-lettered and why. Best effort: a failure is logged, the item's
// outcome stands.
func (g *Generator) reportDeadLetter(ctx context.Context, t *unstructured.Unstructured, out queue.Outcome) {
	ns := t.GetNamespace()
	if ns == "" {
		// Events about cluster-scoped objects live in "default".
		ns = metav1.NamespaceDefault
	}
	now := time.Now().UTC()
	ev := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Event",
		"metadata": map[string]any{
			"name":      fmt.Sprintf("%s.%x", t.GetName(), now.UnixNano()),
			"namespace": ns,
		},
		"involvedObject": map[string]any{
			"apiVersion": t.GetAPIVersion(), "kind": t.GetKind(),
			"namespace": t.GetNamespace(), "name": t.GetName(), "uid": string(t.GetUID()),
		},
		"type":               "Warning",
		"reason":             EventReasonDeadLettered,
		"message":            fmt.Sprintf("generate work dead-lettered (%s): %s", out.Reason(), out.Detail()),
		"source":             map[string]any{"component": FieldManager},
		"reportingComponent": FieldManager,
		"firstTimestamp":     now.Format(time.RFC3339),
		"lastTimestamp":      now.Format(time.RFC3339),
		"count":              int64(1),
	}}
	_, err := g.dyn.Resource(corev1.SchemeGroupVersion.WithResource("events")).Namespace(ns).Create(ctx, ev, metav1.CreateOptions{})
	if err != nil {
		g.o.log.Warn().Err(err).Str(logkey.Reason, out.Reason()).Msg("deadLetterEventNotRecorded")
	}
}

// work checks the item against the API, evaluates the rule with the
// policy as stored now, and applies what it generates. The trigger, once
// read from the API, is left in read.
func (g *Generator) work(ctx context.Context, m *queue.Msg, read **unstructured.Unstructured) queue.Outcome {
	var item bus.WorkItem
	if err := json.Unmarshal(m.Data, &item); err != nil {
		return queue.Poison("decode work item: " + err.Error()).For(ReasonUndecodable)
	}
	if item.Kind != bus.WorkGenerate && item.Kind != bus.WorkMutate {
		return queue.Poison(fmt.Sprintf("work kind %q is not the generator's (generate and mutate items are)", item.Kind)).For(ReasonUnsupported)
	}
	// The rules of the CEL kinds have no name (a MutatingPolicy's, as
	// Kyverno reports them); a ClusterPolicy's always have one.
	if item.Policy.Key == "" || (item.Rule == "" && item.Policy.Kind == "") {
		return queue.Poison("the work item names no policy or no rule").For(ReasonInvalidItem)
	}
	switch item.Act() {
	case bus.WorkApply:
	case bus.WorkDeleteDownstream:
		if item.Kind != bus.WorkGenerate {
			return queue.Poison("only generate items delete downstream").For(ReasonUnsupported)
		}
		return g.triggerDeleted(ctx, m, item)
	case bus.WorkPolicyDeleted:
		if item.Kind != bus.WorkGenerate {
			return queue.Poison("only generate items delete downstream").For(ReasonUnsupported)
		}
		return g.policyDeleted(ctx, item)
	case bus.WorkPolicyChanged:
		return g.policyChanged(ctx, item)
	default:
		return queue.Poison(fmt.Sprintf("work action %q", item.Action)).For(ReasonUnsupported)
	}

	trigger, res, ok := g.trigger(ctx, m, item)
	if !ok {
		return res
	}
	*read = trigger
	pol, res, ok := g.policy(ctx, item.Policy, item.Cause == bus.CauseDrift)
	if !ok {
		return res
	}
	if item.UserInfo, res, ok = g.requester(m, item, trigger, pol); !ok {
		return res
	}
	rule := pol.Rule(item.Rule)
	if item.Kind == bus.WorkMutate {
		if rule == nil || !rule.MutatesExisting() {
			return queue.Skip(ReasonRuleNotTriggered, fmt.Sprintf("policy %s has no mutate-existing rule %s", item.Policy.Key, item.Rule))
		}
		return g.mutateTargets(ctx, item, trigger, pol)
	}
	if rule == nil || rule.Generation == nil {
		return queue.Skip(ReasonRuleNotTriggered, fmt.Sprintf("policy %s has no generate rule %s", item.Policy.Key, item.Rule))
	}
	if item.Cause == bus.CauseDrift && !rule.Generation.Synchronize {
		// Only a synchronized rule repairs its downstream.
		return queue.Skip(ReasonNotSynchronized, fmt.Sprintf("generate rule %s of policy %s is not synchronized", item.Rule, item.Policy.Key))
	}
	excs, err := g.exceptions(ctx)
	if err != nil {
		return queue.Retry().For(ReasonAPIError).Because(err)
	}
	req, err := g.request(ctx, item, trigger)
	if err != nil {
		return queue.Retry().For(ReasonAPIError).Because(err)
	}
	resp := g.eng.Generate(ctx, req, pol, excs)
	if err := ctx.Err(); err != nil {
		return queue.Retry().For(ReasonEvaluationError).Because(fmt.Errorf("evaluation cut short: %w", err))
	}
	var rr *engine.RuleResponse
	for i := range resp.Rules {
		if resp.Rules[i].Name == item.Rule {
			rr = &resp.Rules[i]
			break
		}
	}
	switch {
	case rr == nil && syncsCEL(rule) && rule.SelectsOperation(req.Operation):
		// A synchronized GeneratingPolicy no longer triggered by the
		// trigger as it is now (its labels or its match conditions
		// changed, or the policy did): what it made for the trigger goes,
		// as in Kyverno. (An operation the policy does not select says
		// nothing about the trigger.)
		return g.deleteDownstream(ctx, pol.Raw, rule.Generation.DownstreamKinds(), policySelector(pol.Raw, rule.Name, string(trigger.GetUID())), nil)
	case rr == nil:
		return queue.Skip(ReasonRuleNotTriggered, "the rule does not match the trigger as it is now")
	case rr.Status == engine.StatusError && rr.Refused:
		// Another namespace, Verdict's own Secrets, a POST that is not a
		// review: no retry changes what the policy may read.
		return queue.Poison(fmt.Sprintf("rule %s: %s", rr.Name, rr.Message)).For(ReasonReadRefused)
	case rr.Status == engine.StatusError:
		return queue.Retry().For(ReasonEvaluationError).Because(fmt.Errorf("rule %s: %s", rr.Name, rr.Message))
	case rr.Status != engine.StatusPass:
		return queue.Skip(ReasonRuleNotTriggered, fmt.Sprintf("rule %s: %s %s", rr.Name, rr.Status, rr.Message))
	}

	gvk := trigger.GroupVersionKind()
	labels := Labels(pol.Raw.Metadata.Namespace, pol.Raw.Metadata.Name, item.Rule,
		Trigger{GVK: gvk, Namespace: trigger.GetNamespace(), Name: trigger.GetName(), UID: string(trigger.GetUID())})
	if policy.IsCELPolicyKind(pol.Raw.Kind) {
		labels[LabelPolicyKind] = pol.Raw.Kind
	}
	writes := make([]write, 0, len(rr.Generated))
	for _, obj := range rr.Generated {
		w, res, ok := g.prepare(obj, pol.Raw, labels)
		if !ok {
			return res
		}
		writes = append(writes, w)
	}
	if syncsCEL(rule) {
		if res, ok := g.recordKinds(ctx, pol.Raw, writes); !ok {
			return res
		}
	}
	for _, w := range writes {
		if res, ok := g.apply(ctx, w); !ok {
			return res
		}
	}
	if syncsCEL(rule) {
		stale, res, ok := g.deleteStale(ctx, pol, rule, string(trigger.GetUID()), writes)
		if !ok {
			return res
		}
		if stale > 0 {
			return queue.Done().For(ReasonApplied).Detailed(fmt.Sprintf("%d objects applied, %d no longer generated deleted", len(writes), stale))
		}
	}
	return queue.Done().For(ReasonApplied)
}

// trigger reads the item's trigger from the API: it must exist with the
// item's uid (a CREATE is published before the object is stored: the
// checker's grace period covers that) and not be on its way out.
func (g *Generator) trigger(ctx context.Context, m *queue.Msg, item bus.WorkItem) (*unstructured.Unstructured, queue.Outcome, bool) {
	ref := item.Trigger
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || ref.Kind == "" || ref.Name == "" || ref.UID == "" {
		return nil, queue.Poison("the trigger reference names no object").For(ReasonInvalidItem), false
	}
	mapping, err := g.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			g.mapper.Reset()
			return nil, queue.Retry().For(ReasonKindNotServed).Because(fmt.Errorf("the trigger's kind: %w", err)), false
		}
		return nil, queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("the trigger's kind: %w", err)), false
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		// The admission request of a cluster-scoped object may carry a
		// namespace (a Namespace's own name): it is no part of the
		// object's identity.
		ref.Namespace = ""
	}
	// One read: the object whole, checked as internal/platform/apicheck checks a
	// reference (the name has the item's uid, at the item's version or a
	// later one; a CREATE is published before the object is stored, so
	// one not found yet is asked about again within the grace period).
	// An UPDATE is published before the API server stores it: the
	// trigger still at the item's version is the object before the
	// update, so it is read from the API, and asked about again within
	// the grace period (after it, the update was refused or changed
	// nothing, and the object as stored is the one to evaluate).
	updating := item.Operation == engine.OpUpdate && (item.Cause == "" || item.Cause == bus.CauseAdmission) && ref.ResourceVersion != ""
	obj, err := g.cachedTrigger(ref)
	if obj != nil && updating && obj.GetResourceVersion() == ref.ResourceVersion {
		obj = nil
	}
	if obj == nil {
		obj, err = g.resource(mapping, ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		if item.Cause != bus.CauseDrift && item.Cause != bus.CausePolicy && time.Since(m.Published) < g.check.Grace() {
			return nil, queue.RetryAfter(g.pendingDelay(m)).For(ReasonTriggerPending).Because(errors.New("the trigger is not stored yet")), false
		}
		// (Drift and policy items name a trigger seen in the cluster: one
		// not found is gone.)
		return nil, queue.Skip(ReasonTriggerNotFound, "the trigger does not exist"), false
	case err != nil:
		return nil, queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("read the trigger: %w", err)), false
	case string(obj.GetUID()) != ref.UID:
		return nil, queue.Skip(ReasonTriggerUIDMismatch, "the trigger's name belongs to an object with another uid"), false
	case apicheck.Newer(ref.ResourceVersion, obj.GetResourceVersion()):
		return nil, queue.Skip(ReasonTriggerFuture, "the item claims a trigger version the object has not reached"), false
	case obj.GetDeletionTimestamp() != nil:
		return nil, queue.Skip(ReasonTriggerDeleting, "the trigger is being deleted"), false
	case updating && obj.GetResourceVersion() == ref.ResourceVersion && time.Since(m.Published) < g.check.Grace():
		return nil, queue.RetryAfter(g.pendingDelay(m)).For(ReasonTriggerPending).Because(errors.New("the trigger's update is not stored yet")), false
	}
	return obj, queue.Outcome{}, true
}

// cachedTrigger is a Namespace trigger as the policy cache's watch of
// Namespaces holds it, when it holds it with the item's uid at the item's
// version or a later one (nil otherwise: the API is asked). Namespaces are
// the most common trigger of generate rules.
func (g *Generator) cachedTrigger(ref bus.ResourceRef) (*unstructured.Unstructured, error) {
	if ref.Kind != "Namespace" || ref.APIVersion != "v1" {
		return nil, nil
	}
	ns, ok := g.pc.Namespace(ref.Name)
	if !ok || string(ns.UID) != ref.UID || apicheck.Newer(ref.ResourceVersion, ns.ResourceVersion) {
		return nil, nil
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ns)
	if err != nil {
		return nil, nil
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetAPIVersion("v1")
	u.SetKind("Namespace")
	return u, nil
}

// firstRetry is how soon a trigger not stored yet (or not deleted yet)
// is asked about again on the item's first delivery: the webhook's answer
// and the API server's write are usually milliseconds apart.
const firstRetry = 50 * time.Millisecond

// pendingDelay is when to ask again about a trigger not stored (or not
// deleted) yet: soon after the first delivery, then as the checker says
// (the delays double with the item's age, so the grace period is spanned
// in a few attempts).
func (g *Generator) pendingDelay(m *queue.Msg) time.Duration {
	if m.Delivery <= 1 {
		return firstRetry
	}
	return g.check.RetryIn(m.Published)
}

// policy reads the item's policy from the API and compiles its current
// spec. A policy deleted, or replaced by another of the same name, ends
// the item.
//
// The policy cache follows the API's watch: a policy it holds with the
// item's uid, at the item's version or a later one, is current. Otherwise
// (not there yet, replaced, gone, or invalid) the API says; it always
// does with fresh set, for items that race with a policy's deletion
// (drift: a downstream deleted because its policy was).
func (g *Generator) policy(ctx context.Context, ref bus.PolicyRef, fresh bool) (*engine.Policy, queue.Outcome, bool) {
	if p := g.pc.PolicyOf(ref.Kind, ref.Key); !fresh && p != nil && (ref.UID == "" || p.Raw.Metadata.UID == ref.UID) &&
		!apicheck.Newer(ref.ResourceVersion, p.Raw.Metadata.ResourceVersion) {
		return p, queue.Outcome{}, true
	}
	ri, name, err := g.policyClient(ref.Kind, ref.Key)
	if err != nil {
		return nil, queue.Poison(err.Error()).For(ReasonInvalidItem), false
	}
	obj, err := ri.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, queue.Skip(ReasonPolicyGone, fmt.Sprintf("policy %s is gone", ref.Key)), false
	case err != nil:
		return nil, queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("read policy %s: %w", ref.Key, err)), false
	case ref.UID != "" && string(obj.GetUID()) != ref.UID:
		return nil, queue.Skip(ReasonPolicyReplaced, fmt.Sprintf("policy %s was deleted and created again", ref.Key)), false
	}
	raw, err := policy.FromObject(obj.Object)
	if err != nil {
		return nil, queue.Poison(fmt.Sprintf("policy %s: %v", ref.Key, err)).For(ReasonPolicyInvalid), false
	}
	if raw.Candidate() {
		// Queued before it became a candidate: a candidate generates
		// and mutates nothing.
		return nil, queue.Skip(ReasonPolicyCandidate, fmt.Sprintf("policy %s is a candidate", ref.Key)), false
	}
	p, err := g.eng.Compile(raw)
	if err != nil {
		return nil, queue.Poison(err.Error()).For(ReasonPolicyInvalid), false
	}
	return p, queue.Outcome{}, true
}

// exceptions lists the PolicyExceptions (none when their kind is not
// served): the policy cache's, or before it has synced, the API's, read
// as the cache reads them (policycache.ExceptionConfig: off, or how far
// each reaches). One that does not parse, or that the settings leave
// out, is left out, as the webhook leaves it out.
func (g *Generator) exceptions(ctx context.Context) ([]*policy.Exception, error) {
	if set, err := g.pc.Set(ctx); err == nil {
		return set.Exceptions, nil
	}
	var out []*policy.Exception
	for _, gvr := range g.pc.API().Exceptions() {
		list, err := g.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("list policy exceptions: %w", err)
		}
		for i := range list.Items {
			if policy.IsCELException(list.Items[i].Object) {
				continue // the CEL kinds' (the cache's set has them)
			}
			clusterWide, err := g.pc.Exceptions().Admit(list.Items[i].GetNamespace())
			var e *policy.Exception
			if err == nil {
				e, err = policy.ExceptionFromObject(list.Items[i].Object)
			}
			if err != nil {
				g.o.log.Warn().Err(err).Str(logkey.Exception, list.Items[i].GetNamespace()+"/"+list.Items[i].GetName()).Msg("exceptionLeftOut")
				continue
			}
			e.ClusterWide = clusterWide
			out = append(out, e)
		}
	}
	return out, nil
}

// request is the engine request of the trigger as it is now: the
// admission's operation (CREATE or UPDATE; CREATE otherwise) and requester
// (as requester left it), and the labels of the trigger's namespace.
func (g *Generator) request(ctx context.Context, item bus.WorkItem, trigger *unstructured.Unstructured) (*engine.Request, error) {
	op := item.Operation
	if op != engine.OpCreate && op != engine.OpUpdate {
		op = engine.OpCreate
	}
	req := &engine.Request{Operation: op, Object: trigger.Object, Name: trigger.GetName(), UserInfo: item.UserInfo}
	if ns := trigger.GetNamespace(); ns != "" && trigger.GetKind() != "Namespace" {
		l, err := g.namespaceLabels(ctx, ns)
		if err != nil {
			return nil, err
		}
		req.NamespaceLabels = l
	}
	return req, nil
}

// namespaceLabels are the labels of a namespace: from the policy cache's
// watch when it has the namespace, from the API otherwise (one created a
// moment ago).
func (g *Generator) namespaceLabels(ctx context.Context, ns string) (map[string]string, error) {
	if l, err := g.pc.NamespaceLabels(ctx, ns); err == nil && l != nil {
		return l, nil
	}
	nsObj, err := g.dyn.Resource(namespaces).Get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("labels of namespace %s: %w", ns, err)
	}
	return nsObj.GetLabels(), nil
}

// write is one generated object, ready to apply.
type write struct {
	mapping *meta.RESTMapping
	obj     *unstructured.Unstructured
}

// mutateTargets works a mutate item: the rule (as the policy is stored
// now) is evaluated on the trigger with Engine.MutateExisting, which reads
// the targets from the cluster and patches them; each patched target is
// written back with an update at the resourceVersion it was read at, so a
// target changed meanwhile is a conflict (retried: the next attempt reads
// it again) and never a lost write. A target the rule leaves as it is
// (already patched, preconditions not met) is not written: a redelivered
// item changes nothing.
func (g *Generator) mutateTargets(ctx context.Context, item bus.WorkItem, trigger *unstructured.Unstructured, pol *engine.Policy) queue.Outcome {
	excs, err := g.exceptions(ctx)
	if err != nil {
		return queue.Retry().For(ReasonAPIError).Because(err)
	}
	req, err := g.request(ctx, item, trigger)
	if err != nil {
		return queue.Retry().For(ReasonAPIError).Because(err)
	}
	resp := g.eng.MutateExisting(ctx, req, pol, excs)
	if err := ctx.Err(); err != nil {
		return queue.Retry().For(ReasonEvaluationError).Because(fmt.Errorf("evaluation cut short: %w", err))
	}
	var rr *engine.RuleResponse
	for i := range resp.Rules {
		if resp.Rules[i].Name == item.Rule {
			rr = &resp.Rules[i]
		}
	}
	if rr == nil {
		return queue.Skip(ReasonRuleNotTriggered, "the rule does not match the trigger as it is now, or has no target")
	}
	if rr.Status == engine.StatusError && rr.Refused {
		return queue.Poison(fmt.Sprintf("rule %s: %s", rr.Name, rr.Message)).For(ReasonReadRefused)
	}
	for _, t := range rr.Targets {
		switch t.Status {
		case engine.StatusError:
			return queue.Retry().For(ReasonEvaluationError).Because(fmt.Errorf("rule %s: %s", rr.Name, t.Message))
		case engine.StatusPass:
			u := &unstructured.Unstructured{Object: t.Patched}
			gvk := u.GroupVersionKind()
			what := fmt.Sprintf("target %s %s", gvk.Kind, path(u.GetNamespace(), u.GetName()))
			if err := namespaceAllowed(pol.Raw, u.GetNamespace()); err != nil {
				return queue.Poison(fmt.Sprintf("%s: %v", what, err)).For(ReasonNamespaceForbidden)
			}
			mapping, err := g.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				return queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("%s: %w", what, err))
			}
			if t.Subresource != "" {
				what += " (" + t.Subresource + ")"
			}
			if _, err := g.resource(mapping, u.GetNamespace()).Update(ctx, u, metav1.UpdateOptions{FieldManager: FieldManager}, subresources(t.Subresource)...); err != nil {
				if Permanent(err) {
					return queue.Poison(fmt.Sprintf("update %s: %v", what, err)).For(ReasonRefused)
				}
				return queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("update %s: %w", what, err))
			}
			g.m.resources.WithLabelValues(gvk.Kind).Inc()
		}
	}
	return queue.Done().For(ReasonApplied)
}

// subresources is the path of a write through sub, none for "".
func subresources(sub string) []string {
	if sub == "" {
		return nil
	}
	return []string{sub}
}

// prepare checks one generated object (its kind is served, its namespace
// fits its scope and the policy) and labels it.
func (g *Generator) prepare(obj map[string]any, pol *policy.Policy, labels map[string]string) (write, queue.Outcome, bool) {
	u := &unstructured.Unstructured{Object: obj}
	gvk := u.GroupVersionKind()
	what := fmt.Sprintf("%s %s", gvk.Kind, path(u.GetNamespace(), u.GetName()))
	if gvk.Kind == "" || gvk.Version == "" || u.GetName() == "" {
		return write{}, queue.Poison("a generated object needs an apiVersion, a kind and a name: " + what).For(ReasonRefused), false
	}
	mapping, err := g.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		if meta.IsNoMatchError(err) {
			g.mapper.Reset()
			return write{}, queue.Retry().For(ReasonKindNotServed).Because(fmt.Errorf("generated %s: %w", what, err)), false
		}
		return write{}, queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("generated %s: %w", what, err)), false
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		if u.GetNamespace() == "" {
			return write{}, queue.Poison(fmt.Sprintf("generated %s is namespaced and has no namespace", what)).For(ReasonRefused), false
		}
	} else {
		u.SetNamespace("")
	}
	if err := namespaceAllowed(pol, u.GetNamespace()); err != nil {
		return write{}, queue.Poison(fmt.Sprintf("generated %s: %v", what, err)).For(ReasonNamespaceForbidden), false
	}
	merged := u.GetLabels()
	if merged == nil {
		merged = map[string]string{}
	}
	for k, v := range labels {
		merged[k] = v
	}
	u.SetLabels(merged)
	return write{mapping: mapping, obj: u}, queue.Outcome{}, true
}

// namespaceAllowed says whether pol may generate into namespace (empty:
// a cluster-scoped object): a namespaced Policy only into its own.
func namespaceAllowed(pol *policy.Policy, namespace string) error {
	if !pol.Namespaced() || namespace == pol.Metadata.Namespace {
		return nil
	}
	if namespace == "" {
		return fmt.Errorf("policy %s is namespaced and may not generate cluster-scoped resources", pol.Key())
	}
	return fmt.Errorf("policy %s is namespaced and may generate only into namespace %s, not %s", pol.Key(), pol.Metadata.Namespace, namespace)
}

// apply writes one object with server-side apply (one field manager,
// force): applying the same object again changes nothing.
func (g *Generator) apply(ctx context.Context, w write) (queue.Outcome, bool) {
	_, err := g.resource(w.mapping, w.obj.GetNamespace()).Apply(ctx, w.obj.GetName(), w.obj, metav1.ApplyOptions{FieldManager: FieldManager, Force: true})
	if err == nil {
		g.m.resources.WithLabelValues(w.obj.GetKind()).Inc()
		return queue.Outcome{}, true
	}
	what := fmt.Sprintf("apply %s %s", w.obj.GetKind(), path(w.obj.GetNamespace(), w.obj.GetName()))
	if Permanent(err) {
		return queue.Poison(fmt.Sprintf("%s: %v", what, err)).For(ReasonRefused), false
	}
	return queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("%s: %w", what, err)), false
}

// Permanent reports whether the API server's refusal of a write will not
// change by trying again: the object is invalid, the request malformed,
// or the write forbidden (RBAC, a namespace being terminated: an
// operator must act; a dead letter can be re-queued after the fix).
// Everything else (timeouts, conflicts, throttling, unavailability, a
// namespace not found yet) is transient.
func Permanent(err error) bool {
	return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) || apierrors.IsForbidden(err) ||
		apierrors.IsMethodNotSupported(err) || apierrors.IsNotAcceptable(err) ||
		apierrors.IsUnsupportedMediaType(err) || apierrors.IsRequestEntityTooLargeError(err)
}

func (g *Generator) resource(mapping *meta.RESTMapping, namespace string) dynamic.ResourceInterface {
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return g.dyn.Resource(mapping.Resource).Namespace(namespace)
	}
	return g.dyn.Resource(mapping.Resource)
}

func path(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
