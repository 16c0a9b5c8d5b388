package engine

import (
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// KindMatch is how a policy's rules select one kind of resource.
type KindMatch int

// KindMatch values.
const (
	// KindNotSelected: no rule names the kind.
	KindNotSelected KindMatch = iota
	// KindByWildcard: only a kind wildcard ("*") selects it.
	KindByWildcard
	// KindNamed: a rule names the kind (possibly with version or group
	// wildcards).
	KindNamed
)

// SelectsKind reports how the match blocks of the policy's rules of type t
// (autogen rules included) select resources of group/version/kind itself,
// not a subresource. It is the kind filter of a background scan: which
// kinds to list so that every resource the rules may match is evaluated.
// A kind named in any filter of a match block counts, so a rule whose
// filters must all match may select fewer resources than listed; the
// evaluation decides.
func (p *Policy) SelectsKind(t RuleType, group, version, kind string) KindMatch {
	best := KindNotSelected
	for _, rule := range p.Rules {
		if ruleType(&rule.Rule) != t {
			continue
		}
		if m := rule.SelectsKind(group, version, kind); m == KindNamed {
			return m
		} else if m > best {
			best = m
		}
	}
	return best
}

// SelectsKind says whether the rule's match block selects the kind by
// name, only by a kind wildcard, or not at all.
func (r *Rule) SelectsKind(group, version, kind string) KindMatch {
	if r.celMatch != nil {
		return r.celMatch.selectsKind(group, version, kind)
	}
	if r.native != nil {
		return r.native.selectsKind(group, version, kind)
	}
	if r.match == nil {
		return KindNotSelected
	}
	k := gvk{group: group, version: version, kind: kind}
	best := KindNotSelected
	for _, f := range r.match.filters() {
		for _, sel := range f.kinds {
			if !sel.matches(k, "") {
				continue
			}
			if sel.kind == "*" {
				best = KindByWildcard
				continue
			}
			return KindNamed
		}
	}
	return best
}

// ResourceRules are the resource rules of a rule of a ValidatingPolicy
// (its matchConstraints, or an autogen variant's), which name API
// resources and operations as a webhook rule does; ok is false for the
// rules of the classic kinds, which match kinds.
func (r *Rule) ResourceRules() (rules []policy.ResourceRule, ok bool) {
	if r.celMatch == nil {
		return nil, false
	}
	return r.celMatch.rules, true
}

// SelectsOperation reports whether the rule selects requests of op: a
// rule with resource rules (ResourceRules) when one of them names op or
// "*", a rule of the classic kinds always (its match block says nothing
// of operations unless it names them, which the engine checks).
func (r *Rule) SelectsOperation(op string) bool {
	rules, ok := r.ResourceRules()
	if !ok {
		return true
	}
	for _, rr := range rules {
		for _, o := range rr.Operations {
			if o == "*" || strings.EqualFold(o, op) {
				return true
			}
		}
	}
	return false
}

// filters lists every filter of the block.
func (c *matcher) filters() []filter {
	out := make([]filter, 0, len(c.any)+len(c.all)+1)
	out = append(out, c.any...)
	out = append(out, c.all...)
	if c.single != nil {
		out = append(out, *c.single)
	}
	return out
}

// HasRules reports whether the policy has rules of type t.
func (p *Policy) HasRules(t RuleType) bool { return p.hasType(t) }

// HasChecks reports whether the policy has rules Check runs (validate or
// verifyImages, or a MutatingAdmissionPolicy's mutation).
func (p *Policy) HasChecks() bool {
	return p.hasType(TypeValidation) || p.hasType(TypeImageVerify) || p.checksMutation()
}

// checksMutation reports whether Check runs the policy's mutation: a
// MutatingAdmissionPolicy's, which reports say is applied or not, as
// Kyverno's do (the API server applies it; Verdict only reports).
func (p *Policy) checksMutation() bool {
	return p.Raw.Native != nil && p.Raw.Native.MAP != nil
}

// ChecksKind is SelectsKind for the rules Check runs: the closest
// selection of the kind by the policy's validate or verifyImages rules.
func (p *Policy) ChecksKind(group, version, kind string) KindMatch {
	if p.checksMutation() {
		return p.SelectsKind(TypeMutation, group, version, kind)
	}
	m := p.SelectsKind(TypeValidation, group, version, kind)
	if m == KindNamed {
		return m
	}
	return max(m, p.SelectsKind(TypeImageVerify, group, version, kind))
}
