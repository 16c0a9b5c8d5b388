// Package policystatus writes the status of ClusterPolicies and Policies:
// the Ready condition, rule counts and autogen rules, in the shape of
// Kyverno's PolicyStatus, so that `kubectl get cpol` shows ADMISSION,
// BACKGROUND and READY (and, wide, the rule counts and the reason) as it
// does for Kyverno.
//
// One writer runs, in the webhook's leader, after each reconcile of the
// webhook configurations. A policy is Ready when it compiled and every
// webhook it needs is configured; otherwise Ready is False with the
// reason in the message: the policy does not compile, one of its kinds is
// not served by the API server, or the configurations could not be
// written. The status says what holds; it does not decide what the
// webhook evaluates. Writes compare first: an unchanged status is not
// written, and a condition keeps its transition time while it holds.
package policystatus

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/webhook/registrar"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// Condition values, as Kyverno's.
const (
	ConditionReady  = "Ready"
	ReasonSucceeded = "Succeeded"
	ReasonFailed    = "Failed"
	// ReasonCandidate: the policy is a candidate
	// (policy.AnnotationCandidate), which no webhook enforces.
	ReasonCandidate  = "Candidate"
	messageReady     = "Ready"
	messageCandidate = "candidate: never enforced; the reporter evaluates it in the background (status.candidate)"
)

// Source is what the writer needs of the policy cache: the compiled
// policies and those that did not compile.
type Source interface {
	Policies() []*engine.Policy
	// Problems returns kind, key ("name" or "namespace/name") and error
	// of each policy left out of the set.
	Problems() []policycache.Problem
	// Candidates returns the compiled candidate policies, which are in
	// no set.
	Candidates() []*engine.Policy
}

// Writer keeps policy statuses current.
type Writer struct {
	dyn      dynamic.Interface
	source   Source
	resolver registrar.Resolver
	now      func() time.Time
	// resources are the policy kinds' resources: cluster-scoped, then
	// namespaced.
	clusterPolicies, policies schema.GroupVersionResource
}

// New returns a Writer over the policy resources of the given API group
// (verdict.dev/v1).
func New(dyn dynamic.Interface, source Source, resolver registrar.Resolver, clusterPolicies, policies schema.GroupVersionResource) *Writer {
	return &Writer{dyn: dyn, source: source, resolver: resolver, now: time.Now, clusterPolicies: clusterPolicies, policies: policies}
}

// Sync brings every policy's status up to date. reconcileErr is the last
// reconcile's error: while the configurations cannot be written, no
// policy is ready. A policy changed meanwhile (a conflict) is left to the
// next round.
func (w *Writer) Sync(ctx context.Context, reconcileErr error) error {
	compiled := map[string]*engine.Policy{}
	for _, p := range w.source.Policies() {
		compiled[p.Raw.Kind+"/"+p.Raw.Key()] = p
	}
	candidates := map[string]*engine.Policy{}
	for _, p := range w.source.Candidates() {
		candidates[p.Raw.Kind+"/"+p.Raw.Key()] = p
	}
	problems := map[string]error{}
	for _, pr := range w.source.Problems() {
		problems[pr.Kind+"/"+pr.Key] = pr.Err
	}
	var errs []error
	for _, gvr := range []schema.GroupVersionResource{w.clusterPolicies, w.policies} {
		list, err := w.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", gvr.Resource, err))
			continue
		}
		for i := range list.Items {
			u := &list.Items[i]
			key := u.GetName()
			if ns := u.GetNamespace(); ns != "" {
				key = ns + "/" + key
			}
			id := u.GetKind() + "/" + key
			p, candidate := compiled[id], false
			if c := candidates[id]; c != nil {
				p, candidate = c, true
			}
			want, ok := w.desired(u, p, candidate, problems[id], reconcileErr)
			if !ok {
				continue
			}
			if err := w.write(ctx, gvr, u, want); err != nil {
				errs = append(errs, fmt.Errorf("status of %s: %w", id, err))
			}
		}
	}
	return errors.Join(errs...)
}

// desired computes a policy's status; ok is false when the cache has not
// seen the policy yet (its status is left as it is).
func (w *Writer) desired(u *unstructured.Unstructured, p *engine.Policy, candidate bool, compileErr, reconcileErr error) (policy.Status, bool) {
	var st policy.Status
	ready, message, reason := true, messageReady, ReasonSucceeded
	switch {
	case p != nil && candidate:
		// Compiled, and never enforced: not Ready, said why.
		st.RuleCount, st.Autogen = counts(p)
		ready, message, reason = false, messageCandidate, ReasonCandidate
	case p != nil:
		st.RuleCount, st.Autogen = counts(p)
		unresolved, err := registrar.Unresolved(p, w.resolver)
		switch {
		case err != nil:
			ready, message = false, fmt.Sprintf("webhook not configured: %v", err)
		case len(unresolved) > 0:
			ready, message = false, fmt.Sprintf("webhook not configured: no resource the API server serves matches %s", strings.Join(unresolved, ", "))
		case reconcileErr != nil && p.Raw.Spec.AdmissionEnabled():
			ready, message = false, fmt.Sprintf("webhook configurations not written: %v", reconcileErr)
		}
	case compileErr != nil:
		ready, message = false, fmt.Sprintf("policy not loaded: %v", compileErr)
	default:
		return st, false
	}
	st.Ready = ready
	cond := policy.StatusCondition{
		Type:               ConditionReady,
		Status:             string(metav1.ConditionTrue),
		ObservedGeneration: u.GetGeneration(),
		Reason:             reason,
		Message:            message,
	}
	if !ready {
		cond.Status = string(metav1.ConditionFalse)
		if reason == ReasonSucceeded {
			cond.Reason = ReasonFailed
		}
	}
	cond.LastTransitionTime = w.now().UTC().Format(time.RFC3339)
	if old := currentReady(u); old != nil && old.Status == cond.Status && old.Reason == cond.Reason && old.Message == cond.Message {
		cond.LastTransitionTime = old.LastTransitionTime
	}
	st.Conditions = []policy.StatusCondition{cond}
	return st, true
}

// counts are the rule counts (autogen rules included, as Kyverno counts
// them) and the autogen rules of a compiled policy.
func counts(p *engine.Policy) (policy.RuleCount, policy.AutogenStatus) {
	var c policy.RuleCount
	var a policy.AutogenStatus
	for _, r := range p.Rules {
		switch {
		case r.Validation != nil:
			c.Validate++
		case r.Mutation != nil:
			c.Mutate++
		case r.Generation != nil:
			c.Generate++
		case len(r.VerifyImages) > 0:
			c.VerifyImages++
		}
		if r.Autogen {
			a.Rules = append(a.Rules, r.Rule)
		}
	}
	return c, a
}

// currentReady reads the Ready condition a policy has now.
func currentReady(u *unstructured.Unstructured) *policy.StatusCondition {
	st, err := statusOf(u)
	if err != nil || st == nil {
		return nil
	}
	for i := range st.Conditions {
		if st.Conditions[i].Type == ConditionReady {
			return &st.Conditions[i]
		}
	}
	return nil
}

// statusOf reads a policy's status.
func statusOf(u *unstructured.Unstructured) (*policy.Status, error) {
	raw, ok := u.Object["status"]
	if !ok || raw == nil {
		return nil, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var st policy.Status
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// write updates the status subresource when it differs from want.
func (w *Writer) write(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured, want policy.Status) error {
	wantObj, err := toObject(want)
	if err != nil {
		return err
	}
	if have, ok := u.Object["status"].(map[string]any); ok {
		// Fields of the status another writer set (a Kyverno field, say)
		// are kept; ours are compared.
		merged := make(map[string]any, len(have)+len(wantObj))
		for k, v := range have {
			merged[k] = v
		}
		for k, v := range wantObj {
			merged[k] = v
		}
		// Compared as JSON: numbers read from the API and numbers encoded
		// here have different Go types.
		hb, errH := json.Marshal(have)
		mb, errM := json.Marshal(merged)
		if errH == nil && errM == nil && bytes.Equal(hb, mb) {
			return nil
		}
		wantObj = merged
	}
	obj := u.DeepCopy()
	obj.Object["status"] = wantObj
	_, err = w.dyn.Resource(gvr).Namespace(u.GetNamespace()).UpdateStatus(ctx, obj, metav1.UpdateOptions{FieldManager: "verdict-webhook"})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		// Changed or deleted since the list: the next round sees it.
		return nil
	}
	return err
}

// toObject turns a status into its unstructured form.
func toObject(st policy.Status) (map[string]any, error) {
	b, err := json.Marshal(st)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	return out, json.Unmarshal(b, &out)
}
