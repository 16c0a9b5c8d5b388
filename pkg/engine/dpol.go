package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/celeval"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// A DeletingPolicy (or NamespacedDeletingPolicy) compiles into a
// CleanupPolicy whose rule carries its CEL (a celRule: the conditions as
// its preconditions, the variables) and its matchConstraints (a
// celMatch), so that the cleaner runs it as any cleanup policy: Kinds
// says what to list, Decide judges each resource.

// compileDPol compiles a DeletingPolicy. Errors name the expression's
// path (spec.conditions[1].expression: ...).
func (e *Engine) compileDPol(p *policy.CleanupPolicy) (*CleanupPolicy, error) {
	if errs := policy.ValidateDeleting(p, true); len(errs) > 0 {
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Key(), errs.ToAggregate())
	}
	s := p.DPol
	cr := &celRule{}
	var errs []error
	compile := celCompile(&errs)
	for i, v := range s.Variables {
		cr.variables = append(cr.variables, celeval.Variable{Name: v.Name, Program: compile(fmt.Sprintf("spec.variables[%d].expression", i), v.Expression, celeval.Any)})
	}
	names := make([]string, len(s.Conditions))
	for i, c := range s.Conditions {
		cr.preconditions = append(cr.preconditions, compile(fmt.Sprintf("spec.conditions[%d].expression", i), c.Expression, celeval.Bool))
		names[i] = c.Name
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Key(), errors.Join(errs...))
	}
	r := &Rule{Rule: policy.Rule{Name: p.Metadata.Name}, cel: cr, celMatch: dpolMatch(s.MatchConstraints)}
	shell := &Policy{Raw: &policy.Policy{APIVersion: p.APIVersion, Kind: p.Kind, Metadata: p.Metadata}, Rules: []*Rule{r}, Scored: true}
	return &CleanupPolicy{Raw: p, rule: r, shell: shell, kinds: dpolKinds(s.MatchConstraints), conditions: names}, nil
}

// dpolMatch is a DeletingPolicy's matchConstraints, as Kyverno applies
// them to an existing resource: its resource rules select every
// operation (there is no request; the resource is seen as if created, so
// exclude rules keep theirs). Without matchConstraints no object is
// selected.
func dpolMatch(mc *policy.MatchConstraints) *celMatch {
	if mc == nil {
		return &celMatch{}
	}
	rules := make([]policy.ResourceRule, len(mc.ResourceRules))
	for i, r := range mc.ResourceRules {
		r.Operations = []string{"*"}
		rules[i] = r
	}
	return &celMatch{rules: rules, exclude: mc.ExcludeResourceRules, namespaceSel: mc.NamespaceSelector, objectSel: mc.ObjectSelector}
}

// dpolKinds are the kind selectors of a DeletingPolicy's resource rules:
// one for each group, version and resource they name, selecting kinds by
// their resource (KindSelector.Resource). A subresource is no object to
// delete: a rule's "pods/status" adds nothing, its "*/*" every resource.
func dpolKinds(mc *policy.MatchConstraints) []KindSelector {
	if mc == nil {
		return nil
	}
	var out []KindSelector
	seen := map[KindSelector]bool{}
	for _, r := range mc.ResourceRules {
		for _, g := range r.APIGroups {
			for _, v := range r.APIVersions {
				for _, res := range r.Resources {
					main, sub, _ := strings.Cut(res, "/")
					if sub != "" && res != "*/*" {
						continue
					}
					k := KindSelector{Group: g, Version: v, Kind: "*", Resource: main}
					if !seen[k] {
						seen[k] = true
						out = append(out, k)
					}
				}
			}
		}
	}
	return out
}

// decideCEL judges one resource for a DeletingPolicy as Kyverno's
// deleting engine does: a namespaced policy deletes only in its own
// namespace; the resource must be selected by matchConstraints (a JSON
// payload, without apiVersion or kind, is not matched, only judged by the
// conditions, as Kyverno's CLI does); then every condition must be true.
// A condition that is false keeps the resource whatever errors others
// end in; otherwise an error (one that could not be evaluated, a limit
// reached) is returned, and the resource is not deleted.
func (c *Cleanup) decideCEL(ctx context.Context, obj map[string]any, nsLabels map[string]string, resource string) (CleanupDecision, error) {
	p := c.p
	req := &Request{Object: obj, NamespaceLabels: nsLabels, Resource: resource}
	m := c.e.meterFor(ctx, req)
	if k := objectGVK(obj); k.version != "" && k.kind != "" {
		in := newMatchInput(req)
		if p.Raw.Namespaced() && in.namespace != p.Raw.Metadata.Namespace {
			return CleanupDecision{Reason: CleanupOtherNamespace}, nil
		}
		matched, err := p.rule.celMatch.matches(in, req, m)
		if err != nil {
			return CleanupDecision{}, fmt.Errorf("failed to match: %w", err)
		}
		if !matched {
			return CleanupDecision{Reason: CleanupNotMatched}, nil
		}
	}
	run := &ruleRun{e: c.e, req: req, m: m, policy: p.shell, rule: p.rule, obj: obj}
	cr := p.rule.cel
	ev := run.celInput().NewEvaluation(run.callCtx(), cr.variables, 0) //nolint:contextcheck // the meter's ctx (ctx, bounded: meterFor), marked with the caller
	var errs []error
	for i, prog := range cr.preconditions {
		ok, err := ev.Bool(prog)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("spec.conditions[%d] %q: %w", i, p.conditions[i], celeval.Cause(err)))
		case !ok:
			return CleanupDecision{Reason: CleanupConditionsNotMet, Message: fmt.Sprintf("condition %q is false", p.conditions[i])}, nil
		}
	}
	if err := errors.Join(errs...); err != nil {
		return CleanupDecision{}, fmt.Errorf("failed to evaluate conditions: %w", err)
	}
	if err := m.stopped(); err != nil {
		return CleanupDecision{}, fmt.Errorf("failed to evaluate conditions: %w", err)
	}
	return CleanupDecision{Delete: true}, nil
}
