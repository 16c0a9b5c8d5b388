package engine

// Kubernetes' own admission policies, ValidatingAdmissionPolicy and
// MutatingAdmissionPolicy with their bindings, evaluated with the API
// server's admission library (k8s.io/apiserver/pkg/admission/plugin):
// its CEL environment and cost limits, its matching of matchConstraints
// and matchResources, its validator and its patchers. In a cluster the
// API server enforces these policies; Verdict evaluates them for
// `verdict apply` / `verdict test` and background scans, as Kyverno does.
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

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/cel/environment"
	corelisters "k8s.io/client-go/listers/core/v1"

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
	np            *policy.NativePolicy
	kind          string
	paramKind     *admissionregistrationv1.ParamKind
	failurePolicy admissionregistrationv1.FailurePolicyType
	// constraints is the policy's matchConstraints, with the selectors
	// the API server defaults.
	constraints *admissionregistrationv1.MatchResources
	bindings    []nativeBinding
	// validator is a ValidatingAdmissionPolicy's; matchConditions and
	// patchers a MutatingAdmissionPolicy's.
	validator       validating.Validator
	matchConditions matchconditions.Matcher
	patchers        []patch.Patcher
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
	nr := &nativeRule{np: np, kind: p.Kind}
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

// compileVAP compiles a ValidatingAdmissionPolicy as the API server's
// ValidatingAdmissionPolicy plugin does.
func (nr *nativeRule) compileVAP(vap *admissionregistrationv1.ValidatingAdmissionPolicy) []error {
	spec := &vap.Spec
	hasParams := spec.ParamKind != nil
	// The API server declares the authorizer; Verdict has none to give, so
	// an expression that calls it fails when evaluated.
	vars := plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true}
	msgVars := plugincel.OptionalVariableDeclarations{HasParams: hasParams}
	compiler, err := plugincel.NewCompositedCompiler(nativeEnv())
	if err != nil {
		return []error{err}
	}
	var errs []error
	errs = append(errs, compileNativeVariables(compiler, spec.Variables, vars)...)
	var matcher matchconditions.Matcher
	if len(spec.MatchConditions) > 0 {
		conds := compiler.CompileCondition(matchConditionAccessors(spec.MatchConditions), vars, environment.StoredExpressions)
		errs = append(errs, prefixed("spec.matchConditions", conds.CompilationErrors())...)
		matcher = matchconditions.NewMatcher(conds, spec.FailurePolicy, "policy", "validate", vap.Name)
	}
	validations := make([]plugincel.ExpressionAccessor, len(spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(spec.Validations))
	for i, v := range spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	annotations := make([]plugincel.ExpressionAccessor, len(spec.AuditAnnotations))
	for i, a := range spec.AuditAnnotations {
		annotations[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	vf := compiler.CompileCondition(validations, vars, environment.StoredExpressions)
	af := compiler.CompileCondition(annotations, vars, environment.StoredExpressions)
	mf := compiler.CompileCondition(messages, msgVars, environment.StoredExpressions)
	errs = append(errs, prefixed("spec.validations", vf.CompilationErrors())...)
	errs = append(errs, prefixed("spec.auditAnnotations", af.CompilationErrors())...)
	errs = append(errs, prefixed("spec.validations messageExpression", mf.CompilationErrors())...)
	nr.validator = validating.NewValidator(vf, matcher, af, mf, spec.FailurePolicy, nil)
	return errs
}

// compileMAP compiles a MutatingAdmissionPolicy as the API server's
// MutatingAdmissionPolicy plugin does.
func (nr *nativeRule) compileMAP(m *admissionregistrationv1.MutatingAdmissionPolicy) []error {
	spec := &m.Spec
	vars := plugincel.OptionalVariableDeclarations{HasParams: spec.ParamKind != nil, HasAuthorizer: true}
	compiler, err := plugincel.NewCompositedCompiler(nativeEnv())
	if err != nil {
		return []error{err}
	}
	var errs []error
	errs = append(errs, compileNativeVariables(compiler, spec.Variables, vars)...)
	if len(spec.MatchConditions) > 0 {
		conds := compiler.CompileCondition(matchConditionAccessors(spec.MatchConditions), vars, environment.StoredExpressions)
		errs = append(errs, prefixed("spec.matchConditions", conds.CompilationErrors())...)
		nr.matchConditions = matchconditions.NewMatcher(conds, spec.FailurePolicy, "policy", "mutate", m.Name)
	}
	patchVars := vars
	patchVars.HasPatchTypes = true
	for i, mu := range spec.Mutations {
		var ev plugincel.MutatingEvaluator
		switch mu.PatchType {
		case admissionregistrationv1.PatchTypeJSONPatch:
			ev = compiler.CompileMutatingEvaluator(&patch.JSONPatchCondition{Expression: mu.JSONPatch.Expression}, patchVars, environment.StoredExpressions)
			nr.patchers = append(nr.patchers, patch.NewJSONPatcher(ev))
		default:
			ev = compiler.CompileMutatingEvaluator(&patch.ApplyConfigurationCondition{Expression: mu.ApplyConfiguration.Expression}, patchVars, environment.StoredExpressions)
			nr.patchers = append(nr.patchers, patch.NewApplyConfigurationPatcher(ev))
		}
		errs = append(errs, prefixed(fmt.Sprintf("spec.mutations[%d]", i), ev.CompilationErrors())...)
	}
	return errs
}

func compileNativeVariables(c *plugincel.CompositedCompiler, vars []admissionregistrationv1.Variable, decl plugincel.OptionalVariableDeclarations) []error {
	var errs []error
	for i, v := range vars {
		res := c.CompileAndStoreVariable(&validating.Variable{Name: v.Name, Expression: v.Expression}, decl, environment.StoredExpressions)
		if res.Error != nil {
			errs = append(errs, fmt.Errorf("spec.variables[%d] (%s): %s", i, v.Name, res.Error.Detail))
		}
	}
	return errs
}

func matchConditionAccessors(conds []admissionregistrationv1.MatchCondition) []plugincel.ExpressionAccessor {
	out := make([]plugincel.ExpressionAccessor, len(conds))
	for i := range conds {
		out[i] = (*matchconditions.MatchCondition)(&conds[i])
	}
	return out
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
	for _, rules := range [][]admissionregistrationv1.NamedRuleWithOperations{out.ResourceRules, out.ExcludeResourceRules} {
		for i := range rules {
			if len(rules[i].Operations) == 0 {
				rules[i].Operations = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
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
// kind (its plural guessed from the kind, as a background scan names
// kinds) by name or only through "*". The bindings can only narrow it.
func (nr *nativeRule) selectsKind(group, version, kind string) KindMatch {
	resource := guessResource(gvk{group: group, version: version, kind: kind})
	best := KindNotSelected
	for _, r := range nr.constraints.ResourceRules {
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

// nativeCall is one evaluation of a native policy on a request.
type nativeCall struct {
	run     *ruleRun
	attrs   admission.Attributes
	objects admission.ObjectInterfaces
	matcher generic.PolicyMatcher
	// namespace is the request's Namespace (nil for a cluster-scoped
	// resource and for a Namespace itself).
	namespace *corev1.Namespace
}

// newNativeCall builds the admission attributes of run's request as the
// API server would have them.
func (run *ruleRun) newNativeCall(in *matchInput) *nativeCall {
	req := run.req
	obj := run.obj
	g := in.gvk
	gvk := schema.GroupVersionKind{Group: g.group, Version: g.version, Kind: g.kind}
	resource := req.Resource
	if resource == "" {
		resource = guessResource(g)
	}
	gvr := schema.GroupVersionResource{Group: g.group, Version: g.version, Resource: resource}
	op := admission.Create
	if req.Operation != "" {
		op = admission.Operation(req.Operation)
	}
	var object, old runtime.Object
	if obj != nil && op != admission.Delete {
		object = &unstructured.Unstructured{Object: obj}
	}
	if req.OldObject != nil {
		old = &unstructured.Unstructured{Object: req.OldObject}
	} else if op == admission.Delete && obj != nil {
		old = &unstructured.Unstructured{Object: obj}
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
	c := &nativeCall{run: run, objects: admission.NewObjectInterfacesFromScheme(runtime.NewScheme())}
	c.attrs = admission.NewAttributesRecord(object, old, gvk, ns, name, gvr, req.SubResource, op, nil, req.DryRun, info)
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
	c.matcher = generic.NewPolicyMatcher(matching.NewMatcher(requestNamespaces{c: c, labels: in.nsLabels}, nil))
	return c
}

// evaluateNative evaluates a native policy on the request.
func (run *ruleRun) evaluateNative(rr RuleResponse, in *matchInput) RuleResponse {
	nr := run.rule.native
	// The meter's ctx (bounded: meterFor), marked with the caller.
	ctx := run.callCtx()
	c := run.newNativeCall(in)
	defAccessor := nativeDefinition{nr}
	ok, matchedGVR, matchedGVK, err := c.matcher.DefinitionMatches(c.attrs, c.objects, defAccessor)
	if err != nil {
		return run.errorf(rr, "failed to match %s: %v", nr.kind, err)
	}
	if !ok {
		return RuleResponse{}
	}
	bindings := nr.bindings
	if len(bindings) == 0 {
		// The Kyverno CLI's reading of a policy without bindings.
		bindings = []nativeBinding{{deny: true}}
	}
	va, err := admission.NewVersionedAttributes(c.attrs, matchedGVK, c.objects)
	if err != nil {
		return run.errorf(rr, "failed to convert object version: %v", err)
	}
	applied := false
	var out RuleResponse
	for i := range bindings {
		b := &bindings[i]
		if b.match != nil {
			ok, err := c.matcher.BindingMatches(c.attrs, c.objects, nativeBindingAccessor{b})
			if err != nil {
				return run.nativeConfigError(rr, b, err)
			}
			if !ok {
				continue
			}
		}
		params, err := run.nativeParams(ctx, nr, b, c.attrs.GetNamespace())
		if err != nil {
			return run.nativeConfigError(rr, b, err)
		}
		if len(params) == 0 {
			continue // no params, parameterNotFoundAction Allow: not evaluated
		}
		if nr.validator != nil {
			res, done := run.validateNative(ctx, rr, c, b, va, matchedGVR, params)
			if done {
				return res
			}
			if res.Status != statusNone {
				applied = true
				if out.Status != StatusFail {
					out = res
				}
			}
			continue
		}
		res, done := run.mutateNative(ctx, rr, c, b, va, matchedGVR, params)
		if done {
			return res
		}
		if res.Status != statusNone {
			applied = true
			out = res
		}
	}
	if !applied {
		return RuleResponse{}
	}
	return out
}

// nativeConfigError is a binding that cannot be applied (its params
// cannot be read, a selector does not parse): the API server denies
// under failurePolicy Fail and ignores the policy under Ignore.
func (run *ruleRun) nativeConfigError(rr RuleResponse, b *nativeBinding, err error) RuleResponse {
	if run.rule.native.failurePolicy == admissionregistrationv1.Ignore {
		rr.Status, rr.Message = StatusSkip, fmt.Sprintf("failurePolicy Ignore: %v", err)
		return rr
	}
	if b.name != "" {
		return run.errorf(rr, "failed to configure binding %s: %v", b.name, err)
	}
	return run.errorf(rr, "failed to configure policy: %v", err)
}

// validateNative runs a ValidatingAdmissionPolicy's validator once per
// params object. done is set when the result is final (an error).
func (run *ruleRun) validateNative(ctx context.Context, rr RuleResponse, c *nativeCall, b *nativeBinding, va *admission.VersionedAttributes, gvr schema.GroupVersionResource, params []runtime.Object) (RuleResponse, bool) {
	rr.Enforce = b.deny
	evaluated := false
	for _, p := range params {
		res := run.rule.native.validator.Validate(ctx, gvr, va, p, c.namespace, celconfig.RuntimeCELCostBudget, nil)
		if len(res.Decisions) == 0 {
			continue
		}
		evaluated = true
		for _, d := range res.Decisions {
			switch {
			case d.Evaluation == validating.EvalError && d.Action == validating.ActionDeny:
				return run.errorf(rr, "%s", d.Message), true
			case d.Action == validating.ActionDeny:
				rr.Status, rr.Message = StatusFail, d.Message
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

// mutateNative runs a MutatingAdmissionPolicy's patchers once per params
// object, each on the result of the one before, as the API server
// does; run.obj is the result. In a background evaluation (no
// operation) a mutation that would change the resource is a failure:
// the resource was not mutated when it was admitted.
func (run *ruleRun) mutateNative(ctx context.Context, rr RuleResponse, c *nativeCall, b *nativeBinding, va *admission.VersionedAttributes, gvr schema.GroupVersionResource, params []runtime.Object) (RuleResponse, bool) {
	nr := run.rule.native
	patchedAny := false
	for _, p := range params {
		if nr.matchConditions != nil {
			m := nr.matchConditions.Match(ctx, va, p, nil)
			if m.Error != nil {
				if nr.failurePolicy == admissionregistrationv1.Ignore {
					continue
				}
				return run.errorf(rr, "%v", m.Error), true
			}
			if !m.Matches {
				continue
			}
		}
		for _, pt := range nr.patchers {
			obj, err := pt.Patch(ctx, patch.Request{
				MatchedResource:     gvr,
				VersionedAttributes: va,
				ObjectInterfaces:    c.objects,
				OptionalVariables:   plugincel.OptionalVariableBindings{VersionedParams: p},
				Namespace:           c.namespace,
				TypeConverter:       managedfields.NewDeducedTypeConverter(),
			}, celconfig.RuntimeCELCostBudget)
			if err != nil {
				if nr.failurePolicy == admissionregistrationv1.Ignore {
					break
				}
				return run.errorf(rr, "%v", err), true
			}
			va.Dirty = true
			va.VersionedObject = obj
			patchedAny = true
		}
	}
	if !patchedAny {
		rr.Status, rr.Message = StatusSkip, nativeMatchConditionsSkip
		return rr, false
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(va.VersionedObject)
	if err != nil {
		return run.errorf(rr, "failed to convert the patched object: %v", err), true
	}
	// The engine's untyped form: numbers are float64.
	n, err := document.Normalize(u)
	if err != nil {
		return run.errorf(rr, "failed to convert the patched object: %v", err), true
	}
	patched, _ := n.(map[string]any)
	if run.req.Operation == "" && !document.Equal(patched, run.obj) {
		rr.Status, rr.Message = StatusFail, nativeMutationNotApplied
		return rr, false
	}
	run.obj = patched
	rr.Status, rr.Message = StatusPass, nativeMutationApplied
	return rr, false
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
		out[i] = &unstructured.Unstructured{Object: o}
	}
	return out, nil
}

// nativeDefinition and nativeBindingAccessor give the API server's
// matcher what it reads of a policy and a binding.
type nativeDefinition struct{ nr *nativeRule }

func (d nativeDefinition) GetNamespace() string                             { return "" }
func (d nativeDefinition) GetName() string                                  { return "" }
func (d nativeDefinition) GetParamKind() *admissionregistrationv1.ParamKind { return d.nr.paramKind }
func (d nativeDefinition) GetMatchConstraints() *admissionregistrationv1.MatchResources {
	return d.nr.constraints
}
func (d nativeDefinition) GetFailurePolicy() *admissionregistrationv1.FailurePolicyType {
	fp := d.nr.failurePolicy
	return &fp
}

type nativeBindingAccessor struct{ b *nativeBinding }

func (a nativeBindingAccessor) GetNamespace() string { return "" }
func (a nativeBindingAccessor) GetName() string      { return a.b.name }
func (a nativeBindingAccessor) GetPolicyName() types.NamespacedName {
	return types.NamespacedName{}
}
func (a nativeBindingAccessor) GetMatchResources() *admissionregistrationv1.MatchResources {
	return a.b.match
}
func (a nativeBindingAccessor) GetParamRef() *admissionregistrationv1.ParamRef { return a.b.paramRef }

// requestNamespaces serves the API server's namespace matcher the
// request's namespace: its labels are the request's namespace labels.
type requestNamespaces struct {
	c      *nativeCall
	labels map[string]string
}

func (l requestNamespaces) List(sel labels.Selector) ([]*corev1.Namespace, error) {
	if l.c.namespace == nil || !sel.Matches(labels.Set(l.c.namespace.Labels)) {
		return nil, nil
	}
	return []*corev1.Namespace{l.c.namespace}, nil
}

func (l requestNamespaces) Get(name string) (*corev1.Namespace, error) {
	if l.c.namespace != nil && l.c.namespace.Name == name {
		return l.c.namespace, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l.labels}}, nil
}

var _ corelisters.NamespaceLister = requestNamespaces{}
