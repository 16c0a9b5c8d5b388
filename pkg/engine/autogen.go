package engine

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// Pod controllers that autogen writes rules for.
var podControllers = []string{"DaemonSet", "Deployment", "Job", "StatefulSet", "ReplicaSet", "ReplicationController"}

const cronJob = "CronJob"

// knownControllers are the kinds the autogen annotation may name.
var knownControllers = map[string]bool{
	"DaemonSet": true, "Deployment": true, "Job": true, "StatefulSet": true,
	"ReplicaSet": true, "ReplicationController": true, "CronJob": true,
}

// AutogenControllers returns the controllers autogen applies a policy's Pod
// rules to, or nil when autogen does not apply.
func AutogenControllers(p *policy.Policy) []string {
	if !canAutogen(&p.Spec) {
		return nil
	}
	all := append(append([]string{}, podControllers...), cronJob)
	v, ok := p.Metadata.Annotations[AnnotationAutogenControllers]
	if !ok {
		return all
	}
	if v == "" || v == "none" {
		return nil
	}
	var out []string
	for _, c := range strings.Split(v, ",") {
		c = strings.TrimSpace(c)
		if c == "all" {
			return all
		}
		if knownControllers[c] {
			out = append(out, c)
		}
	}
	sort.Strings(out)
	return out
}

func canAutogen(spec *policy.Spec) bool {
	needed := false
	check := func(rd *policy.ResourceDescription) bool {
		if rd.Name != "" || len(rd.Names) > 0 || rd.Selector != nil || rd.Annotations != nil {
			return false
		}
		if len(rd.Kinds) > 1 && hasKind(rd.Kinds, "Pod") {
			return false
		}
		for _, k := range rd.Kinds {
			// As Kyverno's CanAutoGen, only a kind written as the bare
			// name of Pod or a controller asks for autogen: Pod/exec or
			// v1/Pod do not.
			if k == "Pod" || k == cronJob || contains(podControllers, k) {
				needed = true
			}
		}
		return true
	}
	checkBlock := func(m *policy.MatchResources) bool {
		if !check(&m.ResourceDescription) {
			return false
		}
		for i := range m.Any {
			if !check(&m.Any[i].ResourceDescription) {
				return false
			}
		}
		for i := range m.All {
			if !check(&m.All[i].ResourceDescription) {
				return false
			}
		}
		return true
	}
	for i := range spec.Rules {
		r := &spec.Rules[i]
		if r.Generation != nil {
			return false
		}
		if r.Mutation != nil {
			if r.Mutation.PatchesJSON6902 != "" {
				return false
			}
			for _, fe := range r.Mutation.ForEach {
				if fe.PatchesJSON6902 != "" {
					return false
				}
			}
		}
		if !checkBlock(&r.MatchResources) {
			return false
		}
		if r.ExcludeResources != nil && !checkBlock(r.ExcludeResources) {
			return false
		}
	}
	return needed
}

// kindName returns the Kind part of a kinds entry.
func kindName(s string) string {
	return parseKind(s).kind
}

func hasKind(kinds []string, kind string) bool {
	for _, k := range kinds {
		if kindName(k) == kind {
			return true
		}
	}
	return false
}

func blockKinds(m *policy.MatchResources) []string {
	var out []string
	out = append(out, m.Kinds...)
	for i := range m.Any {
		out = append(out, m.Any[i].Kinds...)
	}
	for i := range m.All {
		out = append(out, m.All[i].Kinds...)
	}
	return out
}

// autogenRules writes the controller rules (autogen-<name>) and the CronJob
// rules (autogen-cronjob-<name>) for a policy, as Kyverno does.
func autogenRules(p *policy.Policy) ([]policy.Rule, error) {
	controllers := AutogenControllers(p)
	if len(controllers) == 0 {
		return nil, nil
	}
	var plain []string
	withCronJob := false
	for _, c := range controllers {
		if c == cronJob {
			withCronJob = true
		} else {
			plain = append(plain, c)
		}
	}
	var out []policy.Rule
	for i := range p.Spec.Rules {
		r := &p.Spec.Rules[i]
		if strings.HasPrefix(r.Name, "autogen-") {
			continue
		}
		if !hasKind(blockKinds(&r.MatchResources), "Pod") {
			continue
		}
		if r.ExcludeResources != nil {
			if ek := blockKinds(r.ExcludeResources); len(ek) > 0 && !hasKind(ek, "Pod") {
				continue
			}
		}
		var ctrlRule *policy.Rule
		if len(plain) > 0 || withCronJob {
			ctrlKinds := plain
			if len(ctrlKinds) == 0 {
				// The CronJob rule is built from the controller rule.
				ctrlKinds = []string{}
			}
			ctrlRule = wrapRule(r, autogenName("autogen", r.Name), "template", ctrlKinds, true)
		}
		if ctrlRule != nil && len(plain) > 0 {
			conv, err := convertRule(ctrlRule, replacementsFor(ctrlRule, podReplacements, podCELReplacements))
			if err != nil {
				return nil, err
			}
			out = append(out, *conv)
		}
		if withCronJob && ctrlRule != nil {
			cj := wrapRule(ctrlRule, autogenName("autogen-cronjob", r.Name), "jobTemplate", []string{cronJob}, false)
			if cj != nil {
				conv, err := convertRule(cj, replacementsFor(cj, cronJobReplacements, cronJobCELReplacements))
				if err != nil {
					return nil, err
				}
				out = append(out, *conv)
			}
		}
	}
	return out, nil
}

func autogenName(prefix, name string) string {
	n := prefix + "-" + name
	if len(n) > 63 {
		n = n[:63]
	}
	return n
}

// toGVKs returns the kinds autogen rules match. They are plain kind names,
// not group/version/kind: a controller of an older API version
// (batch/v1beta1 CronJob) is still checked, as the reference does.
func toGVKs(kinds []string) []string {
	return append([]string(nil), kinds...)
}

// wrapRule copies r under a new name with its kinds replaced by the
// controller kinds and its patterns nested under spec.<tplKey>. onlyPod
// limits the kind replacement to filters that name Pod.
func wrapRule(r *policy.Rule, name, tplKey string, kinds []string, onlyPod bool) *policy.Rule {
	nr := deepCopyRule(r)
	nr.Name = name
	gvks := toGVKs(kinds)
	replace := func(fs []policy.ResourceFilter) {
		for i := range fs {
			if !onlyPod || hasKind(fs[i].Kinds, "Pod") {
				fs[i].Kinds = append([]string(nil), gvks...)
			}
		}
	}
	switch {
	case len(nr.MatchResources.Any) > 0:
		replace(nr.MatchResources.Any)
	case len(nr.MatchResources.All) > 0:
		replace(nr.MatchResources.All)
	default:
		nr.MatchResources.Kinds = append([]string(nil), gvks...)
	}
	if ex := nr.ExcludeResources; ex != nil {
		switch {
		case len(ex.Any) > 0:
			replace(ex.Any)
		case len(ex.All) > 0:
			replace(ex.All)
		case len(ex.Kinds) > 0:
			ex.Kinds = append([]string(nil), gvks...)
		}
	}
	wrap := func(v any) any {
		return map[string]any{"spec": map[string]any{tplKey: v}}
	}
	if m := nr.Mutation; m != nil {
		if m.PatchStrategicMerge != nil {
			nr.Mutation = &policy.Mutation{PatchStrategicMerge: wrap(m.PatchStrategicMerge)}
			return nr
		}
		if len(m.ForEach) > 0 {
			fes := make([]policy.ForEachMutation, 0, len(m.ForEach))
			for _, fe := range m.ForEach {
				fes = append(fes, policy.ForEachMutation{
					List:                fe.List,
					Context:             fe.Context,
					Preconditions:       fe.Preconditions,
					PatchStrategicMerge: wrap(fe.PatchStrategicMerge),
				})
			}
			nr.Mutation = &policy.Mutation{ForEach: fes}
			return nr
		}
	}
	if v := nr.Validation; v != nil {
		base := policy.Validation{
			Message:                 v.Message,
			FailureAction:           v.FailureAction,
			FailureActionOverrides:  v.FailureActionOverrides,
			AllowExistingViolations: v.AllowExistingViolations,
		}
		switch {
		case v.Pattern != nil:
			base.Pattern = wrap(v.Pattern)
		case v.Deny != nil:
			base.Deny = v.Deny
		case v.PodSecurity != nil:
			base.PodSecurity = v.PodSecurity
		case v.AnyPattern != nil:
			for _, p := range v.AnyPattern {
				base.AnyPattern = append(base.AnyPattern, wrap(p))
			}
		case len(v.ForEach) > 0:
			base.ForEach = v.ForEach
		case v.CEL != nil:
			return nr
		default:
			return nil
		}
		nr.Validation = &base
		return nr
	}
	if len(nr.VerifyImages) > 0 {
		return nr
	}
	return nil
}

func deepCopyRule(r *policy.Rule) *policy.Rule {
	b, err := json.Marshal(r)
	if err != nil {
		cp := *r
		return &cp
	}
	var out policy.Rule
	if err := json.Unmarshal(b, &out); err != nil {
		cp := *r
		return &cp
	}
	return &out
}

var (
	podReplacements = [][2]string{
		{"request.object.spec", "request.object.spec.template.spec"},
		{"request.oldObject.spec", "request.oldObject.spec.template.spec"},
		{"request.object.metadata", "request.object.spec.template.metadata"},
		{"request.oldObject.metadata", "request.oldObject.spec.template.metadata"},
	}
	cronJobReplacements = [][2]string{
		{"request.object.spec", "request.object.spec.jobTemplate.spec.template.spec"},
		{"request.oldObject.spec", "request.oldObject.spec.jobTemplate.spec.template.spec"},
		{"request.object.metadata", "request.object.spec.jobTemplate.spec.template.metadata"},
		{"request.oldObject.metadata", "request.oldObject.spec.jobTemplate.spec.template.metadata"},
	}
)

// CEL rules name the objects without "request." (object, oldObject), so
// theirs are rewritten with these, as Kyverno's autogen does.
var (
	podCELReplacements = [][2]string{
		{"object.spec", "object.spec.template.spec"},
		{"oldObject.spec", "oldObject.spec.template.spec"},
		{"object.metadata", "object.spec.template.metadata"},
		{"oldObject.metadata", "oldObject.spec.template.metadata"},
	}
	cronJobCELReplacements = [][2]string{
		{"object.spec", "object.spec.jobTemplate.spec.template.spec"},
		{"oldObject.spec", "oldObject.spec.jobTemplate.spec.template.spec"},
		{"object.metadata", "object.spec.jobTemplate.spec.template.metadata"},
		{"oldObject.metadata", "oldObject.spec.jobTemplate.spec.template.metadata"},
	}
)

// replacementsFor is the rewrite of r: the CEL one for a validate.cel
// rule.
func replacementsFor(r *policy.Rule, classic, cel [][2]string) [][2]string {
	if r.Validation != nil && r.Validation.CEL != nil {
		return cel
	}
	return classic
}

// convertRule rewrites variable paths of a Pod rule to the controller's pod
// template, in the same textual way Kyverno does.
func convertRule(r *policy.Rule, repl [][2]string) (*policy.Rule, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	for _, rp := range repl {
		b = bytes.ReplaceAll(b, []byte(rp[0]), []byte(rp[1]))
	}
	var out policy.Rule
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
