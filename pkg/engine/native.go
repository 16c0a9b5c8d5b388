package engine

// Kubernetes' own admission policies, ValidatingAdmissionPolicy and
// MutatingAdmissionPolicy with their bindings. In a cluster the API
// server enforces them; Verdict evaluates them for `verdict apply` /
// `verdict test` and background scans, as Kyverno does.
//
// Their expressions are compiled and evaluated by the API server's own
// CEL admission library (k8s.io/apiserver/pkg/admission/plugin/cel: the
// composited compiler in the API server's base environment, its
// variables, cost budget and condition and mutation evaluators;
// plugin/webhook/matchconditions for matchConditions), and their rules
// matched by its rule matcher (plugin/webhook/predicates/rules). What
// ties them together follows the API server's dispatchers and validator
// step by step (matchConstraints, then each binding's matchResources and
// params, matchConditions, validations with their messages, mutations in
// order); it is written here because the API server's packages for it
// bring a Kubernetes client, which the CLI does not link. The patches a
// mutation gives are applied by pkg/engine/patch, as a MutatingPolicy's
// are (RFC 6902; structured merge with the built-in kinds' schema).
//
// A native policy compiles into an engine Policy with one rule named
// after the policy. The rule's outcome over the policy's bindings is the
// API server's decision: an evaluation error first, then a failed
// validation, else pass; skip when the matchConditions leave the
// resource out. A binding's validationActions decide Enforce (Deny among
// them). A policy without bindings applies to what its matchConstraints
// select and denies, as the Kyverno CLI evaluates it.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/cel-go/cel"
	celtypes "github.com/google/cel-go/common/types"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// Messages of a native policy's results, Kyverno's.
const (
	nativeMatchConditionsSkip = "match conditions aren't met"
	nativeMutationApplied     = "mutation is successfully applied"
	nativeMutationNotApplied  = "mutation is not applied"
)

// nativeRule is a compiled native policy.
type nativeRule struct {
	kind          string
	paramKind     *admissionregistrationv1.ParamKind
	failurePolicy admissionregistrationv1.FailurePolicyType
	// constraints is the policy's matchConstraints, with the selectors
	// the API server defaults; kinds its resource rules, for the kinds a
	// scan lists.
	constraints *admissionregistrationv1.MatchResources
	kinds       celMatch
	bindings    []nativeBinding
	// matchConditions is nil without any.
	matchConditions matchconditions.Matcher
	// A ValidatingAdmissionPolicy's validations, their compiled
	// expressions and messageExpressions.
	validations      []admissionregistrationv1.Validation
	validationFilter plugincel.ConditionEvaluator
	messageFilter    plugincel.ConditionEvaluator
	// A MutatingAdmissionPolicy's mutations.
	mutations []nativeMutation
}

// nativeMutation is one compiled mutation.
type nativeMutation struct {
	jsonPatch bool // JSONPatch; ApplyConfiguration otherwise
	eval      plugincel.MutatingEvaluator
}

// nativeBinding is one binding of a native policy.
type nativeBinding struct {
	name     string
	match    *admissionregistrationv1.MatchResources
	paramRef *admissionregistrationv1.ParamRef
	// deny is whether a failed validation denies (validationActions
	// holds Deny; always for a MutatingAdmissionPolicy's).
	deny bool
}

// nativeExpr is an expression as the API server's compiler reads it,
// with the types it must evaluate to; nativeVar a variable.
type nativeExpr struct {
	expr    string
	returns []*cel.Type
}

func (e *nativeExpr) GetExpression() string    { return e.expr }
func (e *nativeExpr) ReturnTypes() []*cel.Type { return e.returns }

type nativeVar struct {
	nativeExpr
	name string
}

func (v *nativeVar) GetName() string { return v.name }

// The types the API server's admission expressions must evaluate to.
var (
	nativeBool     = []*cel.Type{cel.BoolType}
	nativeString   = []*cel.Type{cel.StringType}
	nativeAudit    = []*cel.Type{cel.StringType, cel.NullType}
	nativeAny      = []*cel.Type{cel.AnyType, cel.DynType}
	nativePatch    = []*cel.Type{cel.ListType(celtypes.NewObjectType("JSONPatch"))}
	nativeApplyCfg = []*cel.Type{celtypes.NewObjectType("Object")}
)

// nativeEnv is the API server's CEL environment for admission policies.
func nativeEnv() *environment.EnvSet {
	return environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion())
}

// compileNative compiles a ValidatingAdmissionPolicy or a
// MutatingAdmissionPolicy. Expressions that do not compile are an error
// here, where the API server would deny every request the policy
// matches.
func (e *Engine) compileNative(p *policy.Policy) (*Policy, error) {
	np := p.Native
	nr := &nativeRule{kind: p.Kind}
	var errs []error
	if np.VAP != nil {
		spec := &np.VAP.Spec
		nr.paramKind, nr.constraints = spec.ParamKind, defaultedMatch(spec.MatchConstraints)
		nr.failurePolicy = failurePolicyOf(spec.FailurePolicy)
		errs = nr.compileVAP(np.VAP)
		for i := range np.VAPBindings {
			b := &np.VAPBindings[i]
			deny := len(b.Spec.ValidationActions) == 0 || slices.Contains(b.Spec.ValidationActions, admissionregistrationv1.Deny)
			nr.bindings = append(nr.bindings, nativeBinding{name: b.Name, match: defaultedMatch(b.Spec.MatchResources), paramRef: b.Spec.ParamRef, deny: deny})
		}
	} else {
		spec := &np.MAP.Spec
		nr.paramKind, nr.constraints = spec.ParamKind, defaultedMatch(spec.MatchConstraints)
		nr.failurePolicy = failurePolicyOf(spec.FailurePolicy)
		errs = nr.compileMAP(np.MAP)
		for i := range np.MAPBindings {
			b := &np.MAPBindings[i]
			nr.bindings = append(nr.bindings, nativeBinding{name: b.Name, match: defaultedMatch(b.Spec.MatchResources), paramRef: b.Spec.ParamRef, deny: true})
		}
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Key(), errors.Join(errs...))
	}
	for _, rr := range nr.constraints.ResourceRules {
		nr.kinds.rules = append(nr.kinds.rules, policy.ResourceRule{APIGroups: rr.APIGroups, APIVersions: rr.APIVersions, Resources: rr.Resources})
	}
	r := &Rule{Rule: policy.Rule{Name: p.Metadata.Name}, native: nr}
	if np.VAP != nil {
		r.Validation = &policy.Validation{CEL: &policy.CEL{}}
	} else {
		r.Mutation = &policy.Mutation{}
	}
	cp := &Policy{Raw: p, Scored: true, Rules: []*Rule{r}}
	if ann := p.Metadata.Annotations; ann != nil {
		cp.Scored = ann[AnnotationScored] != "false"
		cp.Category = ann[AnnotationCategory]
		cp.Severity = ann[AnnotationSeverity]
	}
	return cp, nil
}

// nativeCompiler is the API server's compiler with a policy's variables
// and matchConditions compiled, as its plugins compile a policy.
func (nr *nativeRule) nativeCompiler(name, purpose string, paramKind *admissionregistrationv1.ParamKind, vars []admissionregistrationv1.Variable,
	conds []admissionregistrationv1.MatchCondition, fp *admissionregistrationv1.FailurePolicyType,
) (*plugincel.CompositedCompiler, plugincel.OptionalVariableDeclarations, []error) {
	// The API server declares the authorizer; Verdict has none to give,
	// so an expression that calls it fails when evaluated.
	decl := plugincel.OptionalVariableDeclarations{HasParams: paramKind != nil, HasAuthorizer: true}
	compiler, err := plugincel.NewCompositedCompiler(nativeEnv())
	if err != nil {
		return nil, decl, []error{err}
	}
	var errs []error
	for i, v := range vars {
		res := compiler.CompileAndStoreVariable(&nativeVar{nativeExpr: nativeExpr{v.Expression, nativeAny}, name: v.Name}, decl, environment.StoredExpressions)
		if res.Error != nil {
			errs = append(errs, fmt.Errorf("spec.variables[%d] (%s): %s", i, v.Name, res.Error.Detail))
		}
	}
	if len(conds) > 0 {
		accessors := make([]plugincel.ExpressionAccessor, len(conds))
		for i := range conds {
			accessors[i] = (*matchconditions.MatchCondition)(&conds[i])
		}
		c := compiler.CompileCondition(accessors, decl, environment.StoredExpressions)
		errs = append(errs, prefixed("spec.matchConditions", c.CompilationErrors())...)
		nr.matchConditions = matchconditions.NewMatcher(c, fp, "policy", purpose, name)
	}
	return compiler, decl, errs
}

// compileVAP compiles a ValidatingAdmissionPolicy as the API server's
// ValidatingAdmissionPolicy plugin does.
func (nr *nativeRule) compileVAP(vap *admissionregistrationv1.ValidatingAdmissionPolicy) []error {
	spec := &vap.Spec
	compiler, decl, errs := nr.nativeCompiler(vap.Name, "validate", spec.ParamKind, spec.Variables, spec.MatchConditions, spec.FailurePolicy)
	if compiler == nil {
		return errs
	}
	msgDecl := plugincel.OptionalVariableDeclarations{HasParams: spec.ParamKind != nil}
	validations := make([]plugincel.ExpressionAccessor, len(spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(spec.Validations))
	for i, v := range spec.Validations {
		validations[i] = &nativeExpr{v.Expression, nativeBool}
		if v.MessageExpression != "" {
			messages[i] = &nativeExpr{v.MessageExpression, nativeString}
		}
	}
	annotations := make([]plugincel.ExpressionAccessor, len(spec.AuditAnnotations))
	for i, a := range spec.AuditAnnotations {
		annotations[i] = &nativeExpr{a.ValueExpression, nativeAudit}
	}
	nr.validations = spec.Validations
	nr.validationFilter = compiler.CompileCondition(validations, decl, environment.StoredExpressions)
	nr.messageFilter = compiler.CompileCondition(messages, msgDecl, environment.StoredExpressions)
	// Audit annotations only annotate the API server's audit events:
	// compiled for their errors, not evaluated.
	af := compiler.CompileCondition(annotations, decl, environment.StoredExpressions)
	errs = append(errs, prefixed("spec.validations", nr.validationFilter.CompilationErrors())...)
	errs = append(errs, prefixed("spec.validations messageExpression", nr.messageFilter.CompilationErrors())...)
	errs = append(errs, prefixed("spec.auditAnnotations", af.CompilationErrors())...)
	return errs
}

// compileMAP compiles a MutatingAdmissionPolicy as the API server's
// MutatingAdmissionPolicy plugin does.
func (nr *nativeRule) compileMAP(m *admissionregistrationv1.MutatingAdmissionPolicy) []error {
	spec := &m.Spec
	compiler, decl, errs := nr.nativeCompiler(m.Name, "validate", spec.ParamKind, spec.Variables, spec.MatchConditions, spec.FailurePolicy)
	if compiler == nil {
		return errs
	}
	patchDecl := decl
	patchDecl.HasPatchTypes = true
	for i, mu := range spec.Mutations {
		nm := nativeMutation{jsonPatch: mu.PatchType == admissionregistrationv1.PatchTypeJSONPatch}
		if nm.jsonPatch {
			nm.eval = compiler.CompileMutatingEvaluator(&nativeExpr{mu.JSONPatch.Expression, nativePatch}, patchDecl, environment.StoredExpressions)
		} else {
			nm.eval = compiler.CompileMutatingEvaluator(&nativeExpr{mu.ApplyConfiguration.Expression, nativeApplyCfg}, patchDecl, environment.StoredExpressions)
		}
		errs = append(errs, prefixed(fmt.Sprintf("spec.mutations[%d]", i), nm.eval.CompilationErrors())...)
		nr.mutations = append(nr.mutations, nm)
	}
	return errs
}

func prefixed(where string, errs []error) []error {
	out := make([]error, len(errs))
	for i, err := range errs {
		out[i] = fmt.Errorf("%s: %w", where, err)
	}
	return out
}

// defaultedMatch is a copy of mr with the selectors and matchPolicy the
// API server defaults when it stores the object (match everything,
// Equivalent); nil stays nil (a binding without matchResources). A
// resource rule without operations, which the API server refuses to
// store, selects every operation, as the Kyverno CLI reads such a file.
func defaultedMatch(mr *admissionregistrationv1.MatchResources) *admissionregistrationv1.MatchResources {
	if mr == nil {
		return nil
	}
	out := mr.DeepCopy()
	for _, rs := range [][]admissionregistrationv1.NamedRuleWithOperations{out.ResourceRules, out.ExcludeResourceRules} {
		for i := range rs {
			if len(rs[i].Operations) == 0 {
				rs[i].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
			}
		}
	}
	if out.NamespaceSelector == nil {
		out.NamespaceSelector = &metav1.LabelSelector{}
	}
	if out.ObjectSelector == nil {
		out.ObjectSelector = &metav1.LabelSelector{}
	}
	if out.MatchPolicy == nil {
		eq := admissionregistrationv1.Equivalent
		out.MatchPolicy = &eq
	}
	return out
}

func failurePolicyOf(fp *admissionregistrationv1.FailurePolicyType) admissionregistrationv1.FailurePolicyType {
	if fp == nil {
		return admissionregistrationv1.Fail
	}
	return *fp
}

// selectsKind says whether the policy's matchConstraints select the
// kind by name or only through "*", as a ValidatingPolicy's do (their
// resource rules are the same). The bindings can only narrow it.
func (nr *nativeRule) selectsKind(group, version, kind string) KindMatch {
	return nr.kinds.selectsKind(group, version, kind)
}

// nativeCall is one evaluation of a native policy on a request.
type nativeCall struct {
	attrs admission.Attributes
	va    *admission.VersionedAttributes
	gvr   schema.GroupVersionResource
	// namespace is the request's Namespace (nil for a cluster-scoped
	// resource and for a Namespace itself); nsLabels its labels.
	namespace *corev1.Namespace
	nsLabels  map[string]string
}

// newNativeCall builds the admission attributes of run's request as the
// API server would have them: the objects in its form (integral numbers
// are integers).
func (run *ruleRun) newNativeCall(in *matchInput) (*nativeCall, error) {
	req := run.req
	obj := run.obj
	g := in.gvk
	gvk := schema.GroupVersionKind{Group: g.group, Version: g.version, Kind: g.kind}
	resource := req.Resource
	if resource == "" {
		resource = guessResource(g)
	}
	c := &nativeCall{gvr: schema.GroupVersionResource{Group: g.group, Version: g.version, Resource: resource}, nsLabels: in.nsLabels}
	op := admission.Create
	if req.Operation != "" {
		op = admission.Operation(req.Operation)
	}
	var object, old runtime.Object
	if obj != nil && op != admission.Delete {
		object = apiObject(obj)
	}
	if req.OldObject != nil {
		old = apiObject(req.OldObject)
	} else if op == admission.Delete && obj != nil {
		old = apiObject(obj)
	}
	ns := in.namespace
	if req.Namespace != "" {
		ns = req.Namespace
	}
	name := in.name
	if req.Name != "" {
		name = req.Name
	}
	u := req.UserInfo
	info := &user.DefaultInfo{Name: u.Username, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
	c.attrs = admission.NewAttributesRecord(object, old, gvk, ns, name, c.gvr, req.SubResource, op, nil, req.DryRun, info)
	nsName := ns
	if gvk.Group == "" && gvk.Version == "v1" && gvk.Kind == "Namespace" {
		nsName = ""
	}
	if nsName != "" {
		c.namespace = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: nsName, Labels: in.nsLabels}}
		if nso := req.NamespaceObject; nso != nil {
			var full corev1.Namespace
			if runtime.DefaultUnstructuredConverter.FromUnstructured(nso, &full) == nil && full.Name == nsName {
				c.namespace = &full
			}
		}
	}
	va, err := admission.NewVersionedAttributes(c.attrs, gvk, nil)
	if err != nil {
		return nil, err
	}
	c.va = va
	return c, nil
}

// matches applies matchConstraints or a binding's matchResources as the
// API server's policy matcher does: the namespace selector (cluster-scoped
// resources other than Namespaces are never left out by it; a Namespace
// created or updated is matched on its own labels), the object selector
// (the object's labels or the old object's), the exclude rules, then the
// resource rules (no rules: every resource) with their resourceNames.
func (c *nativeCall) matches(mr *admissionregistrationv1.MatchResources) (bool, error) {
	if mr == nil {
		return true, nil
	}
	nsSel, err := metav1.LabelSelectorAsSelector(mr.NamespaceSelector)
	if err != nil {
		return false, err
	}
	if !c.namespaceMatches(nsSel) {
		return false, nil
	}
	objSel, err := metav1.LabelSelectorAsSelector(mr.ObjectSelector)
	if err != nil {
		return false, err
	}
	if !objSel.Empty() && !labelsMatch(c.attrs.GetObject(), objSel) && !labelsMatch(c.attrs.GetOldObject(), objSel) {
		return false, nil
	}
	if c.rulesMatch(mr.ExcludeResourceRules) {
		return false, nil
	}
	return len(mr.ResourceRules) == 0 || c.rulesMatch(mr.ResourceRules), nil
}

func (c *nativeCall) namespaceMatches(sel labels.Selector) bool {
	a := c.attrs
	if a.GetNamespace() == "" && a.GetResource().Resource != "namespaces" {
		return true
	}
	if sel.Empty() {
		return true
	}
	nsLabels := c.nsLabels
	if a.GetResource().Resource == "namespaces" && a.GetSubresource() == "" && (a.GetOperation() == admission.Create || a.GetOperation() == admission.Update) {
		if u, ok := a.GetObject().(*unstructured.Unstructured); ok {
			nsLabels = u.GetLabels()
		}
	}
	return sel.Matches(labels.Set(nsLabels))
}

func labelsMatch(obj runtime.Object, sel labels.Selector) bool {
	u, ok := obj.(*unstructured.Unstructured)
	return ok && sel.Matches(labels.Set(u.GetLabels()))
}

func (c *nativeCall) rulesMatch(rs []admissionregistrationv1.NamedRuleWithOperations) bool {
	for _, r := range rs {
		if !(&rules.Matcher{Rule: r.RuleWithOperations, Attr: c.attrs}).Matches() {
			continue
		}
		if len(r.ResourceNames) == 0 || slices.Contains(r.ResourceNames, c.attrs.GetName()) {
			return true
		}
	}
	return false
}

// evaluateNative evaluates a native policy on the request.
func (run *ruleRun) evaluateNative(rr RuleResponse, in *matchInput) RuleResponse {
	nr := run.rule.native
	// The meter's ctx (bounded: meterFor), marked with the caller.
	ctx := run.callCtx()
	c, err := run.newNativeCall(in)
	if err != nil {
		return run.errorf(rr, "failed to convert object version: %v", err)
	}
	ok, err := c.matches(nr.constraints)
	if err != nil {
		return run.nativeConfigError(rr, nil, err)
	}
	if !ok {
		return RuleResponse{}
	}
	bindings := nr.bindings
	if len(bindings) == 0 {
		// The Kyverno CLI's reading of a policy without bindings.
		bindings = []nativeBinding{{deny: true}}
	}
	applied := false
	var out RuleResponse
	for i := range bindings {
		b := &bindings[i]
		ok, err := c.matches(b.match)
		if err != nil {
			return run.nativeConfigError(rr, b, err)
		}
		if !ok {
			continue
		}
		params, err := run.nativeParams(ctx, nr, b, c.attrs.GetNamespace())
		if err != nil {
			return run.nativeConfigError(rr, b, err)
		}
		if len(params) == 0 {
			continue // no params, parameterNotFoundAction Allow: not evaluated
		}
		var res RuleResponse
		var done bool
		if nr.mutations == nil {
			res, done = run.validateNative(ctx, rr, c, b, params)
		} else {
			res, done = run.mutateNative(ctx, rr, c, params)
		}
		if done {
			return res
		}
		if res.Status != statusNone {
			applied = true
			if out.Status != StatusFail {
				out = res
			}
		}
	}
	if !applied {
		return RuleResponse{}
	}
	return out
}

// nativeConfigError is a policy or binding that cannot be applied (its
// params cannot be read, a selector does not parse): the API server
// denies under failurePolicy Fail and ignores the policy under Ignore.
func (run *ruleRun) nativeConfigError(rr RuleResponse, b *nativeBinding, err error) RuleResponse {
	if run.rule.native.failurePolicy == admissionregistrationv1.Ignore {
		rr.Status, rr.Message = StatusSkip, fmt.Sprintf("failurePolicy Ignore: %v", err)
		return rr
	}
	if b != nil && b.name != "" {
		return run.errorf(rr, "failed to configure binding %s: %v", b.name, err)
	}
	return run.errorf(rr, "failed to configure policy: %v", err)
}

// nativeError is an evaluation error: a rule error under failurePolicy
// Fail; under Ignore the API server admits, a pass.
func (run *ruleRun) nativeError(rr RuleResponse, msg string) (RuleResponse, bool) {
	if run.rule.native.failurePolicy == admissionregistrationv1.Ignore {
		rr.Status, rr.Message = StatusPass, ""
		return rr, false
	}
	return run.errorf(rr, "%s", msg), true
}

// matchConditionsHold evaluates the policy's matchConditions for one
// params object: ok false leaves the resource out; a result with done
// set is final.
func (run *ruleRun) matchConditionsHold(ctx context.Context, rr RuleResponse, c *nativeCall, p runtime.Object) (ok bool, res RuleResponse, done bool) {
	mc := run.rule.native.matchConditions
	if mc == nil {
		return true, rr, false
	}
	// The matcher applies the failure policy: under Ignore an error is
	// no match.
	m := mc.Match(ctx, c.va, p, nil)
	if m.Error != nil {
		return false, run.errorf(rr, "%v", m.Error), true
	}
	return m.Matches, rr, false
}

// validateNative validates the request once per params object as the
// API server's validator does: matchConditions, then the validations in
// order, each failure's message from its messageExpression (a non-empty
// single line within the size limit), its message, or the expression.
// done is set when the result is final (an error).
func (run *ruleRun) validateNative(ctx context.Context, rr RuleResponse, c *nativeCall, b *nativeBinding, params []runtime.Object) (RuleResponse, bool) {
	nr := run.rule.native
	rr.Enforce = b.deny
	evaluated := false
	request := plugincel.CreateAdmissionRequest(c.attrs, metav1.GroupVersionResource(c.gvr), metav1.GroupVersionKind(c.va.VersionedKind))
	ns := plugincel.CreateNamespaceObject(c.namespace)
	for _, p := range params {
		ok, res, done := run.matchConditionsHold(ctx, rr, c, p)
		if done {
			return res, true
		}
		if !ok {
			continue
		}
		evaluated = true
		vars := plugincel.OptionalVariableBindings{VersionedParams: p}
		results, remaining, err := nr.validationFilter.ForInput(ctx, c.va, request, vars, ns, celconfig.RuntimeCELCostBudget)
		if err != nil {
			if res, done := run.nativeError(rr, err.Error()); done || res.Status != StatusPass {
				return res, done
			}
			continue
		}
		messages, _, msgErr := nr.messageFilter.ForInput(ctx, c.va, request, vars, ns, remaining)
		for i, r := range results {
			switch {
			case r.Error != nil:
				if res, done := run.nativeError(rr, r.Error.Error()); done {
					return res, true
				}
			case errors.Is(msgErr, apiservercel.ErrInternal) || errors.Is(msgErr, apiservercel.ErrOutOfBudget):
				if res, done := run.nativeError(rr, fmt.Sprintf("failed messageExpression: %s", msgErr)); done {
					return res, true
				}
			case r.EvalResult != celtypes.True:
				var m *plugincel.EvaluationResult
				if i < len(messages) {
					m = &messages[i]
				}
				rr.Status, rr.Message = StatusFail, nativeFailureMessage(nr.validations[i], m)
				return rr, false
			}
		}
	}
	if !evaluated {
		rr.Status, rr.Message = StatusSkip, nativeMatchConditionsSkip
		return rr, false
	}
	rr.Status, rr.Message = StatusPass, ""
	return rr, false
}

// nativeFailureMessage is the API server's message of a failed
// validation.
func nativeFailureMessage(v admissionregistrationv1.Validation, m *plugincel.EvaluationResult) string {
	var msg string
	if m != nil && m.Error == nil && m.EvalResult != nil {
		if s, ok := m.EvalResult.Value().(string); ok {
			s = strings.TrimSpace(s)
			if len(s) <= celconfig.MaxEvaluatedMessageExpressionSizeBytes && !strings.Contains(s, "\n") {
				msg = s
			}
		}
	}
	if msg == "" {
		msg = strings.TrimSpace(v.Message)
	}
	if msg == "" {
		msg = "failed expression: " + strings.TrimSpace(v.Expression)
	}
	return msg
}

// mutateNative applies a MutatingAdmissionPolicy's mutations once per
// params object, each on the result of the one before, as the API server
// does; run.obj is the result. In a background evaluation (no
// operation) a mutation that would change the resource is a failure:
// the resource was not mutated when it was admitted.
func (run *ruleRun) mutateNative(ctx context.Context, rr RuleResponse, c *nativeCall, params []runtime.Object) (RuleResponse, bool) {
	nr := run.rule.native
	request := plugincel.CreateAdmissionRequest(c.attrs, metav1.GroupVersionResource(c.gvr), metav1.GroupVersionKind(c.va.VersionedKind))
	ns := plugincel.CreateNamespaceObject(c.namespace)
	// The patches work on the engine's untyped form (numbers float64):
	// an object read from the API (int64 numbers) is converted first, so
	// that a patch that changes nothing says so.
	n, err := document.Normalize(run.obj)
	if err != nil {
		return run.errorf(rr, "%v", err), true
	}
	obj, _ := n.(map[string]any)
	applied, changed := false, false
	for _, p := range params {
		ok, res, done := run.matchConditionsHold(ctx, rr, c, p)
		if done {
			return res, true
		}
		if !ok {
			continue
		}
		applied = true
		for i, m := range nr.mutations {
			out, _, err := m.eval.ForInput(ctx, c.va, request, plugincel.OptionalVariableBindings{VersionedParams: p}, ns, celconfig.RuntimeCELCostBudget)
			if err == nil {
				err = out.Error
			}
			var next map[string]any
			var ch bool
			if err == nil {
				next, ch, err = applyNativeMutation(obj, m, out)
			}
			if err != nil {
				if nr.failurePolicy == admissionregistrationv1.Ignore {
					break
				}
				return run.errorf(rr, "spec.mutations[%d]: %v", i, err), true
			}
			if ch {
				obj, changed = next, true
				c.va.VersionedObject = apiObject(obj)
				c.va.Dirty = true
			}
		}
	}
	if !applied {
		rr.Status, rr.Message = StatusSkip, nativeMatchConditionsSkip
		return rr, false
	}
	// Whether a mutation changed the resource is the patch's to say
	// (patch.Result.Changed), not a comparison of the objects, whose
	// numbers may be typed differently (the API's int64, JSON's
	// float64).
	if run.req.Operation == "" && changed {
		rr.Status, rr.Message = StatusFail, nativeMutationNotApplied
		return rr, false
	}
	run.obj = obj
	rr.Status, rr.Message = StatusPass, nativeMutationApplied
	return rr, false
}

// applyNativeMutation applies the patch a mutation evaluated to; obj is
// not changed.
func applyNativeMutation(obj map[string]any, m nativeMutation, out plugincel.EvaluationResult) (map[string]any, bool, error) {
	res, err := applyCELPatch(obj, out.EvalResult, m.jsonPatch, false)
	if err != nil {
		return nil, false, err
	}
	if !res.Changed {
		return obj, false, nil
	}
	return res.Object, true, nil
}

// apiObject is obj as the API server decodes it (an unstructured object
// whose integral numbers are int64), for the API server's CEL library;
// obj is not changed.
func apiObject(obj map[string]any) *unstructured.Unstructured {
	m, _ := apiValue(obj).(map[string]any)
	return &unstructured.Unstructured{Object: m}
}

func apiValue(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = apiValue(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = apiValue(e)
		}
		return out
	case float64:
		if t == float64(int64(t)) {
			return int64(t)
		}
		return t
	case int:
		return int64(t)
	}
	return v
}

// nativeParams collects a binding's params as the API server does: none
// needed ([nil]) without paramKind or paramRef; by name or selector, in
// paramRef's namespace or the request's for a namespaced kind; no params
// found is an error under parameterNotFoundAction Deny and no evaluation
// otherwise.
func (run *ruleRun) nativeParams(ctx context.Context, nr *nativeRule, b *nativeBinding, namespace string) ([]runtime.Object, error) {
	ref := b.paramRef
	if nr.paramKind == nil || ref == nil {
		return []runtime.Object{nil}, nil
	}
	apiVersion, kind := nr.paramKind.APIVersion, nr.paramKind.Kind
	sr, ok := run.e.reader.inner.(ScopeResolver)
	if !ok {
		return nil, fmt.Errorf("paramKind %s %s: %w", apiVersion, kind, ErrNotAvailable)
	}
	namespaced, err := sr.Namespaced(ctx, apiVersion, kind)
	if err != nil {
		return nil, fmt.Errorf("paramKind kind `%s, Kind=%s` not known: %w", apiVersion, kind, err)
	}
	ns := ""
	switch {
	case namespaced && ref.Namespace != "":
		ns = ref.Namespace
	case namespaced && namespace == "":
		return nil, errors.New("cannot use namespaced paramRef in policy binding that matches cluster-scoped resources")
	case namespaced:
		ns = namespace
	case ref.Namespace != "":
		return nil, errors.New("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
	}
	var found []map[string]any
	if ref.Name != "" {
		obj, err := run.e.reader.GetResource(ctx, apiVersion, kind, ns, ref.Name)
		switch {
		case errors.Is(err, ErrNotFound) || apierrors.IsNotFound(err) || (err == nil && obj == nil):
		case err != nil:
			return nil, err
		default:
			found = append(found, obj)
		}
	} else {
		sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
		if err != nil {
			return nil, err
		}
		list, err := run.e.reader.ListResources(ctx, apiVersion, kind, ns, nil)
		if err != nil && !errors.Is(err, ErrNotFound) {
			return nil, err
		}
		for _, o := range list {
			if sel.Matches(labels.Set(document.StringMap(o, "metadata", "labels"))) {
				found = append(found, o)
			}
		}
	}
	if len(found) == 0 {
		if a := ref.ParameterNotFoundAction; a != nil && *a == admissionregistrationv1.DenyAction {
			return nil, errors.New("no params found for policy binding with `Deny` parameterNotFoundAction")
		}
		return nil, nil
	}
	out := make([]runtime.Object, len(found))
	for i, o := range found {
		out[i] = apiObject(o)
	}
	return out, nil
}
