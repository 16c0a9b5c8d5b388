package engine

import (
	"errors"
	"fmt"
	"io"
	"strings"

	yaml "go.yaml.in/yaml/v3"

	"github.com/verdict-dev/verdict/pkg/engine/celeval"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// A GeneratingPolicy compiles into an engine Policy with one generate
// rule named after the policy, as Kyverno reports it, carrying its CEL
// (a celRule with generate entries) and its matchConstraints; there is
// no autogen. Its generate entries record the resources they generate
// (generator.Apply's, a template's) in RuleResponse.Generated, each in
// the namespace the call names: the engine creates nothing.

// celGeneration is one compiled generate entry: an expression, or a
// template.
type celGeneration struct {
	expr     *celeval.Program
	template *genTemplate
}

// compileGPol compiles a GeneratingPolicy.
func (e *Engine) compileGPol(p *policy.Policy) (*Policy, error) {
	cp := &Policy{Raw: p, Scored: true}
	if ann := p.Metadata.Annotations; ann != nil {
		cp.Scored = ann[AnnotationScored] != "false"
		cp.Category = ann[AnnotationCategory]
		cp.Severity = ann[AnnotationSeverity]
	}
	r, err := newGPolRule(p)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Key(), err)
	}
	cp.Rules = append(cp.Rules, r)
	return cp, nil
}

// newGPolRule compiles a GeneratingPolicy into its rule. Its expressions
// compile with the generator library of its kind (generator.Apply with a
// namespace, or without for a namespaced policy).
func newGPolRule(p *policy.Policy) (*Rule, error) {
	s := p.GPol
	r := &Rule{Rule: policy.Rule{Name: p.Metadata.Name, Generation: p.GenerationOf()}}
	cr := &celRule{}
	namespaced := p.Namespaced()
	if namespaced {
		cr.policyNamespace = p.Metadata.Namespace
	}
	var errs []error
	compile := func(path, expr string, want celeval.Result) *celeval.Program {
		prog, err := celeval.CompileGenerating(expr, want, namespaced)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
		}
		return prog
	}
	for i, c := range s.MatchConditions {
		cr.preconditions = append(cr.preconditions, compile(fmt.Sprintf("spec.matchConditions[%d].expression", i), c.Expression, celeval.Bool))
	}
	for i, v := range s.Variables {
		cr.variables = append(cr.variables, celeval.Variable{Name: v.Name, Program: compile(fmt.Sprintf("spec.variables[%d].expression", i), v.Expression, celeval.Any)})
	}
	for i, gen := range s.Generation {
		if gen.Template != nil {
			path := fmt.Sprintf("spec.generate[%d].template.value", i)
			t, err := compileTemplate(gen.Template, func(line int, expr string) *celeval.Program {
				return compile(fmt.Sprintf("%s: line %d: placeholder %q", path, line, expr), expr, celeval.Any)
			})
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", path, err))
			}
			cr.generations = append(cr.generations, celGeneration{template: t})
			continue
		}
		cr.generations = append(cr.generations, celGeneration{expr: compile(fmt.Sprintf("spec.generate[%d].expression", i), gen.Expression, celeval.Any)})
	}
	for i, a := range s.AuditAnnotations {
		cr.audit = append(cr.audit, namedProgram{name: a.Key, prog: compile(fmt.Sprintf("spec.auditAnnotations[%d].valueExpression", i), a.ValueExpression, celeval.StringOrNull)})
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	r.cel = cr
	mc := s.MatchConstraints
	r.celMatch = &celMatch{rules: mc.ResourceRules, exclude: mc.ExcludeResourceRules, namespaceSel: mc.NamespaceSelector, objectSel: mc.ObjectSelector}
	return r, nil
}

// namedProgram is an audit annotation's value expression.
type namedProgram struct {
	name string
	prog *celeval.Program
}

// gpolApplies evaluates a GeneratingPolicy rule's exceptions and match
// conditions, as Kyverno does before generating: false when they decide
// the result (an exemption, a condition that does not hold: no result,
// or an error), which rr then holds.
func (run *ruleRun) gpolApplies(rr *RuleResponse, ev *celeval.Evaluation) bool {
	cr := run.rule.cel
	if len(cr.exceptions) > 0 && run.applyCELExceptions(rr, cr, ev) {
		return false
	}
	var condErrs []string
	for _, p := range cr.preconditions {
		ok, err := ev.Bool(p)
		switch {
		case err != nil:
			condErrs = append(condErrs, celeval.Cause(err).Error())
		case !ok:
			rr.Status = statusNone
			return false
		}
	}
	if len(condErrs) > 0 {
		rr.Status, rr.Message = StatusError, "failed to evaluate policy: "+strings.Join(condErrs, "; ")
		return false
	}
	return true
}

// gpolTriggers says whether a GeneratingPolicy rule is triggered by the
// request (GenerateTriggers): its exceptions and match conditions, not
// its generation, which reads the cluster and runs in the generator.
func (run *ruleRun) gpolTriggers(rr *RuleResponse) bool {
	in := run.buildCELInput()
	ev := celeval.Prepare(in).NewEvaluation(run.callCtx(), run.rule.cel.variables, 0)
	return run.gpolApplies(rr, ev)
}

// generateCEL evaluates a GeneratingPolicy as Kyverno's engine does: its
// exceptions first; then its match conditions, one that is false giving
// no result at all (Kyverno reports none), errors an error; then its
// generate entries in order, whatever their values, and its audit
// annotations. Any error ends the rule with it, and nothing generated;
// otherwise the rule passes with what the entries generated (possibly
// nothing).
func (run *ruleRun) generateCEL(rr RuleResponse) RuleResponse {
	cr := run.rule.cel
	rec := &generated{celContext: celContext{e: run.e}, policyNamespace: cr.policyNamespace}
	in := run.buildCELInput()
	in.Context = rec
	ev := celeval.Prepare(in).NewEvaluation(run.callCtx(), cr.variables, 0)
	if !run.gpolApplies(&rr, ev) {
		return rr
	}
	fail := func(err error) RuleResponse {
		rr.Status, rr.Message = StatusError, "failed to evaluate policy: "+celeval.Cause(err).Error()
		return rr
	}
	for _, g := range cr.generations {
		if g.template != nil {
			if err := g.template.generate(ev, rec); err != nil {
				return fail(err)
			}
			continue
		}
		if _, err := ev.Eval(g.expr); err != nil {
			return fail(err)
		}
	}
	rr.Status, rr.Message, rr.Generated = StatusPass, "policy evaluated successfully", rec.objects
	if !run.auditAnnotations(&rr, cr, ev) {
		rr.Message, rr.Generated = "failed to evaluate policy: "+rr.Message, nil
	}
	return rr
}

// generated records what a GeneratingPolicy's generate entries generate,
// and serves the other Kyverno functions as the engine does.
type generated struct {
	celContext
	// policyNamespace is a namespaced policy's namespace.
	policyNamespace string
	objects         []map[string]any
}

var _ celeval.Generator = (*generated)(nil)

// Generate records objects (the items of the List objects among them)
// in namespace (the policy's for own), as Kyverno would write them: with
// the namespace set (removed for ""), without the fields the API server
// owns, and without owner references copied from another namespace.
func (g *generated) Generate(namespace string, own bool, objects []map[string]any) error {
	if own {
		namespace = g.policyNamespace
	}
	for _, o := range objects {
		items, isList := o["items"].([]any)
		if !isList {
			g.objects = append(g.objects, downstream(o, namespace))
			continue
		}
		for i, it := range items {
			m, ok := it.(map[string]any)
			if !ok {
				return fmt.Errorf("item %d of the list is not an object", i)
			}
			g.objects = append(g.objects, downstream(m, namespace))
		}
	}
	return nil
}

// downstream is a copy of src to be generated in namespace.
func downstream(src map[string]any, namespace string) map[string]any {
	obj := document.DeepCopyMap(src)
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
		obj["metadata"] = meta
	}
	if from, _ := meta["namespace"].(string); from != "" && from != namespace {
		delete(meta, "ownerReferences")
	}
	for _, f := range []string{"uid", "selfLink", "creationTimestamp", "managedFields", "resourceVersion"} {
		delete(meta, f)
	}
	if namespace != "" {
		meta["namespace"] = namespace
	} else {
		delete(meta, "namespace")
	}
	return obj
}

// A generation template is YAML, one document per resource. With
// interpolate cel, a (( expression )) placeholder that is a whole scalar
// takes the expression's value (any JSON value); placeholders within a
// longer string are replaced by the text of their values, which must be
// scalars; \(( writes "((". Mapping keys cannot hold placeholders.

// genTemplate is a compiled template: its documents.
type genTemplate struct {
	docs []tmplNode
}

// tmplNode renders one value of a document.
type tmplNode interface {
	render(ev *celeval.Evaluation) (any, error)
}

type (
	tmplLiteral struct{ value any }
	tmplMapping struct {
		keys   []string
		values []tmplNode
	}
	tmplSequence struct{ items []tmplNode }
	// tmplSplice is a scalar that is one placeholder.
	tmplSplice struct{ prog *celeval.Program }
	// tmplText is a scalar of text and placeholders.
	tmplText struct{ parts []tmplPart }
	tmplPart struct {
		text string
		prog *celeval.Program // nil for text
	}
)

func (n tmplLiteral) render(*celeval.Evaluation) (any, error) { return document.DeepCopy(n.value), nil }

func (n tmplMapping) render(ev *celeval.Evaluation) (any, error) {
	out := make(map[string]any, len(n.keys))
	for i, k := range n.keys {
		v, err := n.values[i].render(ev)
		if err != nil {
			return nil, fmt.Errorf("field %q: %w", k, err)
		}
		out[k] = v
	}
	return out, nil
}

func (n tmplSequence) render(ev *celeval.Evaluation) (any, error) {
	out := make([]any, len(n.items))
	for i, it := range n.items {
		v, err := it.render(ev)
		if err != nil {
			return nil, fmt.Errorf("item %d: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

func (n tmplSplice) render(ev *celeval.Evaluation) (any, error) {
	v, err := ev.JSON(n.prog)
	if err != nil {
		return nil, fmt.Errorf("failed to evaluate placeholder %q: %w", n.prog.Expression, celeval.Cause(err))
	}
	return v, nil
}

func (n tmplText) render(ev *celeval.Evaluation) (any, error) {
	var b strings.Builder
	for _, p := range n.parts {
		if p.prog == nil {
			b.WriteString(p.text)
			continue
		}
		s, scalar, typeName, err := ev.Text(p.prog)
		if err != nil {
			return nil, fmt.Errorf("failed to evaluate placeholder %q: %w", p.prog.Expression, celeval.Cause(err))
		}
		if !scalar {
			return nil, fmt.Errorf("placeholder %q embedded in a string must evaluate to a scalar, got %s; use a whole-value placeholder for structured results", p.prog.Expression, typeName)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// generate renders the template's documents and records them, as
// Kyverno does: each in its metadata.namespace, grouped by namespace in
// the order they first appear. A namespaced policy's resources without
// a namespace are in the policy's, and another namespace is an error.
func (t *genTemplate) generate(ev *celeval.Evaluation, rec *generated) error {
	var order []string
	byNS := map[string][]map[string]any{}
	for i, d := range t.docs {
		v, err := d.render(ev)
		if err != nil {
			return fmt.Errorf("failed to render generation template: document %d: %w", i+1, err)
		}
		obj, ok := v.(map[string]any)
		if !ok {
			return fmt.Errorf("failed to render generation template: document %d: expected a mapping describing a resource", i+1)
		}
		ns := document.String(obj, "metadata", "namespace")
		if own := rec.policyNamespace; own != "" {
			if ns == "" {
				ns = own
			} else if ns != own {
				return fmt.Errorf("cross-namespace generation denied: a policy in namespace %q cannot generate resources into namespace %q", own, ns)
			}
		}
		if _, seen := byNS[ns]; !seen {
			order = append(order, ns)
		}
		byNS[ns] = append(byNS[ns], obj)
	}
	for _, ns := range order {
		if err := rec.Generate(ns, false, byNS[ns]); err != nil {
			return fmt.Errorf("failed to generate resources: %w", err)
		}
	}
	return nil
}

// compileTemplate parses a template; compile compiles a placeholder's
// expression found at line (reporting its own errors). Without cel
// interpolation the documents are plain YAML.
func compileTemplate(tpl *policy.GenerationTemplate, compile func(line int, expr string) *celeval.Program) (*genTemplate, error) {
	t := &genTemplate{}
	if tpl.Interpolate != policy.InterpolateCEL {
		docs, err := document.DecodeAll([]byte(tpl.Value))
		if err != nil {
			return nil, err
		}
		for _, d := range docs {
			t.docs = append(t.docs, tmplLiteral{value: d.Object})
		}
	} else {
		dec := yaml.NewDecoder(strings.NewReader(tpl.Value))
		for {
			var doc yaml.Node
			if err := dec.Decode(&doc); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("failed to parse YAML: %w", err)
			}
			root := &doc
			if root.Kind == yaml.DocumentNode {
				if len(root.Content) == 0 {
					continue
				}
				root = root.Content[0]
			}
			if root.Kind == yaml.ScalarNode && root.ShortTag() == "!!null" {
				continue
			}
			n, err := compileTmplNode(root, compile)
			if err != nil {
				return nil, err
			}
			if !tmplMappingRoot(n) {
				return nil, fmt.Errorf("line %d: a document must be a mapping describing a resource", root.Line)
			}
			t.docs = append(t.docs, n)
		}
	}
	if len(t.docs) == 0 {
		return nil, errors.New("a template needs at least one YAML document")
	}
	return t, nil
}

// tmplMappingRoot reports whether a document can render into an object
// (a whole-document placeholder is checked when rendered).
func tmplMappingRoot(n tmplNode) bool {
	switch n := n.(type) {
	case tmplMapping, tmplSplice:
		return true
	case tmplLiteral:
		_, ok := n.value.(map[string]any)
		return ok
	}
	return false
}

func compileTmplNode(n *yaml.Node, compile func(line int, expr string) *celeval.Program) (tmplNode, error) {
	if n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if !hasPlaceholders(n) {
		b, err := yaml.Marshal(n)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		v, err := document.Decode(b)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		return tmplLiteral{value: v}, nil
	}
	switch n.Kind {
	case yaml.MappingNode:
		var m tmplMapping
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			switch {
			case k.Kind != yaml.ScalarNode:
				return nil, fmt.Errorf("line %d: only scalar mapping keys are supported", k.Line)
			case placeholderAt(k.Value) >= 0:
				return nil, fmt.Errorf("line %d: placeholders are not supported in mapping keys; use a whole-value placeholder on the parent field instead", k.Line)
			case k.Value == "<<":
				return nil, fmt.Errorf("line %d: YAML merge keys are not supported where placeholders are", k.Line)
			}
			vn, err := compileTmplNode(v, compile)
			if err != nil {
				return nil, err
			}
			m.keys, m.values = append(m.keys, k.Value), append(m.values, vn)
		}
		return m, nil
	case yaml.SequenceNode:
		var s tmplSequence
		for _, it := range n.Content {
			in, err := compileTmplNode(it, compile)
			if err != nil {
				return nil, err
			}
			s.items = append(s.items, in)
		}
		return s, nil
	case yaml.ScalarNode:
		parts, err := scanPlaceholders(n.Value)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		exprs := 0
		for i := range parts {
			if parts[i].expr != "" {
				exprs++
			}
		}
		switch {
		case exprs == 0: // escapes only
			var b strings.Builder
			for _, p := range parts {
				b.WriteString(p.text)
			}
			return tmplLiteral{value: b.String()}, nil
		case len(parts) == 1:
			return tmplSplice{prog: compile(n.Line, parts[0].expr)}, nil
		}
		var t tmplText
		for _, p := range parts {
			tp := tmplPart{text: p.text}
			if p.expr != "" {
				tp.prog = compile(n.Line, p.expr)
			}
			t.parts = append(t.parts, tp)
		}
		return t, nil
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line)
}

// hasPlaceholders reports whether a scalar below n holds a placeholder
// or an escaped one.
func hasPlaceholders(n *yaml.Node) bool {
	if n == nil {
		return false
	}
	if n.Kind == yaml.AliasNode {
		return hasPlaceholders(n.Alias)
	}
	if n.Kind == yaml.ScalarNode && (placeholderAt(n.Value) >= 0 || strings.Contains(n.Value, `\((`)) {
		return true
	}
	for _, c := range n.Content {
		if hasPlaceholders(c) {
			return true
		}
	}
	return false
}

// placeholderAt is the index of the first unescaped "((" in s, or -1.
func placeholderAt(s string) int {
	for i := 0; i+1 < len(s); i++ {
		switch {
		case strings.HasPrefix(s[i:], `\((`):
			i += 2
		case s[i] == '(' && s[i+1] == '(':
			return i
		}
	}
	return -1
}

// scanPart is text, or a placeholder's expression.
type scanPart struct {
	text, expr string
}

// scanPlaceholders splits a scalar into text and placeholders. A
// placeholder ends at the first "))" outside parentheses it opened and
// outside CEL string literals.
func scanPlaceholders(s string) ([]scanPart, error) {
	var parts []scanPart
	var text strings.Builder
	flush := func() {
		if text.Len() > 0 {
			parts = append(parts, scanPart{text: text.String()})
			text.Reset()
		}
	}
	for i := 0; i < len(s); {
		if strings.HasPrefix(s[i:], `\((`) {
			text.WriteString("((")
			i += 3
			continue
		}
		if !strings.HasPrefix(s[i:], "((") {
			text.WriteByte(s[i])
			i++
			continue
		}
		expr, next, err := scanPlaceholder(s, i)
		if err != nil {
			return nil, err
		}
		flush()
		parts = append(parts, scanPart{expr: expr})
		i = next
	}
	flush()
	return parts, nil
}

// scanPlaceholder reads the placeholder opening at s[start:]: its
// trimmed expression and where the text after it starts.
func scanPlaceholder(s string, start int) (string, int, error) {
	depth := 0
	var quote byte
	for i := start + 2; i < len(s); i++ {
		c := s[i]
		if quote != 0 {
			switch c {
			case '\\':
				i++
			case quote:
				quote = 0
			}
			continue
		}
		switch c {
		case '"', '\'':
			quote = c
		case '(':
			depth++
		case ')':
			switch {
			case depth > 0:
				depth--
			case i+1 < len(s) && s[i+1] == ')':
				expr := strings.TrimSpace(s[start+2 : i])
				if expr == "" {
					return "", 0, fmt.Errorf("empty placeholder at offset %d", start)
				}
				return expr, i + 2, nil
			default:
				return "", 0, fmt.Errorf("unbalanced parenthesis in the placeholder at offset %d", start)
			}
		}
	}
	if quote != 0 {
		return "", 0, fmt.Errorf("unterminated string literal in the placeholder at offset %d", start)
	}
	return "", 0, fmt.Errorf("unterminated placeholder at offset %d: missing the closing '))'", start)
}
