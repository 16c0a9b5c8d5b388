package engine

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/verdict-dev/verdict/pkg/engine/celeval"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// A ValidatingPolicy compiles into an engine Policy whose rules are the
// policy itself and its autogen variants (one for the Pod controllers
// whose pod template is at spec.template, one for CronJobs), each a rule
// without a name, as Kyverno reports them. Each rule carries its CEL
// (a celRule with the ValidatingPolicy's semantics) and the
// matchConstraints it applies to.

// celMatch is a compiled matchConstraints.
type celMatch struct {
	rules, exclude []policy.ResourceRule
	namespaceSel   *policy.LabelSelector
	objectSel      *policy.LabelSelector
	// json is set for a policy in JSON evaluation mode: it selects every
	// JSON payload and no Kubernetes object.
	json bool
}

// compileVPol compiles a ValidatingPolicy.
func (e *Engine) compileVPol(p *policy.Policy) (*Policy, error) {
	cp := &Policy{Raw: p, Scored: true}
	if ann := p.Metadata.Annotations; ann != nil {
		cp.Scored = ann[AnnotationScored] != "false"
		cp.Category = ann[AnnotationCategory]
		cp.Severity = ann[AnnotationSeverity]
	}
	main, err := newVPolRule(p.VPol)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Key(), err)
	}
	cp.Rules = append(cp.Rules, main)
	if p.VPol.JSONMode() {
		return cp, nil // payloads have no pod templates
	}
	variants, err := vpolAutogen(p.VPol)
	if err != nil {
		return nil, fmt.Errorf("%s %s: autogen: %w", p.Kind, p.Key(), err)
	}
	for _, spec := range variants {
		r, err := newVPolRule(spec)
		if err != nil {
			return nil, fmt.Errorf("%s %s: autogen: %w", p.Kind, p.Key(), err)
		}
		r.Autogen = true
		cp.Rules = append(cp.Rules, r)
	}
	return cp, nil
}

// newVPolRule compiles one ValidatingPolicy spec into a rule.
func newVPolRule(s *policy.ValidatingPolicySpec) (*Rule, error) {
	r := &Rule{
		Rule:        policy.Rule{Validation: &policy.Validation{CEL: &policy.CEL{}}},
		passMessage: "success",
	}
	r.pssPassMessage = r.passMessage
	cr := &celRule{vpol: true, ignoreMatchErrors: s.FailurePolicy == "Ignore"}
	var errs []error
	compile := celCompile(&errs)
	for i, c := range s.MatchConditions {
		cr.preconditions = append(cr.preconditions, compile(fmt.Sprintf("spec.matchConditions[%d].expression", i), c.Expression, celeval.Bool))
	}
	for i, v := range s.Variables {
		cr.variables = append(cr.variables, celeval.Variable{Name: v.Name, Program: compile(fmt.Sprintf("spec.variables[%d].expression", i), v.Expression, celeval.Any)})
	}
	for i, v := range s.Validations {
		c := celCheck{expr: compile(fmt.Sprintf("spec.validations[%d].expression", i), v.Expression, celeval.Bool), message: v.Message}
		if v.MessageExpression != "" {
			c.messageExpr = compile(fmt.Sprintf("spec.validations[%d].messageExpression", i), v.MessageExpression, celeval.String)
		}
		cr.validations = append(cr.validations, c)
	}
	for i, a := range s.AuditAnnotations {
		cr.audit = append(cr.audit, namedProgram{name: a.Key, prog: compile(fmt.Sprintf("spec.auditAnnotations[%d].valueExpression", i), a.ValueExpression, celeval.StringOrNull)})
	}
	if s.ParamKind != nil || s.ParamRef != nil {
		errs = append(errs, errors.New("spec.paramKind: params are not supported yet"))
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r.cel = cr
	if s.JSONMode() {
		r.celMatch = &celMatch{json: true}
		return r, nil
	}
	mc := s.MatchConstraints
	r.celMatch = &celMatch{rules: mc.ResourceRules, exclude: mc.ExcludeResourceRules, namespaceSel: mc.NamespaceSelector, objectSel: mc.ObjectSelector}
	return r, nil
}

// matches applies matchConstraints as the API server does to an
// admission request: a resource rule selects the operation, group,
// version and resource (the plural, guessed from the kind where the
// request does not say it); no exclude rule may select it; the
// namespace's labels (the Namespace's own for a Namespace) match the
// namespace selector, the object's labels the object selector. A
// background evaluation (no operation) is a CREATE. The selectors'
// wildcards are charged to mt (see meter.match).
func (m *celMatch) matches(in *matchInput, req *Request, mt *meter) (bool, error) {
	if m.json || req.JSON {
		return m.json && req.JSON, nil
	}
	op := in.operation
	if op == "" {
		op = OpCreate
	}
	resource := req.Resource
	if resource == "" {
		resource = guessResource(in.gvk)
	}
	if in.subresource != "" {
		resource += "/" + in.subresource
	}
	selected := func(rules []policy.ResourceRule) bool {
		for i := range rules {
			if resourceRuleMatches(&rules[i], op, in, resource) {
				return true
			}
		}
		return false
	}
	if !selected(m.rules) || selected(m.exclude) {
		return false, nil
	}
	if m.objectSel != nil {
		if ok, err := matchSelector(m.objectSel, in.labels, mt); !ok || err != nil {
			return false, err
		}
	}
	if m.namespaceSel != nil {
		labels := in.nsLabels
		if in.gvk.group == "" && in.gvk.kind == "Namespace" {
			labels = in.labels
		} else if in.namespace == "" {
			return true, nil // cluster-scoped: the namespace selector does not apply
		}
		return matchSelector(m.namespaceSel, labels, mt)
	}
	return true, nil
}

// selectsKind says whether a resource rule selects the kind's resource
// (its plural guessed from the kind: a background scan names kinds), by
// name or only through "*".
func (m *celMatch) selectsKind(group, version, kind string) KindMatch {
	resource := guessResource(gvk{group: group, version: version, kind: kind})
	best := KindNotSelected
	for _, r := range m.rules {
		if !listHas(r.APIGroups, group) || !listHas(r.APIVersions, version) {
			continue
		}
		for _, want := range r.Resources {
			switch want {
			case resource:
				return KindNamed
			case "*", "*/*":
				best = KindByWildcard
			}
		}
	}
	return best
}

func resourceRuleMatches(r *policy.ResourceRule, op string, in *matchInput, resource string) bool {
	if !listHas(r.Operations, op) || !listHas(r.APIGroups, in.gvk.group) || !listHas(r.APIVersions, in.gvk.version) {
		return false
	}
	if len(r.ResourceNames) > 0 && !slices.Contains(r.ResourceNames, in.name) {
		return false
	}
	main, sub, _ := strings.Cut(resource, "/")
	ok := false
	for _, want := range r.Resources {
		wm, ws, hasSub := strings.Cut(want, "/")
		switch {
		case want == "*/*":
			ok = true
		case !hasSub && sub == "" && (wm == "*" || wm == main):
			ok = true
		case hasSub && sub != "" && (wm == "*" || wm == main) && (ws == "*" || ws == sub):
			ok = true
		}
	}
	if !ok {
		return false
	}
	switch r.Scope {
	case "Cluster":
		return in.namespace == ""
	case "Namespaced":
		return in.namespace != ""
	}
	return true
}

func listHas(list []string, v string) bool {
	return slices.Contains(list, "*") || slices.Contains(list, v)
}

// guessResource is the plural resource of a kind, as the API server names
// the built-in ones (Pod → pods, Ingress → ingresses, NetworkPolicy →
// networkpolicies).
func guessResource(g gvk) string {
	plural, _ := meta.UnsafeGuessKindToResource(schema.GroupVersionKind{Group: g.group, Version: g.version, Kind: g.kind})
	return plural.Resource
}

// The Pod controllers autogen covers, as Kyverno's CEL autogen names
// them, with where their pod template is.
var vpolControllers = []struct {
	config                   string // autogen.podControllers.controllers names it so
	group, version, resource string
	cronJob                  bool
}{
	{"daemonsets", "apps", "v1", "daemonsets", false},
	{"deployments", "apps", "v1", "deployments", false},
	{"replicasets", "apps", "v1", "replicasets", false},
	{"statefulsets", "apps", "v1", "statefulsets", false},
	{"jobs", "batch", "v1", "jobs", false},
	{"cronjobs", "batch", "v1", "cronjobs", true},
}

// autogenVariant is where one autogen variant of a CEL policy on Pods
// applies: the Pod controllers whose pod template is at spec.template,
// or CronJobs (cronJob).
type autogenVariant struct {
	cronJob bool
	match   *policy.MatchConstraints
}

// podAutogen returns where the autogen variants of a CEL policy with
// these matchConstraints apply, as Kyverno's autogen decides: only when
// they select exactly core v1 pods (one resource rule, no names, no
// object selector, no excludes), one variant for the controllers with
// their template at spec.template and one for CronJobs, each limited to
// the controllers autogen.podControllers lists (all when absent), with
// the Pod rule's operations and namespace selector.
func podAutogen(mc *policy.MatchConstraints, ac *policy.AutogenConfiguration) []autogenVariant {
	if mc == nil || len(mc.ResourceRules) != 1 || len(mc.ExcludeResourceRules) != 0 {
		return nil
	}
	if sel := mc.ObjectSelector; sel != nil && (len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0) {
		return nil
	}
	rr := mc.ResourceRules[0]
	if len(rr.ResourceNames) > 0 || !slices.Equal(rr.APIGroups, []string{""}) || !slices.Equal(rr.APIVersions, []string{"v1"}) || !slices.Equal(rr.Resources, []string{"pods"}) {
		return nil
	}
	wanted := func(config string) bool { return true }
	if ac != nil && ac.PodControllers != nil && ac.PodControllers.Controllers != nil {
		list := *ac.PodControllers.Controllers
		wanted = func(config string) bool { return slices.Contains(list, config) }
	}
	var out []autogenVariant
	for _, cronJob := range []bool{false, true} {
		byGV := map[[2]string][]string{}
		var gvs [][2]string
		for _, c := range vpolControllers {
			if c.cronJob != cronJob || !wanted(c.config) {
				continue
			}
			gv := [2]string{c.group, c.version}
			if _, ok := byGV[gv]; !ok {
				gvs = append(gvs, gv)
			}
			byGV[gv] = append(byGV[gv], c.resource)
		}
		if len(gvs) == 0 || len(rr.Operations) == 0 {
			continue
		}
		slices.SortFunc(gvs, func(a, b [2]string) int { return strings.Compare(a[0]+"/"+a[1], b[0]+"/"+b[1]) })
		m := &policy.MatchConstraints{NamespaceSelector: mc.NamespaceSelector}
		for _, gv := range gvs {
			res := byGV[gv]
			slices.Sort(res)
			m.ResourceRules = append(m.ResourceRules, policy.ResourceRule{
				Operations: rr.Operations, APIGroups: []string{gv[0]}, APIVersions: []string{gv[1]}, Resources: res,
			})
		}
		out = append(out, autogenVariant{cronJob: cronJob, match: m})
	}
	return out
}

// vpolAutogen returns the autogen variants of a ValidatingPolicy on Pods
// (podAutogen), with object.spec, object.metadata (but not
// object.metadata.namespace) and their oldObject forms rewritten to the
// pod template's.
func vpolAutogen(s *policy.ValidatingPolicySpec) ([]*policy.ValidatingPolicySpec, error) {
	var out []*policy.ValidatingPolicySpec
	for _, av := range podAutogen(s.MatchConstraints, s.Autogen) {
		b, err := json.Marshal(s)
		if err != nil {
			return nil, err
		}
		var v policy.ValidatingPolicySpec
		if err := json.Unmarshal(rewritePodTemplate(b, av.cronJob), &v); err != nil {
			return nil, err
		}
		v.MatchConstraints = av.match
		out = append(out, &v)
	}
	return out, nil
}

// rewritePodTemplate rewrites the object paths of a Pod policy's text to
// the pod template of a controller (a CronJob's when cronJob), leaving
// object.metadata.namespace alone: a template has no namespace.
func rewritePodTemplate(b []byte, cronJob bool) []byte {
	spec, meta := "spec.template.spec", "spec.template.metadata"
	if cronJob {
		spec, meta = "spec.jobTemplate.spec.template.spec", "spec.jobTemplate.spec.template.metadata"
	}
	for _, from := range []string{"object.", "oldObject."} {
		b = replaceProtected(b, from+"spec", from+spec)
		b = replaceProtected(b, from+"metadata", from+meta)
	}
	return b
}

// replaceProtected replaces every from with to, except where .namespace
// (as a whole identifier) follows.
func replaceProtected(data []byte, from, to string) []byte {
	f := []byte(from)
	var out bytes.Buffer
	for {
		i := bytes.Index(data, f)
		if i < 0 {
			out.Write(data)
			return out.Bytes()
		}
		out.Write(data[:i])
		rest := data[i+len(f):]
		if protectedNamespace(rest) {
			out.Write(f)
		} else {
			out.WriteString(to)
		}
		data = rest
	}
}

func protectedNamespace(rest []byte) bool {
	const suffix = ".namespace"
	if !bytes.HasPrefix(rest, []byte(suffix)) {
		return false
	}
	next := rest[len(suffix):]
	return len(next) == 0 || !isIdentByte(next[0])
}

func isIdentByte(b byte) bool {
	return b == '_' || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') || (b >= '0' && b <= '9')
}
