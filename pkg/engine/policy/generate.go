package policy

import "strings"

// KindRef is a kind with its apiVersion ("v1", "group/version").
type KindRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
}

// SplitKindRef reads "Kind", "v1/Kind" or "group/version/Kind" (a
// cloneList kind): apiVersion is empty for a bare kind.
func SplitKindRef(s string) (apiVersion, kind string) {
	i := strings.LastIndexByte(s, '/')
	if i < 0 {
		return "", s
	}
	return s[:i], s[i+1:]
}

// DownstreamKinds are the kinds a generate rule writes: its own kind, each
// foreach entry's, and the kinds its cloneLists copy (a bare kind is a core
// kind, apiVersion v1); for a GeneratingPolicy, the kinds its status
// records. Each kind is listed once, in the rule's order.
func (g *Generation) DownstreamKinds() []KindRef {
	var out []KindRef
	add := func(apiVersion, kind string, list *CloneList) {
		if kind != "" {
			out = appendKind(out, KindRef{APIVersion: apiVersion, Kind: kind})
		}
		if list == nil {
			return
		}
		for _, k := range list.Kinds {
			av, kd := SplitKindRef(k)
			if av == "" {
				av = "v1"
			}
			out = appendKind(out, KindRef{APIVersion: av, Kind: kd})
		}
	}
	add(g.APIVersion, g.Kind, g.CloneList)
	for i := range g.ForEach {
		add(g.ForEach[i].APIVersion, g.ForEach[i].Kind, g.ForEach[i].CloneList)
	}
	for _, k := range g.Recorded {
		if k.APIVersion != "" && k.Kind != "" {
			out = appendKind(out, k)
		}
	}
	return out
}

func appendKind(list []KindRef, k KindRef) []KindRef {
	for _, have := range list {
		if have == k {
			return list
		}
	}
	return append(list, k)
}

// GeneratesData reports whether the generate rule writes data of its own
// (not clones), so a change of the policy changes what it writes.
func (g *Generation) GeneratesData() bool {
	if g.Data != nil || g.FromCEL {
		return true
	}
	for i := range g.ForEach {
		if g.ForEach[i].Data != nil {
			return true
		}
	}
	return false
}

// GenerateExisting reports whether the generate rule r also applies to
// the triggers that exist when the policy is created or changed: the
// rule's generateExisting when set, the policy's (generateExisting, or its
// deprecated name generateExistingOnPolicyUpdate) otherwise.
func (p *Policy) GenerateExisting(r *Rule) bool {
	if r.Generation == nil {
		return false
	}
	if r.Generation.GenerateExisting != nil {
		return *r.Generation.GenerateExisting
	}
	if p.Spec.GenerateExisting {
		return true
	}
	return p.Spec.GenerateExistingOnPolicyUpdate != nil && *p.Spec.GenerateExistingOnPolicyUpdate
}

// MutateExistingOnPolicyUpdate reports whether the mutate-existing rule r
// patches the existing targets of existing triggers when the policy is
// created or changed: the rule's setting when set, the policy's otherwise.
func (p *Policy) MutateExistingOnPolicyUpdate(r *Rule) bool {
	if r.Mutation == nil || len(r.Mutation.Targets) == 0 {
		return false
	}
	if r.Mutation.MutateExistingOnPolicyUpdate != nil {
		return *r.Mutation.MutateExistingOnPolicyUpdate
	}
	return p.Spec.MutateExistingOnPolicyUpdate
}

// BackgroundRules are the rules the background acts on (generate and
// mutate-existing): a ClusterPolicy's or Policy's rules, or the one
// generate rule a GeneratingPolicy acts as, named after it (as Kyverno
// reports it and the engine compiles it).
func (p *Policy) BackgroundRules() []Rule {
	if p.GPol != nil {
		return []Rule{{Name: p.Metadata.Name, Generation: p.gpolGeneration()}}
	}
	return p.Spec.Rules
}

// GenerationOf is the generate rule a GeneratingPolicy acts as
// (BackgroundRules), for the engine to compile; nil for other kinds.
func (p *Policy) GenerationOf() *Generation {
	if p.GPol == nil {
		return nil
	}
	return p.gpolGeneration()
}

// Rule is the policy's rule named name, or nil (BackgroundRules for a
// GeneratingPolicy).
func (p *Policy) Rule(name string) *Rule {
	if p.GPol != nil {
		if name != p.Metadata.Name {
			return nil
		}
		return &p.BackgroundRules()[0]
	}
	for i := range p.Spec.Rules {
		if p.Spec.Rules[i].Name == name {
			return &p.Spec.Rules[i]
		}
	}
	return nil
}
