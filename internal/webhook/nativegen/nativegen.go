// Package nativegen has the API server enforce the ValidatingPolicies
// that ask for it (autogen.validatingAdmissionPolicy.enabled) and need
// nothing the API server lacks, as Kyverno's
// generateValidatingAdmissionPolicy does: it writes a
// ValidatingAdmissionPolicy and its binding for each, and the registrar
// leaves the policy out of Verdict's webhooks (registrar.Options.Generated),
// so the policy holds whatever the webhook is doing.
//
// It runs in the webhook's leader after each reconcile, when the chart
// enables it (webhook.generateAdmissionPolicies). A policy is generated
// when:
//
//   - it is a ValidatingPolicy (cluster-wide: the API server's policies
//     are), not in JSON mode, without params, with resource rules;
//   - it has no autogen rules for Pod controllers (the API server has no
//     autogen: set autogen.podControllers.controllers to []) and no CEL
//     PolicyException names it (the API server knows none);
//   - the generated policy compiles in the API server's CEL environment,
//     as the engine evaluates native policies (no Kyverno function);
//   - no ValidatingAdmissionPolicy or binding of its name exists that is
//     not Verdict's.
//
// The generated policy skips what no Verdict webhook ever receives (the
// system namespaces and the resources a cluster needs to heal itself:
// admissionfilter), as the webhooks do. It is labelled
// app.kubernetes.io/managed-by=verdict and owned by the ValidatingPolicy,
// so the garbage collector deletes it with the policy; one whose policy
// no longer asks for it is deleted here. The policy's status says
// whether it was generated (status.generated) and why not (the
// ValidatingAdmissionPolicyGenerated condition).
package nativegen

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/webhook/registrar"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// Labels of a generated policy and binding.
const (
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "verdict"
	// LabelGeneratedFrom names the ValidatingPolicy it was generated
	// from.
	LabelGeneratedFrom = policy.LabelGeneratedFrom
)

// The status condition a policy that asks for generation gets.
const (
	ConditionGenerated  = "ValidatingAdmissionPolicyGenerated"
	ReasonGenerated     = "Generated"
	ReasonNotGenerated  = "NotGenerated"
	messageGeneratedFmt = "enforced by the API server as ValidatingAdmissionPolicy %s"
	notRequested        = "autogen.validatingAdmissionPolicy.enabled is not true"
)

// Source is what the generator needs of the policy cache.
type Source interface {
	Policies() []*engine.Policy
}

// Generator writes the generated policies and their statuses.
type Generator struct {
	dyn    dynamic.Interface
	eng    *engine.Engine
	source Source
	filter admissionfilter.Filter
	log    zerolog.Logger
	now    func() time.Time

	mu sync.RWMutex
	// generated holds, by ValidatingPolicy name, the uid and generation
	// of the version a generated policy enforces.
	generated map[string]string
	// synced is set after the first Sync.
	synced bool
}

// New returns a generator.
func New(dyn dynamic.Interface, eng *engine.Engine, source Source, filter admissionfilter.Filter, log zerolog.Logger) *Generator {
	return &Generator{dyn: dyn, eng: eng, source: source, filter: filter, log: log, now: time.Now, generated: map[string]string{}}
}

func versionOf(p *engine.Policy) string {
	return fmt.Sprintf("%s/%d", p.Raw.Metadata.UID, p.Raw.Metadata.Generation)
}

// Generated reports whether a generated ValidatingAdmissionPolicy
// enforces p as it is now (registrar.Options.Generated): the policy's
// uid and generation, which its status writes do not change.
func (g *Generator) Generated(p *engine.Policy) bool {
	if p.Raw.Kind != policy.KindValidatingPolicy {
		return false
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	v, ok := g.generated[p.Raw.Metadata.Name]
	return ok && v == versionOf(p)
}

// Sync generates what the policies ask for, deletes what they no longer
// do and writes their statuses. changed says whether the set of
// generated policies changed (the webhooks must then be reconciled).
func (g *Generator) Sync(ctx context.Context) (changed bool, err error) {
	now := map[string]string{}
	var errs []error
	g.mu.RLock()
	before, first := maps.Clone(g.generated), !g.synced
	g.mu.RUnlock()
	for _, p := range g.source.Policies() {
		if p.Raw.Kind != policy.KindValidatingPolicy || p.Raw.VPol == nil {
			continue
		}
		if !p.Raw.VPol.GeneratesAdmissionPolicy() {
			if _, was := before[p.Raw.Metadata.Name]; was || first {
				// Its status must stop saying generated (a new leader
				// does not know what the last one generated: it looks
				// once).
				if err := g.writeStatus(ctx, p, notRequested); err != nil {
					errs = append(errs, err)
				}
			}
			continue
		}
		why := g.generate(ctx, p)
		if why == "" {
			now[p.Raw.Metadata.Name] = versionOf(p)
		} else {
			g.log.Info().Str(logkey.Policy, p.Raw.Metadata.Name).Str(logkey.Reason, why).Msg("validatingAdmissionPolicyNotGenerated")
		}
		if err := g.writeStatus(ctx, p, why); err != nil {
			errs = append(errs, err)
		}
	}
	if err := g.deleteStale(ctx, now); err != nil {
		errs = append(errs, err)
	}
	g.mu.Lock()
	changed = !maps.Equal(g.generated, now)
	g.generated, g.synced = now, true
	g.mu.Unlock()
	return changed, errors.Join(errs...)
}

// generate writes p's ValidatingAdmissionPolicy and binding; the
// result is why it was not, or "".
func (g *Generator) generate(ctx context.Context, p *engine.Policy) string {
	switch {
	case p.HasAutogen():
		return "it has autogen rules for Pod controllers, which the API server would not apply (set autogen.podControllers.controllers to [])"
	case p.HasCELExceptions():
		return "a PolicyException names it, which the API server would not honour"
	}
	vap, binding, err := policy.AdmissionPolicyOf(p.Raw)
	if err != nil {
		return err.Error()
	}
	g.guard(vap)
	if _, err := g.eng.Compile(&policy.Policy{
		APIVersion: vap.APIVersion, Kind: policy.KindValidatingAdmissionPolicy, Metadata: policy.ObjectMeta{Name: vap.Name},
		Native: &policy.NativePolicy{VAP: vap, VAPBindings: []admissionregistrationv1.ValidatingAdmissionPolicyBinding{*binding}},
	}); err != nil {
		return fmt.Sprintf("the API server could not evaluate it: %v", err)
	}
	owner := metav1.OwnerReference{APIVersion: policy.GroupVerdict + "/v1", Kind: policy.KindValidatingPolicy, Name: p.Raw.Metadata.Name, UID: types.UID(p.Raw.Metadata.UID)}
	for _, o := range []metav1.Object{vap, binding} {
		o.SetLabels(map[string]string{LabelManagedBy: ManagedByValue, LabelGeneratedFrom: p.Raw.Metadata.Name})
		o.SetOwnerReferences([]metav1.OwnerReference{owner})
	}
	if err := g.apply(ctx, policycache.ValidatingAdmissionPolicies, vap); err != nil {
		return err.Error()
	}
	if err := g.apply(ctx, policycache.ValidatingAdmissionPolicyBindings, binding); err != nil {
		return err.Error()
	}
	return ""
}

// guard keeps the generated policy away from what no Verdict webhook
// receives: the excluded namespaces join its namespace selector, the
// excluded resources are left out by a match condition the API server
// evaluates first.
func (g *Generator) guard(vap *admissionregistrationv1.ValidatingAdmissionPolicy) {
	mc := vap.Spec.MatchConstraints
	sel := mc.NamespaceSelector
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	sel.MatchExpressions = append(sel.MatchExpressions, registrar.ExcludedNamespaces(g.filter).MatchExpressions...)
	mc.NamespaceSelector = sel
	vap.Spec.MatchConditions = append([]admissionregistrationv1.MatchCondition{{Name: admissionfilter.MatchConditionName, Expression: g.filter.Expression()}}, vap.Spec.MatchConditions...)
}

// apply creates obj or updates the one of its name, which must be
// Verdict's (labelled so); an equal one is left as it is.
func (g *Generator) apply(ctx context.Context, gvr schema.GroupVersionResource, obj metav1.Object) error {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err
	}
	want := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(want.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(want.Object, "status")
	ri := g.dyn.Resource(gvr)
	cur, err := ri.Get(ctx, want.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := ri.Create(ctx, want, metav1.CreateOptions{FieldManager: "verdict-webhook"}); err != nil {
			return fmt.Errorf("create %s %s: %w", want.GetKind(), want.GetName(), err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s %s: %w", want.GetKind(), want.GetName(), err)
	}
	if l := cur.GetLabels(); l[LabelManagedBy] != ManagedByValue || l[LabelGeneratedFrom] != obj.GetLabels()[LabelGeneratedFrom] {
		return fmt.Errorf("a %s named %s exists that Verdict did not generate", want.GetKind(), want.GetName())
	}
	// The stored spec holds what the API server defaults (scope,
	// matchPolicy, ...): an update that changes nothing else is a no-op
	// for it, which writes nothing.
	curSpec, _, _ := unstructured.NestedMap(cur.Object, "spec")
	wantSpec, _, _ := unstructured.NestedMap(want.Object, "spec")
	if reflect.DeepEqual(curSpec, wantSpec) && reflect.DeepEqual(cur.GetOwnerReferences(), want.GetOwnerReferences()) {
		return nil
	}
	want.SetResourceVersion(cur.GetResourceVersion())
	if _, err := ri.Update(ctx, want, metav1.UpdateOptions{FieldManager: "verdict-webhook"}); err != nil {
		return fmt.Errorf("update %s %s: %w", want.GetKind(), want.GetName(), err)
	}
	return nil
}

// deleteStale deletes the generated policies and bindings whose
// ValidatingPolicy no longer asks for one (or no longer gets one).
func (g *Generator) deleteStale(ctx context.Context, keep map[string]string) error {
	var errs []error
	for _, gvr := range []schema.GroupVersionResource{policycache.ValidatingAdmissionPolicyBindings, policycache.ValidatingAdmissionPolicies} {
		list, err := g.dyn.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: LabelManagedBy + "=" + ManagedByValue + "," + LabelGeneratedFrom})
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", gvr.Resource, err))
			continue
		}
		for _, o := range list.Items {
			if _, ok := keep[o.GetLabels()[LabelGeneratedFrom]]; ok {
				continue
			}
			uid := o.GetUID()
			err := g.dyn.Resource(gvr).Delete(ctx, o.GetName(), metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
				errs = append(errs, fmt.Errorf("delete %s %s: %w", o.GetKind(), o.GetName(), err))
			}
		}
	}
	return errors.Join(errs...)
}

// writeStatus writes status.generated and the condition of a policy
// that asks for generation, when they differ from what is stored (the
// condition keeps its transition time while it holds).
func (g *Generator) writeStatus(ctx context.Context, p *engine.Policy, why string) error {
	ri := g.dyn.Resource(policycache.ValidatingPolicies)
	u, err := ri.Get(ctx, p.Raw.Metadata.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	want := policy.StatusCondition{
		Type: ConditionGenerated, Status: "True", ObservedGeneration: u.GetGeneration(),
		Reason: ReasonGenerated, Message: fmt.Sprintf(messageGeneratedFmt, p.Raw.Metadata.Name),
	}
	if why != "" {
		want.Status, want.Reason, want.Message = "False", ReasonNotGenerated, "not generated: "+why
	}
	var cur policy.ValidatingPolicyStatus
	if st, ok, _ := unstructured.NestedMap(u.Object, "status"); ok {
		_ = runtime.DefaultUnstructuredConverter.FromUnstructured(st, &cur)
	}
	if why == notRequested && !slices.ContainsFunc(cur.Conditions, func(c policy.StatusCondition) bool { return c.Type == ConditionGenerated }) {
		return nil // never generated: nothing to take back
	}
	var conds []policy.StatusCondition
	for _, c := range cur.Conditions {
		if c.Type == ConditionGenerated {
			if c.Status == want.Status && c.Reason == want.Reason && c.Message == want.Message && c.ObservedGeneration == want.ObservedGeneration && cur.Generated == (why == "") {
				return nil
			}
			if c.Status == want.Status {
				want.LastTransitionTime = c.LastTransitionTime
			}
			continue
		}
		conds = append(conds, c)
	}
	if want.LastTransitionTime == "" {
		want.LastTransitionTime = g.now().UTC().Format(time.RFC3339)
	}
	st := policy.ValidatingPolicyStatus{Generated: why == "", Conditions: append(conds, want)}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&st)
	if err != nil {
		return err
	}
	u.Object["status"] = m
	if _, err := ri.UpdateStatus(ctx, u, metav1.UpdateOptions{FieldManager: "verdict-webhook"}); err != nil && !apierrors.IsConflict(err) {
		return fmt.Errorf("status of ValidatingPolicy %s: %w", p.Raw.Metadata.Name, err)
	}
	return nil
}
