package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/celeval"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// A MutatingPolicy with evaluation.mutateExisting mutates existing
// resources (its targets) when a request it selects (its trigger)
// arrives: in admission the rule only says it is triggered (Background),
// and MutateExisting (the generator service, `verdict test` on
// targetResources) finds the targets and patches them.

// celTargets is how a mutate-existing MutatingPolicy finds its targets:
// the resources targetMatchConstraints select (its matchConstraints when
// it has none; operations do not matter), or those its expression gives
// (evaluated on the trigger: one object, or a list's items), that every
// targetMatchCondition holds for (evaluated on the target).
type celTargets struct {
	rules, exclude []policy.ResourceRule
	namespaceSel   *policy.LabelSelector
	objectSel      *policy.LabelSelector
	expression     *celeval.Program
	conditions     []*celeval.Program
}

// MutatesExisting reports whether the rule mutates existing resources
// (a ClusterPolicy's mutate.targets, a MutatingPolicy's mutateExisting)
// rather than the request's object.
func (r *Rule) MutatesExisting() bool {
	if r.cel != nil {
		return r.cel.targets != nil
	}
	return r.Mutation != nil && len(r.Mutation.Targets) > 0
}

// mutateTargetsCEL finds the rule's targets and mutates each: a target
// the target conditions hold for is patched by the mutations (object is
// the target; request is still the trigger's), one they do not hold for
// is skipped. The rule's status is error if a target's evaluation
// failed, pass if one was patched, else skip; no target at all is no
// result.
func (run *ruleRun) mutateTargetsCEL(rr RuleResponse, trigger *celeval.Evaluation) RuleResponse {
	cr := run.rule.cel
	targets, err := run.celTargetsFor(cr.targets, trigger)
	if err != nil {
		rr.Name, rr.Status, rr.Message = "evaluation", StatusError, "failed to find the targets: "+celeval.Cause(err).Error()
		return rr
	}
	for _, t := range targets {
		rr.Targets = append(rr.Targets, run.mutateTargetCEL(t))
	}
	if len(rr.Targets) == 0 {
		rr.Status = statusNone
		return rr
	}
	rr.Status, rr.Message = StatusSkip, "no target was patched"
	for _, t := range rr.Targets {
		switch t.Status {
		case StatusError:
			rr.Status, rr.Message = StatusError, t.Message
			return rr
		case StatusPass:
			rr.Status, rr.Message = StatusPass, "success"
		}
	}
	return rr
}

// mutateTargetCEL evaluates the target conditions and the mutations on
// one target.
func (run *ruleRun) mutateTargetCEL(target map[string]any) TargetResponse {
	out := TargetResponse{Resource: target}
	cr := run.rule.cel
	tr := *run
	tr.obj = target
	in := tr.buildCELInput()
	in.Object = target
	ev := celeval.Prepare(in).NewEvaluation(run.callCtx(), cr.variables, 0)
	var condErrs []error
	for _, p := range cr.targets.conditions {
		ok, err := ev.Bool(p)
		switch {
		case err != nil:
			condErrs = append(condErrs, celeval.Cause(err))
		case !ok:
			out.Status, out.Message = StatusSkip, "target conditions not met"
			return out
		}
	}
	if len(condErrs) > 0 {
		out.Status, out.Message = StatusError, "failed to evaluate policy: "+errors.Join(condErrs...).Error()
		return out
	}
	patched, err := applyCELMutations(ev, cr, target)
	if err != nil {
		out.Status, out.Message = StatusError, "failed to evaluate policy: "+celeval.Cause(err).Error()
		return out
	}
	out.Status, out.Message, out.Patched = StatusPass, "success", patched
	out.Subresource = cr.targets.subresourceOf(target)
	if document.Equal(patched, target) {
		out.Status, out.Message = StatusSkip, "no patches applied"
	}
	return out
}

// celTargetsFor lists the targets: those the expression gives, or every
// resource of the resource rules, through the engine's lister (in a
// namespaced policy's namespace only), that the selectors and excludes
// leave.
func (run *ruleRun) celTargetsFor(t *celTargets, trigger *celeval.Evaluation) ([]map[string]any, error) {
	namespace := ""
	if run.policy.Raw.Namespaced() {
		namespace = run.policy.Raw.Metadata.Namespace
	}
	var found []map[string]any
	if t.expression != nil {
		val, err := trigger.Eval(t.expression)
		if err != nil {
			return nil, err
		}
		v, err := celeval.JSONOf(val)
		if err != nil {
			return nil, fmt.Errorf("spec.targetMatchConstraints.expression: %w", err)
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("spec.targetMatchConstraints.expression must give an object or a list, not %T", v)
		}
		if items, ok := m["items"].([]any); ok {
			for _, it := range items {
				if o, ok := it.(map[string]any); ok {
					found = append(found, o)
				}
			}
		} else if len(m) > 0 {
			found = append(found, m)
		}
	} else {
		c := celContext{e: run.e}
		seen := map[string]bool{}
		for _, rr := range t.rules {
			for _, g := range rr.APIGroups {
				for _, v := range rr.APIVersions {
					for _, res := range rr.Resources {
						// A subresource target ("pods/status") is read as its
						// resource and written through the subresource
						// (TargetResponse.Subresource).
						res, sub, _ := strings.Cut(res, "/")
						if g == "*" || v == "*" || strings.Contains(res, "*") || strings.Contains(sub, "*") || strings.Contains(sub, "/") {
							return nil, fmt.Errorf("target resource rules must name their group, version and resource (not %q %q %q)", g, v, rr.Resources)
						}
						apiVersion := v
						if g != "" {
							apiVersion = g + "/" + v
						}
						if seen[apiVersion+" "+res] {
							continue
						}
						seen[apiVersion+" "+res] = true
						objs, err := c.ListResources(run.callCtx(), apiVersion, res, namespace, nil)
						if err != nil {
							return nil, fmt.Errorf("list %s %s: %w", apiVersion, res, err)
						}
						found = append(found, objs...)
					}
				}
			}
		}
	}
	var out []map[string]any
	for _, o := range found {
		if namespace != "" && document.String(o, "metadata", "namespace") != namespace {
			continue
		}
		if t.objectSel != nil && !MatchSelector(t.objectSel, document.StringMap(o, "metadata", "labels")) {
			continue
		}
		if t.namespaceSel != nil && !run.targetNamespaceMatches(t.namespaceSel, o) {
			continue
		}
		if len(t.exclude) > 0 && run.excludedTarget(t.exclude, o) {
			continue
		}
		out = append(out, o)
	}
	return out, nil
}

// subresourceOf is the subresource a target is written through: that of
// the first target resource rule naming the target's resource with one
// ("pods/status" for a Pod), as Kyverno routes it; none otherwise.
func (t *celTargets) subresourceOf(o map[string]any) string {
	k := objectGVK(o)
	res := guessResource(k)
	for i := range t.rules {
		r := &t.rules[i]
		groupOK := listHas(r.APIGroups, k.group) || listHas(r.APIGroups, "*")
		versionOK := listHas(r.APIVersions, k.version) || listHas(r.APIVersions, "*")
		if !groupOK || !versionOK {
			continue
		}
		for _, name := range r.Resources {
			parent, sub, _ := strings.Cut(name, "/")
			if parent == res || parent == "*" {
				return sub
			}
		}
	}
	return ""
}

// targetNamespaceMatches judges a target's namespace by the selector,
// with the labels the engine's lister has for the Namespace (none when
// it cannot read it).
func (run *ruleRun) targetNamespaceMatches(sel *policy.LabelSelector, o map[string]any) bool {
	ns := document.String(o, "metadata", "namespace")
	if ns == "" {
		return true // a cluster-scoped target has no namespace to select
	}
	var labels map[string]string
	if nsObj, err := run.e.lister.GetResource(run.m.ctx, "v1", "Namespace", "", ns); err == nil && nsObj != nil {
		labels = document.StringMap(nsObj, "metadata", "labels")
	}
	return MatchSelector(sel, labels)
}

// excludedTarget reports whether an exclude rule names the target's
// resource (by its kind's guessed plural).
func (run *ruleRun) excludedTarget(exclude []policy.ResourceRule, o map[string]any) bool {
	k := objectGVK(o)
	res := guessResource(k)
	for i := range exclude {
		r := &exclude[i]
		if (listHas(r.APIGroups, k.group) || listHas(r.APIGroups, "*")) && (listHas(r.APIVersions, k.version) || listHas(r.APIVersions, "*")) &&
			(listHas(r.Resources, res) || listHas(r.Resources, "*")) &&
			(len(r.ResourceNames) == 0 || listHas(r.ResourceNames, document.String(o, "metadata", "name"))) {
			return true
		}
	}
	return false
}
