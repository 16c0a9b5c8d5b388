package engine

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/celeval"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// celRule is a rule's validate.cel and celPreconditions, compiled once
// with the policy.
type celRule struct {
	preconditions []*celeval.Program
	variables     []celeval.Variable
	validations   []celCheck
	// vpol is set for a ValidatingPolicy, whose results Kyverno words
	// differently from a validate.cel rule's (validateVPol).
	vpol bool
	// ignoreMatchErrors is a ValidatingPolicy's failurePolicy Ignore: a
	// match condition that ends in an error does not match.
	ignoreMatchErrors bool
	// mpol is set for a MutatingPolicy: mutations are its patches,
	// replaceAtomic its evaluation.useServerSideApply.
	mpol          bool
	mutations     []celPatch
	replaceAtomic bool
	// targets, for a mutate-existing MutatingPolicy, find what it
	// mutates.
	targets *celTargets
	// generations are a GeneratingPolicy's generate entries, audit a CEL
	// policy's audit annotations (auditAnnotations), policyNamespace a
	// NamespacedGeneratingPolicy's namespace (generateCEL).
	generations     []celGeneration
	audit           []namedProgram
	policyNamespace string
	// exceptions are the PolicyExceptions of policies.kyverno.io that
	// name the CEL policy (WithCELExceptions).
	exceptions []*celException
	// params, for a validate.cel rule with paramKind and paramRef, says
	// which resources it is evaluated with as params.
	params *celParams
	// ivpol is set for an ImageValidatingPolicy (ivpol.go).
	ivpol *ivpolRule
}

// celCheck is one validation expression with its message.
type celCheck struct {
	expr *celeval.Program
	// message is the static message (the rule's when the expression has
	// none); messageExpr builds one, falling back to message.
	message     string
	messageExpr *celeval.Program
}

// celCompile returns how a policy's expressions compile: each with
// celeval.Compile, an error appended to *errs naming the expression's
// path (validate.cel.expressions[1].expression: ...), so that every
// problem of a policy is reported at once.
func celCompile(errs *[]error) func(path, expr string, want celeval.Result) *celeval.Program {
	return func(path, expr string, want celeval.Result) *celeval.Program {
		p, err := celeval.Compile(expr, want)
		if err != nil {
			*errs = append(*errs, fmt.Errorf("%s: %w", path, err))
		}
		return p
	}
}

// compileCEL compiles the rule's CEL. Errors name the expression's path
// in the rule (validate.cel.expressions[1].expression: ...).
func compileCEL(r *policy.Rule) (*celRule, error) {
	v := r.Validation
	if v == nil || v.CEL == nil {
		return nil, nil
	}
	var errs []error
	compile := celCompile(&errs)
	cr := &celRule{}
	for i, c := range r.CELPreconditions {
		cr.preconditions = append(cr.preconditions, compile(fmt.Sprintf("celPreconditions[%d].expression", i), c.Expression, celeval.Bool))
	}
	for i, nv := range v.CEL.Variables {
		cr.variables = append(cr.variables, celeval.Variable{Name: nv.Name, Program: compile(fmt.Sprintf("validate.cel.variables[%d].expression", i), nv.Expression, celeval.Any)})
	}
	for i, e := range v.CEL.Expressions {
		c := celCheck{expr: compile(fmt.Sprintf("validate.cel.expressions[%d].expression", i), e.Expression, celeval.Bool), message: e.Message}
		if c.message == "" {
			c.message = v.Message
		}
		if e.MessageExpression != "" {
			c.messageExpr = compile(fmt.Sprintf("validate.cel.expressions[%d].messageExpression", i), e.MessageExpression, celeval.String)
		}
		cr.validations = append(cr.validations, c)
	}
	for i, a := range v.CEL.AuditAnnotations {
		// Checked, not evaluated: audit annotations go to the API
		// server's audit log, which an engine outside it does not write.
		compile(fmt.Sprintf("validate.cel.auditAnnotations[%d].valueExpression", i), a.ValueExpression, celeval.StringOrNull)
	}
	if v.CEL.ParamKind != nil || v.CEL.ParamRef != nil {
		cr.params = compileParams(v.CEL.ParamKind, v.CEL.ParamRef, &errs)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cr, nil
}

// validateCEL evaluates the rule's validate.cel as Kyverno does (through
// the API server's ValidatingAdmissionPolicy validator, failure policy
// Fail): celPreconditions that do not all hold skip the rule; the first
// expression that is not true fails it, with its message, or with the
// error an expression ended in.
func (run *ruleRun) validateCEL(rr RuleResponse) RuleResponse {
	cr := run.rule.cel
	if cr.params != nil {
		return run.validateCELParams(rr, cr)
	}
	ev := run.celInput().NewEvaluation(run.callCtx(), cr.variables, 0)
	if cr.ivpol != nil {
		return run.validateIVPol(rr, cr, ev)
	}
	if cr.vpol {
		return run.validateVPol(rr, cr, ev)
	}
	return run.checkCEL(rr, cr, ev)
}

// checkCEL evaluates a validate.cel rule's preconditions and expressions
// in one evaluation (validateCEL).
func (run *ruleRun) checkCEL(rr RuleResponse, cr *celRule, ev *celeval.Evaluation) RuleResponse {
	// As the API server's match conditions: one that is false skips
	// the rule, whatever errors others end in; an error otherwise fails
	// it (failure policy Fail).
	var precondErrs []string
	for _, p := range cr.preconditions {
		ok, err := ev.Bool(p)
		switch {
		case err != nil:
			precondErrs = append(precondErrs, err.Error())
		case !ok:
			rr.Status, rr.Message = StatusSkip, "cel preconditions not met"
			return rr
		}
	}
	if len(precondErrs) > 0 {
		rr.Status, rr.Message = StatusFail, strings.Join(precondErrs, "; ")
		return rr
	}
	for _, c := range cr.validations {
		ok, err := ev.Bool(c.expr)
		if err != nil {
			rr.Status, rr.Message = StatusFail, err.Error()
			return rr
		}
		if ok {
			continue
		}
		msg := ""
		if c.messageExpr != nil {
			msg = ev.Message(c.messageExpr)
		}
		if msg == "" {
			msg = strings.TrimSpace(c.message)
		}
		if msg == "" {
			msg = "failed expression: " + strings.TrimSpace(c.expr.Expression)
		}
		rr.Status, rr.Message = StatusFail, msg
		return rr
	}
	rr.Status, rr.Message = StatusPass, run.rule.pssPassMessage
	return rr
}

// celInput is what a rule's CEL sees: the object (null for a DELETE),
// the old object, the admission request's fields, and the namespace as
// the engine knows it (its name and labels), prepared once per resource
// for the CEL of every policy.
func (run *ruleRun) celInput() *celeval.Prepared {
	c := run.req.scratch()
	if id := identity(run.obj); c.celIn == nil || c.celObj != id {
		c.celIn, c.celObj = celeval.Prepare(run.buildCELInput()), id
	}
	return c.celIn
}

func (run *ruleRun) buildCELInput() celeval.Input {
	req := run.req
	in := celeval.Input{OldObject: req.OldObject, Context: celContext{e: run.e}}
	if req.Operation != OpDelete {
		in.Object = run.obj
	}
	obj := req.resource()
	apiVersion, _ := obj["apiVersion"].(string)
	kind, _ := obj["kind"].(string)
	group, version, found := strings.Cut(apiVersion, "/")
	if !found {
		group, version = "", apiVersion
	}
	ns := req.Namespace
	meta, _ := obj["metadata"].(map[string]any)
	if ns == "" && meta != nil {
		ns, _ = meta["namespace"].(string)
	}
	name := req.Name
	if name == "" && meta != nil {
		name, _ = meta["name"].(string)
	}
	op := req.Operation
	if op == "" {
		op = OpCreate // a background scan: the resource as if created
	}
	user := map[string]any{"username": req.UserInfo.Username, "uid": req.UserInfo.UID}
	if len(req.UserInfo.Groups) > 0 {
		groups := make([]any, len(req.UserInfo.Groups))
		for i, g := range req.UserInfo.Groups {
			groups[i] = g
		}
		user["groups"] = groups
	}
	kindMap := map[string]any{"group": group, "version": version, "kind": kind}
	in.Request = map[string]any{
		"operation":   op,
		"name":        name,
		"namespace":   ns,
		"kind":        kindMap,
		"requestKind": kindMap,
		"subResource": req.SubResource,
		"userInfo":    user,
		"dryRun":      req.DryRun,
	}
	if ns != "" && (kind != "Namespace" || group != "") && req.NamespaceObject != nil {
		in.Namespace = req.NamespaceObject
	} else if ns != "" && (kind != "Namespace" || group != "") {
		nsMeta := map[string]any{"name": ns}
		if len(req.NamespaceLabels) > 0 {
			labels := make(map[string]any, len(req.NamespaceLabels))
			for k, v := range req.NamespaceLabels {
				labels[k] = v
			}
			nsMeta["labels"] = labels
		}
		in.Namespace = map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": nsMeta}
	}
	return in
}

// validateVPol evaluates a ValidatingPolicy as Kyverno's engine does: a
// match condition that is false skips the policy; one that ends in an
// error is an error (failurePolicy Fail) or skips it (Ignore); the first
// validation that is not true fails it, with its messageExpression, its
// message or "CEL expression validation failed at index N"; one that ends
// in an error is an error, with CEL's words.
func (run *ruleRun) validateVPol(rr RuleResponse, cr *celRule, ev *celeval.Evaluation) RuleResponse {
	if len(cr.exceptions) > 0 && run.applyCELExceptions(&rr, cr, ev) {
		return rr
	}
	if skip, failed := run.celMatchConditions(&rr, cr, ev); skip || failed {
		return rr
	}
	return run.celValidations(rr, cr, ev)
}

// celValidations evaluates a ValidatingPolicy's validations (also an
// ImageValidatingPolicy's) as validateVPol says.
func (run *ruleRun) celValidations(rr RuleResponse, cr *celRule, ev *celeval.Evaluation) RuleResponse {
	for i, c := range cr.validations {
		ok, err := ev.Bool(c.expr)
		if err != nil {
			rr.Status, rr.Message = StatusError, "error: "+celeval.Cause(err).Error()
			return rr
		}
		if ok {
			continue
		}
		msg := c.message
		if c.messageExpr != nil {
			if v, err := ev.Eval(c.messageExpr); err != nil {
				msg = "failed to evaluate message expression: " + celeval.Cause(err).Error()
			} else if s, isString := v.Value().(string); isString {
				msg = s
			} else {
				msg = fmt.Sprintf("failed to convert message expression to string: %s is not a string", v.Type().TypeName())
			}
		}
		if msg == "" {
			msg = fmt.Sprintf("CEL expression validation failed at index %d", i)
		}
		rr.Status, rr.Message = StatusFail, msg
		if run.auditAnnotations(&rr, cr, ev) && cr.ivpol == nil {
			// A ValidatingPolicy's failure names the validation that
			// failed, as Kyverno's reports do (an audit annotation of
			// that key wins).
			if _, set := rr.Properties[PropertyValidationIndex]; !set {
				if rr.Properties == nil {
					rr.Properties = map[string]string{}
				}
				rr.Properties[PropertyValidationIndex] = strconv.Itoa(i)
			}
		}
		return rr
	}
	rr.Status, rr.Message = StatusPass, "success"
	run.auditAnnotations(&rr, cr, ev)
	return rr
}

// PropertyValidationIndex is the result property that names, by its
// index, the validation a ValidatingPolicy failed.
const PropertyValidationIndex = "cel.validationIndex"

// auditAnnotations evaluates a CEL policy's audit annotations once its
// outcome is known, as Kyverno reports them: each value that is a
// non-empty string becomes a property of the rule's result (null and ""
// are left out); one that fails to evaluate makes the result an error.
// It reports whether they all evaluated.
func (run *ruleRun) auditAnnotations(rr *RuleResponse, cr *celRule, ev *celeval.Evaluation) bool {
	for _, a := range cr.audit {
		v, err := ev.Eval(a.prog)
		if err != nil {
			rr.Status, rr.Message, rr.Properties = StatusError, fmt.Sprintf("failed to evaluate auditAnnotation %q: %v", a.name, celeval.Cause(err)), nil
			return false
		}
		if s, isString := v.Value().(string); isString && s != "" {
			if rr.Properties == nil {
				rr.Properties = make(map[string]string, len(cr.audit))
			}
			rr.Properties[a.name] = s
		}
	}
	return true
}
