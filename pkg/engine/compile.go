package engine

import (
	"encoding/json"
	"fmt"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/pattern"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// Policy annotations the engine reads.
const (
	AnnotationAutogenControllers = "pod-policies.kyverno.io/autogen-controllers"
	AnnotationScored             = "policies.kyverno.io/scored"
	AnnotationCategory           = "policies.kyverno.io/category"
	AnnotationSeverity           = "policies.kyverno.io/severity"
)

// Policy is a compiled policy: validated, with its autogen rules, ready to
// be evaluated many times.
type Policy struct {
	Raw   *policy.Policy
	Rules []*Rule
	// Scored is false when failures are reported as warnings.
	Scored   bool
	Category string
	Severity string
}

// Name is the policy's name.
func (p *Policy) Name() string { return p.Raw.Metadata.Name }

// Rule is the compiled rule named name (autogen rules included), or nil.
func (p *Policy) Rule(name string) *Rule {
	for _, r := range p.Rules {
		if r.Name == name {
			return r
		}
	}
	return nil
}

// Rule is a compiled rule.
type Rule struct {
	policy.Rule
	// Autogen is true for rules generated for Pod controllers.
	Autogen bool
	// usesImages and usesServiceAccount say whether the rule refers to
	// those computed variables, so they are built only when needed.
	usesImages         bool
	usesServiceAccount bool
	passMessage        string
	pssPassMessage     string
	match              *matcher
	exclude            *matcher
	// patternVars and anyPatternVars say whether the validate patterns
	// hold variables; patterns without are used as they are.
	patternVars    bool
	anyPatternVars []bool
	// pattern and anyPattern are prepared when they hold no variables.
	pattern    *pattern.Pattern
	anyPattern []*pattern.Pattern
	// podSecurity is the prepared podSecurity check, if the rule has one.
	podSecurity *podSecurity
	// cel is the compiled validate.cel, if the rule has one.
	cel *celRule
	// celMatch, for the rules of a ValidatingPolicy, is its compiled
	// matchConstraints, which select instead of match and exclude.
	celMatch *celMatch
	// native is set on the one rule of a ValidatingAdmissionPolicy or a
	// MutatingAdmissionPolicy (native.go).
	native *nativeRule
}

// Compile checks a policy and prepares it for evaluation.
func (e *Engine) Compile(p *policy.Policy) (*Policy, error) {
	if p.VPol != nil {
		return e.compileVPol(p)
	}
	if p.MPol != nil {
		return e.compileMPol(p)
	}
	if p.GPol != nil {
		return e.compileGPol(p)
	}
	if p.IVPol != nil {
		return e.compileIVPol(p)
	}
	if p.Native != nil {
		return e.compileNative(p)
	}
	if errs := policy.ValidateWith(p, e.checkExpression); len(errs) > 0 {
		return nil, fmt.Errorf("policy %s: %w", p.Key(), errs.ToAggregate())
	}
	cp := &Policy{Raw: p, Scored: true}
	if ann := p.Metadata.Annotations; ann != nil {
		cp.Scored = ann[AnnotationScored] != "false"
		cp.Category = ann[AnnotationCategory]
		cp.Severity = ann[AnnotationSeverity]
	}
	rules, err := autogenRules(p)
	if err != nil {
		return nil, fmt.Errorf("policy %s: autogen: %w", p.Key(), err)
	}
	for i := range p.Spec.Rules {
		r, err := newRule(p.Spec.Rules[i], false)
		if err != nil {
			return nil, fmt.Errorf("policy %s: spec.rules[%d] (%s): %w", p.Key(), i, p.Spec.Rules[i].Name, err)
		}
		cp.Rules = append(cp.Rules, r)
	}
	for i := range rules {
		r, err := newRule(rules[i], true)
		if err != nil {
			return nil, fmt.Errorf("policy %s: autogen rule %s: %w", p.Key(), rules[i].Name, err)
		}
		cp.Rules = append(cp.Rules, r)
	}
	return cp, nil
}

// checkExpression parses a policy's expression with the interpreter that
// evaluates it, which keeps it compiled for evaluation.
func (e *Engine) checkExpression(expr string) error {
	_, err := e.jp.Compile(expr)
	return err
}

func newRule(r policy.Rule, autogen bool) (*Rule, error) {
	cr := &Rule{
		Rule:           r,
		Autogen:        autogen,
		passMessage:    fmt.Sprintf("validation rule '%s' passed.", r.Name),
		pssPassMessage: fmt.Sprintf("Validation rule '%s' passed.", r.Name),
	}
	cr.match = compileMatch(&cr.MatchResources)
	cr.exclude = compileExclude(cr.ExcludeResources)
	cr.compilePodSecurity()
	if v := cr.Validation; v != nil {
		cr.patternVars = hasVariables(v.Pattern)
		if v.Pattern != nil && !cr.patternVars {
			cr.pattern = pattern.Compile(v.Pattern)
		}
		for _, ap := range v.AnyPattern {
			vars := hasVariables(ap)
			cr.anyPatternVars = append(cr.anyPatternVars, vars)
			var cp *pattern.Pattern
			if !vars {
				cp = pattern.Compile(ap)
			}
			cr.anyPattern = append(cr.anyPattern, cp)
		}
	}
	cr.usesImages, cr.usesServiceAccount = namesVariables(r)
	var err error
	if cr.cel, err = compileCEL(&cr.Rule); err != nil {
		return nil, err
	}
	return cr, nil
}

// namesVariables reports whether the rule's text names the images and the
// serviceAccount variables anywhere they could be read: in {{ }}, and in
// the JMESPath of context entries, foreach lists and conditions. A
// podSecurity rule's exclusions hold an "images" field that is no
// variable, so they are left out.
func namesVariables(r policy.Rule) (images, serviceAccount bool) {
	if v := r.Validation; v != nil && v.PodSecurity != nil {
		cp := *v
		cp.PodSecurity = nil
		r.Validation = &cp
	}
	b, _ := json.Marshal(r)
	s := string(b)
	return strings.Contains(s, "images"), strings.Contains(s, "serviceAccount")
}
