package generator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// listPage bounds one list call of the generator.
const listPage = 500

// downstreamSelector selects what rule of the policy (policyNamespace
// empty for a cluster-wide kind) generated, for one trigger when
// triggerUID is set. A GeneratingPolicy's downstream carries its kind
// (LabelPolicyKind); a ClusterPolicy's or Policy's carries none, so two
// policies of one name never select each other's.
func downstreamSelector(kind, policyNamespace, policyName, rule, triggerUID string) string {
	set := labels.Set{
		LabelManagedBy:       ManagedByValue,
		LabelPolicyName:      labelValue(policyName),
		LabelPolicyNamespace: labelValue(policyNamespace),
		LabelRuleName:        labelValue(rule),
	}
	if triggerUID != "" {
		set[LabelTriggerUID] = labelValue(triggerUID)
	}
	sel := labels.SelectorFromSet(set)
	op, values := selection.DoesNotExist, []string(nil)
	if policy.IsCELPolicyKind(kind) {
		op, values = selection.Equals, []string{kind}
	}
	req, err := labels.NewRequirement(LabelPolicyKind, op, values)
	if err != nil {
		// A CEL kind is a valid label value: never reached.
		return sel.String()
	}
	return sel.Add(*req).String()
}

// policySelector is downstreamSelector for a policy's rule.
func policySelector(p *policy.Policy, rule, triggerUID string) string {
	return downstreamSelector(p.Kind, p.Metadata.Namespace, p.Metadata.Name, rule, triggerUID)
}

// triggerOf reads the trigger a generated object's labels name (ok is
// false when they name none).
func triggerOf(l map[string]string) (bus.ResourceRef, bool) {
	ref := bus.ResourceRef{
		APIVersion: schema.GroupVersion{Group: l[LabelTriggerGroup], Version: l[LabelTriggerVersion]}.String(),
		Kind:       l[LabelTriggerKind],
		Namespace:  l[LabelTriggerNS],
		Name:       l[LabelTriggerName],
		UID:        l[LabelTriggerUID],
	}
	return ref, ref.Kind != "" && ref.Name != "" && ref.UID != "" && l[LabelTriggerVersion] != ""
}

// triggerDeleted works a WorkDeleteDownstream item: once the trigger is
// gone (or on its way out), what the synchronized rule generated for it is
// deleted. A trigger that still stands after the grace period (its delete
// was refused) keeps its downstream.
func (g *Generator) triggerDeleted(ctx context.Context, m *queue.Msg, item bus.WorkItem) queue.Outcome {
	ref := item.Trigger
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || ref.Kind == "" || ref.Name == "" || ref.UID == "" {
		return queue.Poison("the trigger reference names no object").For(ReasonInvalidItem)
	}
	mapping, err := g.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
	if err != nil {
		return queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("the trigger's kind: %w", err))
	}
	if mapping.Scope.Name() != meta.RESTScopeNameNamespace {
		ref.Namespace = ""
	}
	obj, err := g.resource(mapping, ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err), err == nil && string(obj.GetUID()) != ref.UID:
		// Gone (or replaced by another object of the same name).
	case err != nil:
		return queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("read the trigger: %w", err))
	case obj.GetDeletionTimestamp() != nil:
		// On its way out (finalizers): its downstream goes now.
	case time.Since(m.Published) < g.check.Grace():
		return queue.RetryAfter(g.pendingDelay(m)).For(ReasonTriggerNotDeleted).Because(errors.New("the trigger is not deleted yet"))
	default:
		return queue.Skip(ReasonTriggerNotDeleted, "the trigger was not deleted (its delete was refused)")
	}
	pol, res, ok := g.policy(ctx, item.Policy, true)
	if !ok {
		return res
	}
	rule := pol.Rule(item.Rule)
	if rule == nil || rule.Generation == nil || !rule.Generation.Synchronize {
		return queue.Skip(ReasonNotSynchronized, fmt.Sprintf("policy %s has no synchronized generate rule %s", item.Policy.Key, item.Rule))
	}
	return g.deleteDownstream(ctx, pol.Raw, rule.Generation.DownstreamKinds(), policySelector(pol.Raw, rule.Name, ref.UID), nil)
}

// policyDeleted works a WorkPolicyDeleted item: once the policy is gone,
// what its synchronized rule generated is deleted (the item is made only
// for rules without orphanDownstreamOnPolicyDelete). A policy of the same
// name that exists again owns those objects (their labels name it): they
// stay.
func (g *Generator) policyDeleted(ctx context.Context, item bus.WorkItem) queue.Outcome {
	ri, name, err := g.policyClient(item.Policy.Kind, item.Policy.Key)
	if err != nil {
		return queue.Poison(err.Error()).For(ReasonInvalidItem)
	}
	_, err = ri.Get(ctx, name, metav1.GetOptions{})
	switch {
	case err == nil:
		return queue.Skip(ReasonPolicyExists, fmt.Sprintf("policy %s exists", item.Policy.Key))
	case !apierrors.IsNotFound(err):
		return queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("read policy %s: %w", item.Policy.Key, err))
	}
	if len(item.Targets) == 0 {
		return queue.Poison("a policyDeleted item names no downstream kinds").For(ReasonInvalidItem)
	}
	kinds := make([]policy.KindRef, 0, len(item.Targets))
	for _, t := range item.Targets {
		kinds = append(kinds, policy.KindRef{APIVersion: t.APIVersion, Kind: t.Kind})
	}
	ns, pname, namespaced := strings.Cut(item.Policy.Key, "/")
	if !namespaced {
		ns, pname = "", item.Policy.Key
	}
	owner := &policy.Policy{Kind: item.Policy.Kind, Metadata: policy.ObjectMeta{Name: pname, Namespace: ns}}
	if owner.Kind == "" {
		owner.Kind = policy.KindClusterPolicy
		if namespaced {
			owner.Kind = policy.KindPolicy
		}
	}
	if owner.Namespaced() != namespaced {
		return queue.Poison(fmt.Sprintf("policy key %q does not fit kind %s", item.Policy.Key, owner.Kind)).For(ReasonInvalidItem)
	}
	return g.deleteDownstream(ctx, owner, kinds, policySelector(owner, item.Rule, ""), nil)
}

// deleteDownstream deletes, kind by kind, the objects the selector
// selects (in the namespace of a namespaced policy, everywhere
// otherwise) but those keep holds, each with a uid precondition so that
// an object replaced meanwhile stays; one already gone counts as deleted.
func (g *Generator) deleteDownstream(ctx context.Context, pol *policy.Policy, kinds []policy.KindRef, selector string, keep map[objectKey]bool) queue.Outcome {
	deleted, res, ok := g.deleteSelected(ctx, pol, kinds, selector, keep)
	if !ok {
		return res
	}
	return queue.Done().For(ReasonDeleted).Detailed(fmt.Sprintf("%d downstream objects deleted", deleted))
}

// deleteSelected is deleteDownstream's work: how many objects it deleted,
// or the outcome that ends the item (ok false).
func (g *Generator) deleteSelected(ctx context.Context, pol *policy.Policy, kinds []policy.KindRef, selector string, keep map[objectKey]bool) (int, queue.Outcome, bool) {
	deleted := 0
	for _, k := range kinds {
		gv, err := schema.ParseGroupVersion(k.APIVersion)
		if err != nil {
			return deleted, queue.Poison(fmt.Sprintf("downstream kind %s %s: %v", k.APIVersion, k.Kind, err)).For(ReasonInvalidItem), false
		}
		mapping, err := g.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: k.Kind}, gv.Version)
		if meta.IsNoMatchError(err) {
			// Not served: nothing of that kind exists.
			continue
		}
		if err != nil {
			return deleted, queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("downstream kind %s: %w", k.Kind, err)), false
		}
		ns := ""
		if pol.Namespaced() {
			ns = pol.Metadata.Namespace
		}
		ri := g.resource(mapping, ns)
		opts := metav1.ListOptions{LabelSelector: selector, Limit: listPage}
		for {
			list, err := ri.List(ctx, opts)
			if err != nil {
				return deleted, queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("list downstream %s: %w", k.Kind, err)), false
			}
			for i := range list.Items {
				o := &list.Items[i]
				if keep[keyOf(mapping.GroupVersionKind.GroupKind(), o.GetNamespace(), o.GetName())] {
					continue
				}
				err := g.resource(mapping, o.GetNamespace()).Delete(ctx, o.GetName(), uidPrecondition(o.GetUID()))
				switch {
				case err == nil, apierrors.IsNotFound(err):
					deleted++
					g.m.deleted.WithLabelValues(k.Kind).Inc()
				case apierrors.IsConflict(err):
					// Replaced by another object of that name: not ours to delete.
				case Permanent(err):
					return deleted, queue.Poison(fmt.Sprintf("delete %s %s: %v", k.Kind, path(o.GetNamespace(), o.GetName()), err)).For(ReasonRefused), false
				default:
					return deleted, queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("delete %s %s: %w", k.Kind, path(o.GetNamespace(), o.GetName()), err)), false
				}
			}
			if opts.Continue = list.GetContinue(); opts.Continue == "" {
				break
			}
		}
	}
	return deleted, queue.Outcome{}, true
}

// policyClient is the client of the policy a key names ("name" for a
// ClusterPolicy, "namespace/name" for a Policy) and its name.
func (g *Generator) policyClient(kind, key string) (dynamic.ResourceInterface, string, error) {
	ns, name, namespaced := strings.Cut(key, "/")
	if !namespaced {
		name, ns = ns, ""
	}
	if name == "" || (namespaced && ns == "") {
		return nil, "", fmt.Errorf("policy key %q", key)
	}
	if kind == "" {
		kind = policy.KindClusterPolicy
		if namespaced {
			kind = policy.KindPolicy
		}
	}
	gvr, ok := g.pc.API().Resource(kind)
	if !ok {
		return nil, "", fmt.Errorf("policy kind %q", kind)
	}
	if namespaced {
		return g.dyn.Resource(gvr).Namespace(ns), name, nil
	}
	return g.dyn.Resource(gvr), name, nil
}

// policyChanged works a WorkPolicyChanged item: the rule's policy was
// created or changed, and the item fans out into one apply item per
// trigger. For a synchronized generate rule with data, every trigger it
// generated for (read from its downstream's labels), so the downstream
// follows the policy; for generateExisting, every existing resource that
// triggers the rule; for a mutate-existing rule with
// mutateExistingOnPolicyUpdate, every existing trigger. Fanned-out items
// have deterministic ids: a redelivered fan-out, or every replica making
// the same one, queues each once.
func (g *Generator) policyChanged(ctx context.Context, item bus.WorkItem) queue.Outcome {
	pol, res, ok := g.policy(ctx, item.Policy, true)
	if !ok {
		return res
	}
	rule := pol.Rule(item.Rule)
	if rule == nil {
		return queue.Skip(ReasonRuleNotTriggered, fmt.Sprintf("policy %s has no rule %s", item.Policy.Key, item.Rule))
	}
	ref := bus.PolicyRefOf(pol)
	queued := 0
	publish := func(it bus.WorkItem) error {
		it.Policy, it.Rule, it.Cause, it.Timestamp = ref, rule.Name, bus.CausePolicy, time.Now().UTC()
		msg, err := bus.WorkMessage(it)
		if err != nil {
			return err
		}
		if _, err := g.conn.PublishSync(ctx, msg); err != nil {
			return err
		}
		queued++
		g.m.fannedOut.WithLabelValues(string(it.Kind)).Inc()
		return nil
	}
	switch item.Kind {
	case bus.WorkGenerate:
		if rule.Generation == nil {
			return queue.Skip(ReasonRuleNotTriggered, fmt.Sprintf("policy %s has no generate rule %s", item.Policy.Key, item.Rule))
		}
		if rule.Generation.Synchronize && rule.Generation.GeneratesData() {
			if res, ok := g.fanOutDownstream(ctx, pol, rule, publish); !ok {
				return res
			}
		}
		if pol.Raw.GenerateExisting(&rule.Rule) {
			if res, ok := g.fanOutTriggers(ctx, pol, rule, bus.WorkGenerate, publish); !ok {
				return res
			}
		}
	case bus.WorkMutate:
		if !pol.Raw.MutateExistingOnPolicyUpdate(&rule.Rule) {
			return queue.Skip(ReasonRuleNotTriggered, fmt.Sprintf("rule %s of policy %s does not mutate existing resources on policy changes", item.Rule, item.Policy.Key))
		}
		if res, ok := g.fanOutTriggers(ctx, pol, rule, bus.WorkMutate, publish); !ok {
			return res
		}
	}
	return queue.Done().For(ReasonFannedOut).Detailed(fmt.Sprintf("%d items queued", queued))
}

// fanOutDownstream queues an apply item for each trigger the rule has
// generated for.
func (g *Generator) fanOutDownstream(ctx context.Context, pol *engine.Policy, rule *engine.Rule, publish func(bus.WorkItem) error) (queue.Outcome, bool) {
	seen := map[string]bool{}
	sel := policySelector(pol.Raw, rule.Name, "")
	for _, k := range rule.Generation.DownstreamKinds() {
		gv, err := schema.ParseGroupVersion(k.APIVersion)
		if err != nil {
			continue
		}
		mapping, err := g.mapper.RESTMapping(schema.GroupKind{Group: gv.Group, Kind: k.Kind}, gv.Version)
		if meta.IsNoMatchError(err) {
			continue
		}
		if err != nil {
			return queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("downstream kind %s: %w", k.Kind, err)), false
		}
		ns := ""
		if pol.Raw.Namespaced() {
			ns = pol.Raw.Metadata.Namespace
		}
		opts := metav1.ListOptions{LabelSelector: sel, Limit: listPage}
		for {
			list, err := g.resource(mapping, ns).List(ctx, opts)
			if err != nil {
				return queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("list downstream %s: %w", k.Kind, err)), false
			}
			for i := range list.Items {
				t, ok := triggerOf(list.Items[i].GetLabels())
				if !ok || seen[t.UID] {
					continue
				}
				seen[t.UID] = true
				if err := publish(bus.WorkItem{Kind: bus.WorkGenerate, Trigger: t}); err != nil {
					return queue.Retry().For(ReasonQueueError).Because(fmt.Errorf("queue the item of trigger %s: %w", path(t.Namespace, t.Name), err)), false
				}
			}
			if opts.Continue = list.GetContinue(); opts.Continue == "" {
				break
			}
		}
	}
	return queue.Outcome{}, true
}

// fanOutTriggers queues an item of kind for each existing resource that
// triggers the rule (it matches and its preconditions hold): the kinds
// the rule's match block names (not those only a wildcard selects), in
// the policy's namespace for a namespaced Policy.
func (g *Generator) fanOutTriggers(ctx context.Context, pol *engine.Policy, rule *engine.Rule, kind queue.WorkKind, publish func(bus.WorkItem) error) (queue.Outcome, bool) {
	kinds, err := g.kinds.List(ctx)
	if err != nil {
		return queue.Retry().For(ReasonAPIError).Because(err), false
	}
	excs, err := g.exceptions(ctx)
	if err != nil {
		return queue.Retry().For(ReasonAPIError).Because(err), false
	}
	only := &engine.Policy{}
	*only = *pol
	only.Rules = []*engine.Rule{rule}
	nsLabels := map[string]map[string]string{}
	for _, k := range kinds {
		if rule.SelectsKind(k.GVK.Group, k.GVK.Version, k.GVK.Kind) != engine.KindNamed || (pol.Raw.Namespaced() && !k.Namespaced) {
			continue
		}
		var ri dynamic.ResourceInterface = g.dyn.Resource(k.GVR)
		if pol.Raw.Namespaced() {
			ri = g.dyn.Resource(k.GVR).Namespace(pol.Raw.Metadata.Namespace)
		}
		opts := metav1.ListOptions{Limit: listPage}
		for {
			list, err := ri.List(ctx, opts)
			if err != nil {
				return queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("list %s: %w", k.GVR, err)), false
			}
			for i := range list.Items {
				obj := &list.Items[i]
				if obj.GetDeletionTimestamp() != nil {
					continue
				}
				req, err := g.existingRequest(ctx, obj, nsLabels)
				if err != nil {
					return queue.Retry().For(ReasonAPIError).Because(err), false
				}
				var resp engine.Response
				if kind == bus.WorkMutate {
					resp = g.eng.MutateExistingTriggers(ctx, req, only, excs)
				} else {
					resp = g.eng.GenerateTriggers(ctx, req, only, excs)
				}
				for _, rr := range resp.Rules {
					if rr.Name != rule.Name || !rr.Background {
						continue
					}
					t := bus.ResourceRef{
						APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(), Namespace: obj.GetNamespace(),
						Name: obj.GetName(), UID: string(obj.GetUID()), ResourceVersion: obj.GetResourceVersion(),
					}
					if err := publish(bus.WorkItem{Kind: kind, Trigger: t}); err != nil {
						return queue.Retry().For(ReasonQueueError).Because(fmt.Errorf("queue the item of trigger %s: %w", path(t.Namespace, t.Name), err)), false
					}
				}
			}
			if opts.Continue = list.GetContinue(); opts.Continue == "" {
				break
			}
		}
	}
	return queue.Outcome{}, true
}

// existingRequest is the engine request of an existing resource seen in
// the background: a CREATE without a requester, with the labels of its
// namespace (read once per namespace).
func (g *Generator) existingRequest(ctx context.Context, obj *unstructured.Unstructured, nsLabels map[string]map[string]string) (*engine.Request, error) {
	req := &engine.Request{Operation: engine.OpCreate, Object: obj.Object, Name: obj.GetName()}
	ns := obj.GetNamespace()
	if ns == "" || obj.GetKind() == "Namespace" {
		return req, nil
	}
	l, ok := nsLabels[ns]
	if !ok {
		nsObj, err := g.dyn.Resource(namespaces).Get(ctx, ns, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("labels of namespace %s: %w", ns, err)
		}
		if err == nil {
			l = nsObj.GetLabels()
		}
		nsLabels[ns] = l
	}
	req.NamespaceLabels = l
	return req, nil
}

// uidPrecondition is a delete option that deletes only the object with
// uid.
func uidPrecondition(uid types.UID) metav1.DeleteOptions {
	return metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
}

// objectKey names one object: its group, kind, namespace and name.
type objectKey struct {
	gk              schema.GroupKind
	namespace, name string
}

func keyOf(gk schema.GroupKind, namespace, name string) objectKey {
	return objectKey{gk: gk, namespace: namespace, name: name}
}

// syncsCEL reports whether rule is a synchronized GeneratingPolicy's: what
// it generates is known once evaluated, so its kinds are recorded in the
// policy's status, and what it no longer generates for a trigger goes.
func syncsCEL(rule *engine.Rule) bool {
	return rule.Generation != nil && rule.Generation.FromCEL && rule.Generation.Synchronize
}

// recordKinds adds the kinds of writes to the policy's status
// (status.downstreamKinds) where it lacks them, before any of them is
// written: the kinds recorded are where the watcher looks for drift and
// where the generator looks when the trigger or the policy goes, so an
// object is never written where nobody would look. The status is read
// and updated in the API (a conflict is retried); a policy replaced
// meanwhile ends the item.
func (g *Generator) recordKinds(ctx context.Context, pol *policy.Policy, writes []write) (queue.Outcome, bool) {
	have := pol.RecordedKinds()
	missing := func(have []policy.KindRef) []policy.KindRef {
		var out []policy.KindRef
		for _, w := range writes {
			k := policy.KindRef{APIVersion: w.obj.GetAPIVersion(), Kind: w.obj.GetKind()}
			if !slices.Contains(have, k) && !slices.Contains(out, k) {
				out = append(out, k)
			}
		}
		return out
	}
	if len(missing(have)) == 0 {
		return queue.Outcome{}, true
	}
	ri, name, err := g.policyClient(pol.Kind, pol.Key())
	if err != nil {
		return queue.Poison(err.Error()).For(ReasonInvalidItem), false
	}
	obj, err := ri.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return queue.Skip(ReasonPolicyGone, fmt.Sprintf("policy %s is gone", pol.Key())), false
	case err != nil:
		return queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("read policy %s: %w", pol.Key(), err)), false
	case string(obj.GetUID()) != pol.Metadata.UID:
		return queue.Skip(ReasonPolicyReplaced, fmt.Sprintf("policy %s was deleted and created again", pol.Key())), false
	}
	stored, err := policy.FromObject(obj.Object)
	if err != nil {
		return queue.Poison(fmt.Sprintf("policy %s: %v", pol.Key(), err)).For(ReasonPolicyInvalid), false
	}
	have = stored.RecordedKinds()
	add := missing(have)
	if len(add) == 0 {
		return queue.Outcome{}, true
	}
	all := append(slices.Clone(have), add...)
	kinds := make([]any, 0, len(all))
	for _, k := range all {
		kinds = append(kinds, map[string]any{"apiVersion": k.APIVersion, "kind": k.Kind})
	}
	if err := unstructured.SetNestedSlice(obj.Object, kinds, "status", "downstreamKinds"); err != nil {
		return queue.Poison(fmt.Sprintf("policy %s: status: %v", pol.Key(), err)).For(ReasonPolicyInvalid), false
	}
	updated, err := ri.UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return recordFailed(pol, err)
	}
	if kept, _, _ := unstructured.NestedSlice(updated.Object, "status", "downstreamKinds"); len(kept) == len(kinds) {
		return queue.Outcome{}, true
	}
	// The CRD pruned the field (Kyverno's own CRD, in adopt mode): the
	// kinds go into the policy's annotation instead, which every CRD
	// keeps.
	b, err := json.Marshal(all)
	if err != nil {
		return queue.Poison(fmt.Sprintf("policy %s: %v", pol.Key(), err)).For(ReasonPolicyInvalid), false
	}
	ann := updated.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[policy.AnnotationDownstreamKinds] = string(b)
	updated.SetAnnotations(ann)
	if _, err := ri.Update(ctx, updated, metav1.UpdateOptions{FieldManager: FieldManager}); err != nil {
		return recordFailed(pol, err)
	}
	return queue.Outcome{}, true
}

// recordFailed is the outcome of a write of the downstream kinds that
// failed: a conflict or an API error is retried, a refusal dead-letters.
func recordFailed(pol *policy.Policy, err error) (queue.Outcome, bool) {
	if Permanent(err) {
		return queue.Poison(fmt.Sprintf("record the downstream kinds of policy %s: %v", pol.Key(), err)).For(ReasonRefused), false
	}
	return queue.Retry().For(ReasonAPIError).Because(fmt.Errorf("record the downstream kinds of policy %s: %w", pol.Key(), err)), false
}

// deleteStale deletes what a synchronized GeneratingPolicy generated for
// the trigger before and did not generate now (written): a trigger
// changed, or the policy, so that an object is named otherwise or no
// longer made.
func (g *Generator) deleteStale(ctx context.Context, pol *engine.Policy, rule *engine.Rule, triggerUID string, written []write) (int, queue.Outcome, bool) {
	keep := make(map[objectKey]bool, len(written))
	for _, w := range written {
		keep[keyOf(w.mapping.GroupVersionKind.GroupKind(), w.obj.GetNamespace(), w.obj.GetName())] = true
	}
	return g.deleteSelected(ctx, pol.Raw, rule.Generation.DownstreamKinds(), policySelector(pol.Raw, rule.Name, triggerUID), keep)
}
