package policy

import (
	"fmt"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/conditions"
	"github.com/verdict-dev/verdict/pkg/engine/jmespath"
	"github.com/verdict-dev/verdict/pkg/engine/pattern"
)

// Validate checks a policy and returns every problem with its field path:
// a missing or duplicated rule name, not exactly one rule type, an empty
// match, bad anchors, JMESPath that does not parse, unknown operators,
// wildcard kinds in generate rules, bad failure actions. JMESPath
// expressions are parsed with jmespath.Check.
func Validate(p *Policy) FieldErrors { return ValidateWith(p, jmespath.Check) }

// checker holds what validation needs besides the policy: how to check a
// JMESPath expression.
type checker struct {
	expr func(string) error
}

// ValidateWith is Validate with every JMESPath expression checked by
// checkExpr (jmespath.Check when nil), which returns the expression's
// syntax error, if any. An engine passes its interpreter's Compile, so
// that an expression it validates is parsed once, for its evaluation too.
func ValidateWith(p *Policy, checkExpr func(expr string) error) FieldErrors {
	if checkExpr == nil {
		checkExpr = jmespath.Check
	}
	ck := checker{expr: checkExpr}
	var errs FieldErrors
	if p.Kind != KindClusterPolicy && p.Kind != KindPolicy {
		errs.add("kind", "must be ClusterPolicy or Policy, not %q", p.Kind)
	}
	if p.Metadata.Name == "" {
		errs.add("metadata.name", "is required")
	}
	checkAction(p.Spec.ValidationFailureAction, "spec.validationFailureAction", &errs)
	if len(p.Spec.Rules) == 0 {
		errs.add("spec.rules", "at least one rule is required")
	}
	switch p.Spec.ApplyRules {
	case "", "All", "One":
	default:
		errs.add("spec.applyRules", "must be All or One, not %q", p.Spec.ApplyRules)
	}
	switch p.Spec.FailurePolicy {
	case "", "Fail", "Ignore":
	default:
		errs.add("spec.failurePolicy", "must be Fail or Ignore, not %q", p.Spec.FailurePolicy)
	}
	seen := map[string]bool{}
	for i := range p.Spec.Rules {
		r := &p.Spec.Rules[i]
		path := fmt.Sprintf("spec.rules[%d]", i)
		if r.Name == "" {
			errs.add(path+".name", "is required")
		} else if seen[r.Name] {
			errs.add(path+".name", "duplicate rule name %q", r.Name)
		}
		seen[r.Name] = true
		if len(r.Name) > 63 {
			errs.add(path+".name", "must be at most 63 characters")
		}
		ck.checkRule(r, path, &errs)
		ck.checkVerifyImages(r, p.Spec.ValidationFailureAction, path, &errs)
	}
	checkTenancy(p, &errs)
	return errs
}

func checkAction(a, path string, errs *FieldErrors) {
	switch strings.ToLower(a) {
	case "", "audit", "enforce":
	default:
		errs.add(path, "must be Audit or Enforce, not %q", a)
	}
}

func (ck checker) checkRule(r *Rule, path string, errs *FieldErrors) {
	n := 0
	if r.Validation != nil {
		n++
	}
	if r.Mutation != nil {
		n++
	}
	if r.Generation != nil {
		n++
	}
	if len(r.VerifyImages) > 0 {
		n++
	}
	if n != 1 {
		errs.add(path, "a rule must have exactly one of validate, mutate, generate or verifyImages, found %d", n)
	}
	checkMatch(&r.MatchResources, path+".match", true, errs)
	if r.ExcludeResources != nil {
		checkMatch(r.ExcludeResources, path+".exclude", false, errs)
	}
	ck.checkContext(r.Context, path+".context", errs)
	ck.checkConditions(r.RawAnyAllConditions, path+".preconditions", errs)
	if v := r.Validation; v != nil {
		vp := path + ".validate"
		checkAction(v.FailureAction, vp+".failureAction", errs)
		kinds := 0
		for _, set := range []bool{v.Pattern != nil, len(v.AnyPattern) > 0, v.Deny != nil, len(v.ForEach) > 0, v.PodSecurity != nil, v.CEL != nil, v.Assert != nil, v.Manifests != nil} {
			if set {
				kinds++
			}
		}
		if kinds != 1 {
			errs.add(vp, "exactly one of pattern, anyPattern, deny, foreach, podSecurity, cel, assert or manifests is required, found %d", kinds)
		}
		if v.Manifests != nil {
			v.Manifests.check(vp+".manifests", errs)
		}
		if v.Pattern != nil {
			checkPatternRoot(v.Pattern, vp+".pattern", errs)
			ck.checkPattern(v.Pattern, vp+".pattern", false, errs)
		}
		for i, ap := range v.AnyPattern {
			app := fmt.Sprintf("%s.anyPattern[%d]", vp, i)
			checkPatternRoot(ap, app, errs)
			ck.checkPattern(ap, app, false, errs)
		}
		if v.Deny != nil {
			ck.checkConditions(v.Deny.Conditions, vp+".deny.conditions", errs)
		}
		for i := range v.ForEach {
			fe := &v.ForEach[i]
			fp := fmt.Sprintf("%s.foreach[%d]", vp, i)
			ck.checkExpr(fe.List, fp+".list", true, errs)
			ck.checkContext(fe.Context, fp+".context", errs)
			ck.checkConditions(fe.Preconditions, fp+".preconditions", errs)
			if fe.Pattern != nil {
				ck.checkPattern(fe.Pattern, fp+".pattern", false, errs)
			}
			if fe.Deny != nil {
				ck.checkConditions(fe.Deny.Conditions, fp+".deny.conditions", errs)
			}
		}
		if ps := v.PodSecurity; ps != nil {
			switch ps.Level {
			case "privileged", "baseline", "restricted":
			default:
				errs.add(vp+".podSecurity.level", "must be privileged, baseline or restricted, not %q", ps.Level)
			}
		}
		ck.checkStrings(v.Message, vp+".message", errs)
	}
	if m := r.Mutation; m != nil {
		mp := path + ".mutate"
		if m.PatchStrategicMerge == nil && m.PatchesJSON6902 == "" && len(m.ForEach) == 0 {
			errs.add(mp, "one of patchStrategicMerge, patchesJson6902 or foreach is required")
		}
		if m.PatchStrategicMerge != nil {
			ck.checkPattern(m.PatchStrategicMerge, mp+".patchStrategicMerge", true, errs)
		}
		ck.checkStrings(m.PatchesJSON6902, mp+".patchesJson6902", errs)
		for i := range m.ForEach {
			fe := &m.ForEach[i]
			fp := fmt.Sprintf("%s.foreach[%d]", mp, i)
			ck.checkExpr(fe.List, fp+".list", true, errs)
			ck.checkContext(fe.Context, fp+".context", errs)
			ck.checkConditions(fe.Preconditions, fp+".preconditions", errs)
			if fe.PatchStrategicMerge != nil {
				ck.checkPattern(fe.PatchStrategicMerge, fp+".patchStrategicMerge", true, errs)
			}
			switch fe.Order {
			case "", "Ascending", "Descending":
			default:
				errs.add(fp+".order", "must be Ascending or Descending, not %q", fe.Order)
			}
		}
	}
	if g := r.Generation; g != nil {
		gp := path + ".generate"
		for _, k := range allKinds(&r.MatchResources) {
			if strings.Contains(k, "*") {
				errs.add(path+".match", "wildcard kind %q is not allowed in a generate rule", k)
			}
		}
		checkGeneration(g, gp, errs)
	}
}

// checkGeneration checks a generate rule as Kyverno does: at most one of
// data, clone, cloneList and foreach (none generates the bare resource);
// without a cloneList, the target's apiVersion, kind and name are required,
// in the rule or in each foreach element.
func checkGeneration(g *Generation, gp string, errs *FieldErrors) {
	sources := 0
	for _, set := range []bool{g.Data != nil, cloneSet(g.Clone), cloneListSet(g.CloneList), g.ForEach != nil} {
		if set {
			sources++
		}
	}
	if sources > 1 {
		errs.add(gp, "only one of data, clone, cloneList and foreach can be specified")
		return
	}
	if g.ForEach == nil {
		checkGenerateTarget(g.APIVersion, g.Kind, g.Name, g.CloneList, gp, errs)
		return
	}
	for i := range g.ForEach {
		fe := &g.ForEach[i]
		checkGenerateTarget(fe.APIVersion, fe.Kind, fe.Name, fe.CloneList, fmt.Sprintf("%s.foreach[%d]", gp, i), errs)
	}
}

func checkGenerateTarget(apiVersion, kind, name string, cl *CloneList, path string, errs *FieldErrors) {
	if cloneListSet(cl) {
		return
	}
	if kind == "" {
		errs.add(path+".kind", "is required")
	}
	if name == "" {
		errs.add(path+".name", "is required")
	}
	if apiVersion == "" {
		errs.add(path+".apiVersion", "is required")
	}
}

// cloneSet and cloneListSet report whether a clone or cloneList says
// anything: an empty one is absent, as in Kyverno.
func cloneSet(c *CloneFrom) bool { return c != nil && (c.Name != "" || c.Namespace != "") }

func cloneListSet(c *CloneList) bool { return c != nil && c.Kinds != nil }

func allKinds(m *MatchResources) []string {
	out := append([]string(nil), m.Kinds...)
	for _, f := range m.Any {
		out = append(out, f.Kinds...)
	}
	for _, f := range m.All {
		out = append(out, f.Kinds...)
	}
	return out
}

func checkMatch(m *MatchResources, path string, required bool, errs *FieldErrors) {
	if len(m.Any) > 0 && len(m.All) > 0 {
		errs.add(path, "any and all cannot both be set")
	}
	legacy := !m.ResourceDescription.IsEmpty() || !m.UserInfo.IsEmpty()
	if (len(m.Any) > 0 || len(m.All) > 0) && legacy {
		errs.add(path, "resources cannot be set together with any or all")
	}
	if required && len(m.Any) == 0 && len(m.All) == 0 && !legacy {
		errs.add(path, "must select something: set any, all or resources")
	}
	check := func(rd *ResourceDescription, ui *UserInfo, p string) {
		if required && rd.IsEmpty() && ui.IsEmpty() {
			errs.add(p, "filter is empty")
		}
		for i, k := range rd.Kinds {
			if k == "" {
				errs.add(fmt.Sprintf("%s.resources.kinds[%d]", p, i), "kind must not be empty")
			}
		}
		for i, op := range rd.Operations {
			switch op {
			case "CREATE", "UPDATE", "DELETE", "CONNECT":
			default:
				errs.add(fmt.Sprintf("%s.resources.operations[%d]", p, i), "must be CREATE, UPDATE, DELETE or CONNECT, not %q", op)
			}
		}
		for _, sel := range []*LabelSelector{rd.Selector, rd.NamespaceSelector} {
			if sel == nil {
				continue
			}
			for i, e := range sel.MatchExpressions {
				switch e.Operator {
				case "In", "NotIn", "Exists", "DoesNotExist":
				default:
					errs.add(fmt.Sprintf("%s.resources.selector.matchExpressions[%d].operator", p, i), "unknown operator %q", e.Operator)
				}
			}
		}
	}
	for i := range m.Any {
		check(&m.Any[i].ResourceDescription, &m.Any[i].UserInfo, fmt.Sprintf("%s.any[%d]", path, i))
	}
	for i := range m.All {
		check(&m.All[i].ResourceDescription, &m.All[i].UserInfo, fmt.Sprintf("%s.all[%d]", path, i))
	}
	if legacy {
		check(&m.ResourceDescription, &m.UserInfo, path)
	}
}

func (ck checker) checkContext(entries []ContextEntry, path string, errs *FieldErrors) {
	for i, e := range entries {
		p := fmt.Sprintf("%s[%d]", path, i)
		if e.Name == "" {
			errs.add(p+".name", "is required")
		}
		n := 0
		for _, set := range []bool{e.Variable != nil, e.ConfigMap != nil, e.APICall != nil, e.ImageRegistry != nil, e.GlobalReference != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			errs.add(p, "exactly one of variable, configMap, apiCall, imageRegistry or globalReference is required")
		}
		if e.Variable != nil {
			if e.Variable.JMESPath != "" {
				ck.checkExpr(e.Variable.JMESPath, p+".variable.jmesPath", true, errs)
			}
			ck.checkStrings(e.Variable.Value, p+".variable.value", errs)
		}
		if e.APICall != nil {
			ck.checkStrings(e.APICall.URLPath, p+".apiCall.urlPath", errs)
			if e.APICall.JMESPath != "" {
				ck.checkExpr(e.APICall.JMESPath, p+".apiCall.jmesPath", true, errs)
			}
		}
	}
}

func (ck checker) checkConditions(c *Conditions, path string, errs *FieldErrors) {
	if c == nil {
		return
	}
	for name, list := range map[string][]Condition{"any": c.Any, "all": c.All} {
		for i, cond := range list {
			p := fmt.Sprintf("%s.%s[%d]", path, name, i)
			if !conditions.Valid(cond.Operator) {
				errs.add(p+".operator", "unknown operator %q", cond.Operator)
			}
			ck.checkStrings(cond.Key, p+".key", errs)
			ck.checkStrings(cond.Value, p+".value", errs)
		}
	}
}

// checkExpr parses a JMESPath expression; bare is true when the field is a
// plain expression rather than text with {{ }}.
func (ck checker) checkExpr(s, path string, bare bool, errs *FieldErrors) {
	if bare && !strings.Contains(s, "{{") {
		if err := ck.expr(s); err != nil {
			errs.add(path, "invalid JMESPath %q: %v", s, err)
		}
		return
	}
	ck.checkStrings(s, path, errs)
}

// checkStrings parses every {{ }} expression found in v's strings.
func (ck checker) checkStrings(v any, path string, errs *FieldErrors) {
	switch t := v.(type) {
	case string:
		for _, expr := range variablesIn(t) {
			if expr == "@" || strings.Contains(expr, "{{") {
				continue
			}
			if err := ck.expr(expr); err != nil {
				errs.add(path, "invalid JMESPath %q: %v", expr, err)
			}
		}
	case map[string]any:
		for k, e := range t {
			ck.checkStrings(k, path, errs)
			ck.checkStrings(e, joinPath(path, k), errs)
		}
	case []any:
		for i, e := range t {
			ck.checkStrings(e, fmt.Sprintf("%s[%d]", path, i), errs)
		}
	}
}

// variablesIn returns the innermost {{ }} expressions of s.
func variablesIn(s string) []string {
	var out []string
	for {
		start := strings.Index(s, "{{")
		if start < 0 {
			return out
		}
		if start > 0 && s[start-1] == '\\' {
			s = s[start+2:]
			continue
		}
		end := strings.Index(s[start:], "}}")
		if end < 0 {
			return out
		}
		inner := s[start+2 : start+end]
		if i := strings.LastIndex(inner, "{{"); i >= 0 {
			inner = inner[i+2:]
		}
		out = append(out, strings.TrimSpace(inner))
		s = s[start+end+2:]
	}
}

// checkPatternRoot refuses a validate pattern (or anyPattern entry) that
// is not an object. It is matched against a whole resource, which is
// always an object, so a string, number, boolean, list or null there can
// only fail, on every resource. Kyverno accepts such a pattern at
// admission; Verdict refuses it so that a typo is found at load time. A
// string with variables is kept: its value is known only at evaluation.
func checkPatternRoot(v any, path string, errs *FieldErrors) {
	switch t := v.(type) {
	case map[string]any:
		return
	case string:
		if strings.Contains(t, "{{") {
			return
		}
		errs.add(path, "must be an object (the fields to check), not the string %q", t)
	case []any:
		errs.add(path, "must be an object (the fields to check), not a list")
	case bool:
		errs.add(path, "must be an object (the fields to check), not the boolean %v", t)
	case nil:
		errs.add(path, "must be an object (the fields to check), not null")
	default:
		errs.add(path, "must be an object (the fields to check), not the number %v", t)
	}
}

// checkPattern looks for malformed anchors in pattern keys.
func (ck checker) checkPattern(v any, path string, mutate bool, errs *FieldErrors) {
	ck.checkStrings(v, path, errs)
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			p := joinPath(path, k)
			if msg := anchorProblem(k, mutate); msg != "" {
				errs.add(p, "%s", msg)
			}
			checkPatternKeys(e, p, mutate, errs)
		}
	case []any:
		for i, e := range t {
			checkPatternKeys(e, fmt.Sprintf("%s[%d]", path, i), mutate, errs)
		}
	}
}

func checkPatternKeys(v any, path string, mutate bool, errs *FieldErrors) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			p := joinPath(path, k)
			if msg := anchorProblem(k, mutate); msg != "" {
				errs.add(p, "%s", msg)
			}
			checkPatternKeys(e, p, mutate, errs)
		}
	case []any:
		for i, e := range t {
			checkPatternKeys(e, fmt.Sprintf("%s[%d]", path, i), mutate, errs)
		}
	}
}

// anchorProblem explains what is wrong with an anchored key, or "". The
// engine reads anchors with pattern.ParseAnchor; a key it does not read as
// an anchor but that starts or ends with a parenthesis, or leaves one
// unclosed, was meant as one and is refused.
func anchorProblem(k string, mutate bool) string {
	if strings.Contains(k, "{{") {
		return ""
	}
	kind, inner := pattern.ParseAnchor(k)
	switch {
	case kind == pattern.NoAnchor:
		open, closeN := strings.Count(k, "("), strings.Count(k, ")")
		if open+closeN > 0 && (open != closeN || strings.HasSuffix(k, ")") || strings.HasPrefix(k, "(")) {
			return fmt.Sprintf("invalid anchor %q", k)
		}
	case kind == pattern.AddIfAbsent && !mutate:
		return fmt.Sprintf("add-if-not-present anchor %q is only allowed in mutate rules", k)
	case strings.TrimSpace(inner) == "":
		return fmt.Sprintf("anchor %q has an empty key", k)
	}
	return ""
}
