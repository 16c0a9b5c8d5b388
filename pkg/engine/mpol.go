package engine

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/cel-go/common/types/ref"

	"github.com/verdict-dev/verdict/pkg/engine/celeval"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/patch"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// A MutatingPolicy compiles, as a ValidatingPolicy does, into an engine
// Policy whose rules are the policy and its autogen variants, each a
// mutate rule without a name carrying its CEL (a celRule with
// mutations) and its matchConstraints. A rule's mutations apply in
// order, each to the result of the one before, as the API server
// applies a MutatingAdmissionPolicy's.

// celPatch is one compiled mutation.
type celPatch struct {
	prog      *celeval.Program
	jsonPatch bool // JSONPatch; ApplyConfiguration otherwise
}

// compileMPol compiles a MutatingPolicy.
func (e *Engine) compileMPol(p *policy.Policy) (*Policy, error) {
	cp := &Policy{Raw: p, Scored: true}
	if ann := p.Metadata.Annotations; ann != nil {
		cp.Scored = ann[AnnotationScored] != "false"
		cp.Category = ann[AnnotationCategory]
		cp.Severity = ann[AnnotationSeverity]
	}
	main, err := newMPolRule(p.MPol)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Key(), err)
	}
	cp.Rules = append(cp.Rules, main)
	for _, m := range p.MPol.Mutations {
		if m.ApplyConfiguration != nil {
			// Read the built-in schema now, in the background, rather
			// than on the first request the policy mutates (an error
			// is the mutation's then).
			go func() { _ = patch.LoadBuiltinSchema() }()
			break
		}
	}
	for _, spec := range mpolAutogen(p.MPol) {
		r, err := newMPolRule(spec)
		if err != nil {
			return nil, fmt.Errorf("%s %s: autogen: %w", p.Kind, p.Key(), err)
		}
		r.Autogen = true
		cp.Rules = append(cp.Rules, r)
	}
	return cp, nil
}

// newMPolRule compiles one MutatingPolicy spec into a rule.
func newMPolRule(s *policy.MutatingPolicySpec) (*Rule, error) {
	r := &Rule{Rule: policy.Rule{Mutation: &policy.Mutation{}}}
	cr := &celRule{mpol: true, replaceAtomic: s.Evaluation != nil && s.Evaluation.UseServerSideApply}
	mc := s.MatchConstraints
	var errs []error
	compile := celCompile(&errs)
	for i, c := range s.MatchConditions {
		cr.preconditions = append(cr.preconditions, compile(fmt.Sprintf("spec.matchConditions[%d].expression", i), c.Expression, celeval.Bool))
	}
	for i, v := range s.Variables {
		cr.variables = append(cr.variables, celeval.Variable{Name: v.Name, Program: compile(fmt.Sprintf("spec.variables[%d].expression", i), v.Expression, celeval.Any)})
	}
	for i, m := range s.Mutations {
		switch m.PatchType {
		case policy.PatchTypeJSONPatch:
			cr.mutations = append(cr.mutations, celPatch{prog: compile(fmt.Sprintf("spec.mutations[%d].jsonPatch.expression", i), m.JSONPatch.Expression, celeval.JSONPatchList), jsonPatch: true})
		case policy.PatchTypeApplyConfiguration:
			cr.mutations = append(cr.mutations, celPatch{prog: compile(fmt.Sprintf("spec.mutations[%d].applyConfiguration.expression", i), m.ApplyConfiguration.Expression, celeval.ApplyConfigurationObject)})
		}
	}
	for i, a := range s.AuditAnnotations {
		cr.audit = append(cr.audit, namedProgram{name: a.Key, prog: compile(fmt.Sprintf("spec.auditAnnotations[%d].valueExpression", i), a.ValueExpression, celeval.StringOrNull)})
	}
	if s.MutateExisting() {
		t := &celTargets{rules: mc.ResourceRules, namespaceSel: mc.NamespaceSelector, objectSel: mc.ObjectSelector}
		if tc := s.TargetMatchConstraints; tc != nil && len(tc.ResourceRules) > 0 {
			t.rules, t.exclude, t.namespaceSel, t.objectSel = tc.ResourceRules, tc.ExcludeResourceRules, tc.NamespaceSelector, tc.ObjectSelector
		}
		if tc := s.TargetMatchConstraints; tc != nil && strings.TrimSpace(tc.Expression) != "" {
			t.expression = compile("spec.targetMatchConstraints.expression", tc.Expression, celeval.Any)
		}
		for i, c := range s.TargetMatchConditions {
			t.conditions = append(t.conditions, compile(fmt.Sprintf("spec.targetMatchConditions[%d].expression", i), c.Expression, celeval.Bool))
		}
		cr.targets = t
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r.cel = cr
	r.celMatch = &celMatch{rules: mc.ResourceRules, exclude: mc.ExcludeResourceRules, namespaceSel: mc.NamespaceSelector, objectSel: mc.ObjectSelector}
	return r, nil
}

// mutateCEL applies a MutatingPolicy rule as Kyverno does: its
// exceptions first, then its match conditions (one that is false skips
// the rule), then its mutations in order. Any error (a condition, an
// expression, a patch that does not apply) ends the rule with it and
// leaves the resource as it was; otherwise the rule passes, whether or
// not the mutations changed anything.
func (run *ruleRun) mutateCEL(rr RuleResponse) RuleResponse {
	cr := run.rule.cel
	ev := run.celInput().NewEvaluation(run.callCtx(), cr.variables, 0)
	if len(cr.exceptions) > 0 && run.applyCELExceptions(&rr, cr, ev) {
		return rr
	}
	fail := func(err error) RuleResponse {
		rr.Name, rr.Status, rr.Message = "evaluation", StatusError, "failed to evaluate policy: "+celeval.Cause(err).Error()
		return rr
	}
	var condErrs []error
	for _, p := range cr.preconditions {
		ok, err := ev.Bool(p)
		switch {
		case err != nil:
			condErrs = append(condErrs, celeval.Cause(err))
		case !ok:
			rr.Status, rr.Message = StatusSkip, "skip"
			return rr
		}
	}
	if len(condErrs) > 0 {
		return fail(errors.Join(condErrs...))
	}
	if cr.targets != nil {
		if !run.existing {
			// The request triggers the policy; its targets are mutated
			// in the background (the generator service).
			rr.Status, rr.Background = StatusSkip, true
			rr.Message = "mutation of existing resources runs in the generator service"
			return rr
		}
		return run.mutateTargetsCEL(rr, ev)
	}
	obj, err := applyCELMutations(ev, cr, run.obj)
	if err != nil {
		return fail(err)
	}
	// The audit annotations see the object as the mutations left it; one
	// that fails leaves the resource as it was.
	rr.Status, rr.Message = StatusPass, "success"
	if !run.auditAnnotations(&rr, cr, ev) {
		return fail(errors.New(rr.Message))
	}
	if !document.Equal(run.obj, obj) {
		run.obj = obj
	}
	return rr
}

// applyCELMutations applies the rule's mutations to obj in order, each
// on the result of the one before (which the evaluation's object then
// is), and returns the result; obj is not changed.
func applyCELMutations(ev *celeval.Evaluation, cr *celRule, obj map[string]any) (map[string]any, error) {
	for _, m := range cr.mutations {
		val, err := ev.Eval(m.prog)
		if err != nil {
			return nil, err
		}
		res, err := applyCELPatch(obj, val, m.jsonPatch, cr.replaceAtomic)
		if err != nil {
			return nil, err
		}
		if res.Changed {
			obj = res.Object
			ev.SetObject(obj)
		}
	}
	return obj, nil
}

// applyCELPatch applies to obj the patch a mutation's expression
// evaluated to, as the API server applies it: a list of JSONPatch
// values as RFC 6902 operations, an Object as an apply configuration
// (structured merge). It is the one application of a MutatingPolicy's
// and a MutatingAdmissionPolicy's mutations; obj is not changed.
func applyCELPatch(obj map[string]any, val ref.Val, jsonPatch, replaceAtomic bool) (patch.Result, error) {
	if jsonPatch {
		ops, err := celeval.JSONPatchOperations(val)
		if err != nil {
			return patch.Result{}, err
		}
		pops := make([]patch.Operation, len(ops))
		for i, o := range ops {
			pops[i] = patch.Operation(o)
		}
		res, err := patch.ApplyOperations(obj, pops)
		if err != nil {
			return patch.Result{}, fmt.Errorf("JSON Patch: %w", err)
		}
		return res, nil
	}
	cfg, err := celeval.ApplyConfigurationOf(val)
	if err != nil {
		return patch.Result{}, err
	}
	res, err := patch.ApplyConfiguration(obj, cfg, replaceAtomic)
	if err != nil {
		return patch.Result{}, fmt.Errorf("error applying patch: %w", err)
	}
	return res, nil
}

// Kyverno's autogen of a MutatingPolicy rewrites, in match conditions and
// ApplyConfiguration expressions only, object.spec and the labels and
// annotations of object.metadata (oldObject's too) to the pod
// template's, and wraps an apply configuration's Object{...} into the
// template's. Verdict rewrites the Object type names of the wrapped
// configuration by the same rule for metadata as for spec
// (Object.metadata{...} becomes Object.spec.template.metadata{...}):
// Kyverno leaves Object.metadata as it is, so that a policy setting the
// Pod's labels or annotations fails on every controller with a type
// mismatch.
var (
	mpolSpecRe     = regexp.MustCompile(`\b(object|oldObject)\.spec`)
	mpolMetadataRe = regexp.MustCompile(`\b(object|oldObject)\.metadata\.(labels|annotations)`)
	mpolTypeRe     = regexp.MustCompile(`\bObject\.(spec|metadata)\b`)
)

// mpolAutogen returns the autogen variants of a MutatingPolicy on Pods
// (podAutogen).
//
// JSONPatch mutations are left out of them. Kyverno copies them
// unchanged, so their paths (/spec/tolerations) name the controller's
// own fields: the API server drops what they add to a Deployment's spec
// as unknown, or they fail, and a later apply configuration can no
// longer merge the object. A variant left with no mutation is no variant.
func mpolAutogen(s *policy.MutatingPolicySpec) []*policy.MutatingPolicySpec {
	var out []*policy.MutatingPolicySpec
	for _, av := range podAutogen(s.MatchConstraints, s.Autogen) {
		v := *s
		v.MatchConstraints = av.match
		v.MatchConditions = make([]policy.MatchCondition, len(s.MatchConditions))
		for i, c := range s.MatchConditions {
			c.Expression = mpolTemplateExpression(c.Expression, av.cronJob)
			v.MatchConditions[i] = c
		}
		v.Mutations = nil
		for _, m := range s.Mutations {
			if m.ApplyConfiguration == nil {
				continue
			}
			ac := *m.ApplyConfiguration
			ac.Expression = mpolTemplateExpression(ac.Expression, av.cronJob)
			m.ApplyConfiguration = &ac
			v.Mutations = append(v.Mutations, m)
		}
		if len(v.Mutations) > 0 {
			out = append(out, &v)
		}
	}
	return out
}

// mpolTemplateExpression rewrites a Pod expression for a controller's pod
// template, as Kyverno's MutatingPolicy autogen does.
func mpolTemplateExpression(expr string, cronJob bool) string {
	tmpl := "spec.template"
	wrap, closing := "Object{spec: Object.spec{template: Object.spec.template{", "}}}"
	if cronJob {
		tmpl = "spec.jobTemplate.spec.template"
		wrap, closing = "Object{spec: Object.spec{jobTemplate: Object.spec.jobTemplate{spec: Object.spec.jobTemplate.spec{template: Object.spec.jobTemplate.spec.template{", "}}}}}"
	}
	expr = mpolSpecRe.ReplaceAllString(expr, "${1}."+tmpl+".spec")
	expr = mpolMetadataRe.ReplaceAllString(expr, "${1}."+tmpl+".metadata.${2}")
	expr = mpolTypeRe.ReplaceAllString(expr, "Object."+tmpl+".${1}")
	rest, ok := strings.CutPrefix(strings.TrimSpace(expr), "Object")
	if !ok {
		return expr
	}
	body, ok := strings.CutPrefix(strings.TrimLeft(rest, " \t\r\n"), "{")
	if !ok {
		return expr
	}
	depth := 1
	for i, c := range body {
		switch c {
		case '{':
			depth++
		case '}':
			depth--
			if depth == 0 {
				if i == 0 {
					return expr
				}
				return wrap + body[:i] + closing + body[i+1:]
			}
		}
	}
	return expr
}
