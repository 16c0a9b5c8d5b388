package engine

import (
	"context"
	"fmt"

	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// CleanupPolicy is a compiled ClusterCleanupPolicy or CleanupPolicy:
// validated, its match and exclude blocks and its conditions prepared by
// the same code as a rule's; or a compiled DeletingPolicy or
// NamespacedDeletingPolicy (Raw.DPol), its CEL and matchConstraints
// prepared as a ValidatingPolicy's (dpol.go).
type CleanupPolicy struct {
	Raw *policy.CleanupPolicy
	// rule carries the policy's context, match, exclude and conditions
	// as a rule, so that they are evaluated as a rule's are.
	rule *Rule
	// shell is the policy the rule belongs to, for the evaluation.
	shell *Policy
	kinds []KindSelector
	// conditions are the names of a DeletingPolicy's conditions.
	conditions []string
}

// Reasons a cleanup policy leaves a resource alone (CleanupDecision.Reason).
const (
	CleanupNotMatched       = "notMatched"
	CleanupExcluded         = "excluded"
	CleanupOtherNamespace   = "otherNamespace"
	CleanupConditionsNotMet = "conditionsNotMet"
)

// CompileCleanup checks a cleanup policy (policy.ValidateCleanupWith, its
// expressions parsed by this engine) and prepares it for evaluation. A
// DeletingPolicy is checked with policy.ValidateDeleting (accepting one
// without matchConstraints, which selects JSON payloads only:
// DeletingPolicyFromObject refuses it for the cluster) and its CEL
// compiled.
func (e *Engine) CompileCleanup(p *policy.CleanupPolicy) (*CleanupPolicy, error) {
	if p.DPol != nil {
		return e.compileDPol(p)
	}
	if errs := policy.ValidateCleanupWith(p, e.checkExpression); len(errs) > 0 {
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Key(), errs.ToAggregate())
	}
	r := policy.Rule{
		Name:                "cleanup",
		Context:             p.Spec.Context,
		MatchResources:      *p.Spec.MatchResources.MatchResources(),
		ExcludeResources:    p.Spec.ExcludeResources.MatchResources(),
		RawAnyAllConditions: p.Spec.Conditions,
	}
	cr := &Rule{Rule: r}
	cr.match = compileMatch(&cr.MatchResources)
	cr.exclude = compileExclude(cr.ExcludeResources)
	cr.usesImages, cr.usesServiceAccount = namesVariables(r)
	shell := &Policy{Raw: &policy.Policy{APIVersion: p.APIVersion, Kind: p.Kind, Metadata: p.Metadata}, Rules: []*Rule{cr}, Scored: true}
	cp := &CleanupPolicy{Raw: p, rule: cr, shell: shell}
	for _, k := range p.Spec.MatchResources.Kinds() {
		cp.kinds = append(cp.kinds, ParseKindSelector(k))
	}
	return cp, nil
}

// Kinds are the kinds the policy's match block names, or those its
// matchConstraints' resource rules select (by resource: see
// KindSelector.Resource): what a tick lists.
func (p *CleanupPolicy) Kinds() []KindSelector { return p.kinds }

// KindSelector is one entry of a kinds list, parsed as match blocks read
// it: Kind, Version/Kind or Group/Version/Kind, with an optional
// /subresource; "*" stands for what the entry does not say.
type KindSelector struct {
	Group, Version, Kind, Subresource string
	// Resource, when set, selects the kinds whose resource (the plural
	// name) it is, or all ("*"), as a DeletingPolicy's resource rule
	// names them; Kind is then "*".
	Resource string
}

// ParseKindSelector parses one entry of a kinds list.
func ParseKindSelector(s string) KindSelector {
	k := parseKind(s)
	return KindSelector{Group: k.group, Version: k.version, Kind: k.kind, Subresource: k.subresource}
}

// Selects reports whether the selector selects objects (not a
// subresource) of the kind gvk, as a match block judges it.
func (k KindSelector) Selects(g GroupVersionKind) bool {
	if k.Resource != "" {
		return (k.Group == "*" || k.Group == g.Group) && (k.Version == "*" || k.Version == g.Version) &&
			(k.Resource == "*" || k.Resource == guessResource(gvk{group: g.Group, version: g.Version, kind: g.Kind}))
	}
	ks := kindSelector{group: k.Group, version: k.Version, kind: k.Kind, subresource: k.Subresource}
	return ks.matches(gvk{group: g.Group, version: g.Version, kind: g.Kind}, "")
}

// Cleanup is one run (a tick) of a cleanup policy: its context entries
// are loaded once, then Decide judges each listed resource.
type Cleanup struct {
	e *Engine
	p *CleanupPolicy
	// vars are the variables of the context entries.
	vars map[string]any
}

// StartCleanup loads the policy's context entries, once for a tick, as
// Kyverno's cleanup controller does (before any resource is seen: they
// cannot read `target`). ctx bounds the loading and is passed to the
// context loader.
func (e *Engine) StartCleanup(ctx context.Context, p *CleanupPolicy) (*Cleanup, error) {
	req := &Request{}
	m := e.meterFor(ctx, req)
	ec := &evalContext{jp: e.jp, data: map[string]any{}, m: m}
	run := &ruleRun{e: e, req: req, m: m, policy: p.shell, rule: p.rule, ctx: ec}
	if err := run.loadEntries(p.rule.Context); err != nil {
		return nil, fmt.Errorf("cleanup policy %s: failed to load context: %w", p.Raw.Key(), err)
	}
	if err := m.stopped(); err != nil {
		return nil, fmt.Errorf("cleanup policy %s: %w", p.Raw.Key(), err)
	}
	return &Cleanup{e: e, p: p, vars: ec.data}, nil
}

// CleanupDecision is what a cleanup policy makes of one resource.
type CleanupDecision struct {
	// Delete is true when the policy deletes the resource.
	Delete bool
	// Reason says why not: CleanupNotMatched, CleanupExcluded,
	// CleanupOtherNamespace or CleanupConditionsNotMet.
	Reason string
	// Message is the message of the condition that failed, if it has
	// one.
	Message string
}

// Decide judges one resource as it is now: a namespaced CleanupPolicy
// deletes only in its own namespace; the resource must match the match
// block (namespaceSelector is judged on nsLabels, the labels of its
// namespace), not the exclude block, and the conditions must hold, the
// resource seen as `target` (with request.namespace its namespace and
// images its images, as Kyverno sets them). An error is a condition that
// could not be evaluated (a missing variable, a failing function, a
// limit reached) or a match block whose wildcards the work budget could
// not pay for: the resource is not deleted. A DeletingPolicy judges
// it by its matchConstraints and CEL conditions instead (decideCEL).
func (c *Cleanup) Decide(ctx context.Context, obj map[string]any, nsLabels map[string]string) (CleanupDecision, error) {
	return c.DecideResource(ctx, obj, nsLabels, "")
}

// DecideResource is Decide for an object listed as resource (its plural,
// as discovery serves it): a DeletingPolicy's resource rules are judged
// against it rather than against a plural guessed from the object's kind
// (which is wrong for Endpoints or a CRD with an irregular plural).
// Cleanup policies select by kind and ignore it.
func (c *Cleanup) DecideResource(ctx context.Context, obj map[string]any, nsLabels map[string]string, resource string) (CleanupDecision, error) {
	p := c.p
	if p.rule.cel != nil {
		return c.decideCEL(ctx, obj, nsLabels, resource)
	}
	req := &Request{Object: obj, NamespaceLabels: nsLabels}
	in := newMatchInput(req)
	if p.Raw.Namespaced() && in.namespace != p.Raw.Metadata.Namespace {
		return CleanupDecision{Reason: CleanupOtherNamespace}, nil
	}
	// The match and exclude blocks' wildcards are charged to the
	// resource's budget, as the conditions are.
	m := c.e.meterFor(ctx, req)
	matched, err := p.rule.match.matches(in, m)
	if err != nil {
		return CleanupDecision{}, fmt.Errorf("failed to match: %w", err)
	}
	if !matched {
		return CleanupDecision{Reason: CleanupNotMatched}, nil
	}
	if p.rule.exclude != nil {
		excluded, err := p.rule.exclude.matches(in, m)
		if err != nil {
			return CleanupDecision{}, fmt.Errorf("failed to match: %w", err)
		}
		if excluded {
			return CleanupDecision{Reason: CleanupExcluded}, nil
		}
	}
	if p.Raw.Spec.Conditions.IsEmpty() {
		return CleanupDecision{Delete: true}, nil
	}
	ec := &evalContext{jp: c.e.jp, data: c.vars, shared: true, m: m}
	ec.put("target", obj)
	ec.set("request.namespace", in.namespace)
	if p.rule.usesImages {
		ec.put("images", imagesOf(obj))
	}
	run := &ruleRun{e: c.e, req: req, m: m, policy: p.shell, rule: p.rule, ctx: ec, obj: obj}
	ok, msg, err := run.conditions(p.Raw.Spec.Conditions)
	if err == nil {
		err = m.stopped()
	}
	switch {
	case err != nil:
		return CleanupDecision{}, fmt.Errorf("failed to evaluate conditions: %w", err)
	case !ok:
		return CleanupDecision{Reason: CleanupConditionsNotMet, Message: msg}, nil
	}
	return CleanupDecision{Delete: true}, nil
}
