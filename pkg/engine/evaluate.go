package engine

import (
	"context"
	"fmt"
	"runtime/debug"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine/conditions"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// Set is what one evaluation applies: compiled policies and the
// exceptions that may exempt resources from them.
type Set struct {
	Policies   []*Policy
	Exceptions []*policy.Exception
}

// HasCEL reports whether a policy of the set evaluates CEL (a caller
// then gives the request's NamespaceObject, which only CEL reads).
func (s *Set) HasCEL() bool {
	for _, p := range s.Policies {
		for _, r := range p.Rules {
			if r.cel != nil {
				return true
			}
		}
	}
	return false
}

// Apply runs every policy of the set on the request in Kyverno's order: all
// mutations first (each policy sees the previous ones' patches), then the
// image verifications (which pin images to digests), then the validations
// on the mutated resource, then generation. It returns one
// response per policy and rule kind that had any rule apply, and the final
// patched resource.
//
// ctx bounds the evaluation and is passed to context loaders and resource
// listers: once it ends, the rule running and every rule still to run end
// with StatusError and a message starting with StoppedPrefix. The same
// holds for Validate, Mutate, Generate and VerifyImages.
func (e *Engine) Apply(ctx context.Context, req *Request, set *Set) ([]Response, map[string]any) {
	out := make([]Response, 0, len(set.Policies))
	// One meter for the whole call; it also makes the request's scratch
	// cache, which cur shares.
	m := e.meterFor(ctx, req)
	// The rule responses of the policies share allocations: most
	// policies have one rule for a given kind, some have two.
	m.arenaSize = len(set.Policies) + len(set.Policies)/2
	cur := *req
	for _, p := range set.Policies {
		if !p.hasType(TypeMutation) {
			continue
		}
		resp := e.run(m, &cur, p, set.Exceptions, TypeMutation)
		if len(resp.Rules) > 0 {
			out = append(out, resp)
		}
		if resp.Patched != nil {
			cur.Object = resp.Patched
		}
	}
	// Images are verified and pinned to their digests after the
	// mutations, before the validations see the resource (Kyverno's
	// mutating webhook verifies images after its mutations).
	// An ImageValidatingPolicy's digest mutation is the mutating
	// webhook's (VerifyImages), not Apply's: Kyverno's CLI does not pin
	// the images of those policies either.
	for _, p := range set.Policies {
		if !p.hasType(TypeImageVerify) {
			continue
		}
		resp := e.run(m, &cur, p, set.Exceptions, typeImageChecks)
		if len(resp.Rules) > 0 {
			out = append(out, resp)
		}
		if resp.Patched != nil {
			cur.Object = resp.Patched
		}
	}
	for _, p := range set.Policies {
		if p.hasType(TypeValidation) {
			if resp := e.run(m, &cur, p, set.Exceptions, TypeValidation); len(resp.Rules) > 0 {
				out = append(out, resp)
			}
		}
		if p.hasType(TypeGeneration) {
			if resp := e.run(m, &cur, p, set.Exceptions, TypeGeneration); len(resp.Rules) > 0 {
				out = append(out, resp)
			}
		}
	}
	return out, cur.Object
}

func (p *Policy) hasType(t RuleType) bool {
	for _, r := range p.Rules {
		if ruleType(&r.Rule) == t {
			return true
		}
	}
	return false
}

func ruleType(r *policy.Rule) RuleType {
	switch {
	case r.Validation != nil:
		return TypeValidation
	case r.Mutation != nil:
		return TypeMutation
	case r.Generation != nil:
		return TypeGeneration
	case len(r.VerifyImages) > 0:
		return TypeImageVerify
	}
	return ""
}

// selects reports whether a call for rules of type t evaluates r: its
// mutate-existing rules for typeMutateExisting, its rules of type t
// otherwise.
func selects(r *Rule, t RuleType) bool {
	rt := ruleType(&r.Rule)
	if t == typeMutateExisting || t == typeMutateTriggers {
		return rt == TypeMutation && r.MutatesExisting()
	}
	if t == typeGenerateTriggers {
		return rt == TypeGeneration
	}
	if t == typeImageChecks {
		return rt == TypeImageVerify && !r.ivpolDigests()
	}
	return rt == t
}

// Validate runs the policy's validate rules.
func (e *Engine) Validate(ctx context.Context, req *Request, p *Policy, exceptions []*policy.Exception) Response {
	return e.run(e.meterFor(ctx, req), req, p, exceptions, TypeValidation)
}

// Check runs the rules whose results reports show: the policy's validate
// rules, then its verifyImages rules (the images verified, from the
// cache where the mutating webhook verified them, then verifyDigest and
// required). It is the validating webhook's evaluation and the
// background scan's; Response.Rules holds the validate rules' responses,
// then the verifyImages rules'.
func (e *Engine) Check(ctx context.Context, req *Request, p *Policy, exceptions []*policy.Exception) Response {
	if p.checksMutation() {
		// A MutatingAdmissionPolicy: whether the resource holds its
		// mutation (in a background evaluation, fail when it does not).
		return e.run(e.meterFor(ctx, req), req, p, exceptions, TypeMutation)
	}
	var resp Response
	if p.hasType(TypeValidation) {
		resp = e.Validate(ctx, req, p, exceptions)
	}
	if p.hasType(TypeImageVerify) {
		// An ImageValidatingPolicy's digest mutation is the mutating
		// webhook's alone.
		img := e.run(e.meterFor(ctx, req), req, p, exceptions, typeImageChecks)
		if len(img.Rules) > 0 {
			img.Rules = append(resp.Rules[:len(resp.Rules):len(resp.Rules)], img.Rules...)
			resp = img
		}
	}
	return resp
}

// Mutate runs the policy's mutate rules; Response.Patched carries the
// result.
func (e *Engine) Mutate(ctx context.Context, req *Request, p *Policy, exceptions []*policy.Exception) Response {
	return e.run(e.meterFor(ctx, req), req, p, exceptions, TypeMutation)
}

// Generate runs the policy's generate rules; each rule's Generated holds
// what it would create.
func (e *Engine) Generate(ctx context.Context, req *Request, p *Policy, exceptions []*policy.Exception) Response {
	return e.run(e.meterFor(ctx, req), req, p, exceptions, TypeGeneration)
}

// VerifyImages runs the policy's verifyImages rules: the images verified
// through the engine's ImageVerifier, pinned to their digests
// (Response.Patched), then verifyDigest and required checked on the
// result (imageverify_eval.go).
func (e *Engine) VerifyImages(ctx context.Context, req *Request, p *Policy, exceptions []*policy.Exception) Response {
	return e.run(e.meterFor(ctx, req), req, p, exceptions, TypeImageVerify)
}

// ivpolDigests reports whether r is an ImageValidatingPolicy's digest
// mutation.
func (r *Rule) ivpolDigests() bool {
	return r.cel != nil && r.cel.ivpol != nil && r.cel.ivpol.digestOnly
}

// ruleRun carries the state of one rule's evaluation.
type ruleRun struct {
	e   *Engine
	req *Request
	// m bounds the work of the call evaluating the rule.
	m      *meter
	policy *Policy
	rule   *Rule
	ctx    *evalContext
	// existing is set when the call evaluates mutate-existing rules on
	// their targets (MutateExisting).
	existing bool
	// triggersOnly is set when the call only asks which generate rules
	// the request triggers (GenerateTriggers).
	triggersOnly bool
	// ruleCtx is the storage of the rule's own context, a clone of the
	// base context, so that it needs no allocation of its own.
	ruleCtx evalContext
	obj     map[string]any
	enforce bool
	// provided are the rule's values from the caller; context entries of
	// the same name are not evaluated.
	provided map[string]any
}

// run evaluates the policy's rules of type t under m, the meter of the
// call.
func (e *Engine) run(m *meter, req *Request, p *Policy, exceptions []*policy.Exception, t RuleType) Response {
	obj := req.resource()
	resp := Response{Policy: p, Resource: obj, Patched: obj}
	if obj == nil {
		return resp
	}
	c := req.scratch()
	if id := identity(obj); c.match == nil || c.matchObj != id {
		c.match, c.matchObj = newMatchInput(req), id
	}
	in := c.match
	if p.Raw.Namespaced() && in.namespace != p.Raw.Metadata.Namespace {
		return resp
	}
	var base *evalContext
	cur := obj
	for _, r := range p.Rules {
		if !selects(r, t) {
			continue
		}
		selected, err := r.selects(in, req, m)
		if err != nil {
			// The budget could not pay for the rule's match or exclude
			// block: the rule is stopped, as it would be in its body.
			if resp.Rules == nil {
				resp.Rules = m.ruleSlots(len(p.Rules))
			}
			resp.Rules = append(resp.Rules, RuleResponse{Name: r.Name, Type: ruleType(&r.Rule), Status: StatusError, Message: err.Error()})
			continue
		}
		if !selected {
			continue
		}
		if base == nil {
			base = e.cachedBase(req)
		}
		if resp.Rules == nil {
			resp.Rules = m.ruleSlots(len(p.Rules))
		}
		run := m.ruleRun()
		*run = ruleRun{e: e, req: req, m: m, policy: p, rule: r, obj: cur, existing: t == typeMutateExisting, triggersOnly: t == typeGenerateTriggers}
		var start time.Time
		if e.ruleClock != nil {
			start = e.ruleClock()
		}
		rr := run.evaluateBounded(m, base, exceptions, in)
		if e.ruleClock != nil {
			rr.Duration = e.ruleClock().Sub(start)
		}
		if t == TypeMutation && rr.Status == StatusPass && run.obj != nil {
			cur = run.obj
		}
		if t == TypeImageVerify && (rr.Status == StatusPass || rr.Status == StatusSkip || r.ivpolDigests()) && run.obj != nil {
			// Skipped images are pinned to their digests too, and an
			// ImageValidatingPolicy's images, which it reports no result
			// for, even beside an image it could not resolve.
			cur = run.obj
		}
		if rr.Status == statusNone {
			continue
		}
		resp.Rules = append(resp.Rules, rr)
		if p.Raw.Spec.ApplyRules == "One" && rr.Status == StatusPass {
			break
		}
	}
	resp.Patched = cur
	resp.Rules = m.keepRules(resp.Rules)
	if len(resp.Rules) == 0 {
		resp.Rules = nil
	}
	return resp
}

// selects reports whether the rule's match block (or its CEL match
// constraints), and not its exclude block, selects the request. Their
// wildcards are charged to m, the meter of the call: an error is why the
// evaluation must stop.
func (r *Rule) selects(in *matchInput, req *Request, m *meter) (bool, error) {
	if r.celMatch != nil {
		return r.celMatch.matches(in, req, m)
	}
	if r.native != nil {
		// The API server's matcher decides, in evaluateNative.
		return !req.JSON, nil
	}
	if req.JSON {
		return false, nil
	}
	ok, err := r.match.matches(in, m)
	if !ok || err != nil || r.exclude == nil {
		return ok, err
	}
	excluded, err := r.exclude.matches(in, m)
	return !excluded && err == nil, err
}

// ruleRun returns the storage of the call's rule evaluations: rules run
// one at a time, each from a zero ruleRun, so one per call is enough.
func (m *meter) ruleRun() *ruleRun {
	if m == nil {
		return &ruleRun{}
	}
	if m.run == nil {
		m.run = &ruleRun{}
	}
	return m.run
}

// ruleSlots returns an empty slice for up to n rule responses: room in
// the call's arena, in a new arena when it has too little, or a slice of
// its own when the call has no arena.
func (m *meter) ruleSlots(n int) []RuleResponse {
	if m == nil || m.arenaSize == 0 {
		return make([]RuleResponse, 0, 1)
	}
	if cap(m.arena)-len(m.arena) < n {
		m.arena = make([]RuleResponse, 0, max(n, m.arenaSize))
	}
	return m.arena[len(m.arena) : len(m.arena) : len(m.arena)+n]
}

// keepRules takes rules, from ruleSlots, out of the arena's free room and
// caps them at their length, so that a caller appending to them cannot
// write over the next policy's.
func (m *meter) keepRules(rules []RuleResponse) []RuleResponse {
	if m == nil || len(rules) == 0 {
		return rules
	}
	if free := m.arena[len(m.arena):cap(m.arena)]; cap(free) > 0 && &free[:1][0] == &rules[:1][0] {
		m.arena = m.arena[:len(m.arena)+len(rules)]
	}
	return rules[:len(rules):len(rules)]
}

// evaluate runs one matched rule, turning panics into an error result.
func (run *ruleRun) evaluate(base *evalContext, exceptions []*policy.Exception, in *matchInput) (rr RuleResponse) {
	r := run.rule
	rr = RuleResponse{Name: r.Name, Type: ruleType(&r.Rule)}
	defer func() {
		if rec := recover(); rec != nil {
			rr.Status = StatusError
			rr.Message = fmt.Sprintf("internal error evaluating rule %s: %v\n%s", r.Name, rec, debug.Stack())
		}
	}()
	if r.native != nil {
		return run.evaluateNative(rr, in)
	}
	if rr.Type == TypeValidation || rr.Type == TypeImageVerify {
		action, err := run.failureAction(in)
		if err != nil {
			return run.errorf(rr, "%v", err)
		}
		run.enforce = action == policy.Enforce
		rr.Enforce = run.enforce
	}
	name, ok, err := run.exceptionFor(exceptions, in)
	if err != nil {
		return run.errorf(rr, "%v", err)
	}
	if ok {
		rr.Status, rr.Exception = StatusSkip, name
		rr.Message = "rule is skipped due to policy exception " + name
		return rr
	}
	run.ruleCtx = evalContext{jp: base.jp, data: base.data, shared: true, m: run.m}
	run.ctx = &run.ruleCtx
	if identity(run.obj) != identity(run.req.resource()) {
		// A previous mutate rule changed the resource.
		run.ctx.set("request.object", run.obj)
	}
	if err := run.loadRuleContext(); err != nil {
		return run.errorf(rr, "failed to load context: %v", err)
	}
	ok, msg, err := run.checkConditions(r.RawAnyAllConditions)
	if err != nil {
		return run.errorf(rr, "failed to evaluate preconditions: %v", err)
	}
	if !ok {
		rr.Status = StatusSkip
		rr.Message = "preconditions not met"
		if msg != "" {
			rr.Message = msg
		}
		return rr
	}
	switch rr.Type {
	case TypeValidation:
		return run.validate(rr)
	case TypeMutation:
		return run.mutate(rr)
	case TypeGeneration:
		return run.generate(rr)
	default:
		return run.verifyImages(rr)
	}
}

func (run *ruleRun) errorf(rr RuleResponse, format string, args ...any) RuleResponse {
	rr.Status = StatusError
	rr.Message = fmt.Sprintf(format, args...)
	for _, a := range args {
		if err, ok := a.(error); ok && isRefusal(err) {
			rr.Refused = true
		}
	}
	return rr
}

// failureAction resolves Enforce or Audit for a validate rule. The
// overrides' wildcards are charged to the rule's meter: an error is why
// the evaluation must stop.
func (run *ruleRun) failureAction(in *matchInput) (string, error) {
	spec := &run.policy.Raw.Spec
	action := spec.ValidationFailureAction
	overrides := spec.ValidationFailureActionOverrides
	if v := run.rule.Validation; v != nil {
		if v.FailureAction != "" {
			action = v.FailureAction
		}
		if len(v.FailureActionOverrides) > 0 {
			overrides = v.FailureActionOverrides
		}
	}
	m := run.meter()
	for _, o := range overrides {
		if len(o.Namespaces) > 0 {
			ok, err := m.matchAny(o.Namespaces, in.namespace)
			if err != nil {
				return "", err
			}
			if !ok {
				continue
			}
		}
		if o.NamespaceSelector != nil {
			ok, err := matchSelector(o.NamespaceSelector, in.nsLabels, m)
			if err != nil {
				return "", err
			}
			if !ok {
				continue
			}
		}
		action = o.Action
		break
	}
	if strings.EqualFold(action, policy.Enforce) {
		return policy.Enforce, nil
	}
	return policy.Audit, nil
}

// exceptionFor returns the first exception that exempts this rule for the
// resource. The wildcards of the exceptions are charged to the rule's
// meter: an error is why the evaluation must stop.
func (run *ruleRun) exceptionFor(exceptions []*policy.Exception, in *matchInput) (string, bool, error) {
	for _, ex := range exceptions {
		if !exceptionReaches(ex.ClusterWide, ex.Metadata.Namespace, run.req, in.namespace) {
			continue
		}
		ok, err := exceptionNames(ex, run.policy, run.rule, run.m)
		if err == nil && ok {
			ok, err = matchResources(&ex.Spec.Match, in, run.m)
		}
		if err != nil {
			return "", false, err
		}
		if !ok {
			continue
		}
		if !ex.Spec.Conditions.IsEmpty() {
			c := run.e.baseContext(run.req)
			c.m = run.m
			tmp := &ruleRun{e: run.e, req: run.req, m: run.m, policy: run.policy, rule: run.rule, ctx: c, obj: run.obj}
			ok, _, err := tmp.checkConditions(ex.Spec.Conditions)
			if err != nil || !ok {
				continue
			}
		}
		name := ex.Metadata.Name
		if ex.Metadata.Namespace != "" {
			name = ex.Metadata.Namespace + "/" + name
		}
		return name, true, nil
	}
	return "", false, nil
}

// exceptionReaches reports whether an exception in namespace exNS may
// exempt the request's resource (whose own namespace is resNS, empty
// for a cluster-scoped one): anywhere when it is cluster-wide,
// otherwise only in its own namespace. A resource without a namespace
// of its own is in the request's namespace, except a Namespace, which
// is in none.
func exceptionReaches(clusterWide bool, exNS string, req *Request, resNS string) bool {
	if clusterWide {
		return true
	}
	if resNS == "" && document.String(req.resource(), "kind") != "Namespace" {
		resNS = req.Namespace
	}
	return exNS != "" && resNS == exNS
}

// exceptionNames reports whether the exception names the rule of the
// policy (its rule names may hold wildcards, charged to m).
func exceptionNames(ex *policy.Exception, p *Policy, r *Rule, m *meter) (bool, error) {
	for _, e := range ex.Spec.Exceptions {
		pn := e.PolicyName
		if p.Raw.Namespaced() {
			if pn != p.Raw.Key() && pn != p.Raw.Metadata.Name {
				continue
			}
		} else if pn != p.Raw.Metadata.Name {
			continue
		}
		for _, rn := range e.RuleNames {
			for _, prefix := range [...]string{"", "autogen-", "autogen-cronjob-"} {
				if ok, err := m.match(prefix+rn, r.Name); ok || err != nil {
					return ok, err
				}
			}
		}
	}
	return false, nil
}

// checkConditions evaluates any / all conditions in Kyverno's order
// (variables.evaluateAnyAllConditionsWithContext): the any block up to its
// first true condition, then the all block up to its first false one, even
// when no any condition held. An error in a condition that is reached ends
// the evaluation with that error, never with false: the caller makes it
// an error result. It returns the message of the first failed condition
// (the all block's, else the any block's).
func (run *ruleRun) checkConditions(c *policy.Conditions) (bool, string, error) {
	if c.IsEmpty() {
		return true, "", nil
	}
	anyOK, anyMsg := true, ""
	if len(c.Any) > 0 {
		anyOK = false
		for i := range c.Any {
			ok, err := run.evalCondition(&c.Any[i])
			if err != nil {
				return false, "", fmt.Errorf("any[%d]: %w", i, err)
			}
			if ok {
				anyOK = true
				break
			}
			if anyMsg == "" {
				anyMsg = run.conditionMessage(&c.Any[i])
			}
		}
	}
	for i := range c.All {
		ok, err := run.evalCondition(&c.All[i])
		if err != nil {
			return false, "", fmt.Errorf("all[%d]: %w", i, err)
		}
		if !ok {
			return false, run.conditionMessage(&c.All[i]), nil
		}
	}
	if !anyOK {
		return false, anyMsg, nil
	}
	return true, "", nil
}

func (run *ruleRun) conditionMessage(c *policy.Condition) string {
	if c.Message == "" {
		return ""
	}
	m, err := run.e.substitute(run.ctx, c.Message, substLenient, run.req.Operation)
	if err != nil {
		return c.Message
	}
	return toText(m)
}

// evalCondition substitutes a condition's key and value and applies its
// operator, as Kyverno's variables.Evaluate does. Substitution is strict:
// a variable naming a missing field, a JMESPath function error (an invalid
// regex, an argument of the wrong type, a division by zero) or an
// expression that does not parse is an error, in preconditions as in deny
// conditions (Kyverno stopped reading them as "" in 1.8). Operators never
// fail on their operands: values they cannot compare make the condition
// false; only an unknown operator is an error.
func (run *ruleRun) evalCondition(c *policy.Condition) (bool, error) {
	key, err := run.e.substitute(run.ctx, c.Key, substStrict, run.req.Operation)
	if err != nil {
		return false, fmt.Errorf("failed to substitute variables in condition key: %w", err)
	}
	value, err := run.e.substitute(run.ctx, c.Value, substStrict, run.req.Operation)
	if err != nil {
		return false, fmt.Errorf("failed to substitute variables in condition value: %w", err)
	}
	return conditions.EvaluateMetered(key, c.Operator, value, run.meter())
}

// podOf returns the pod spec holder of a resource: the Pod itself or the
// pod template of a controller.
func podOf(obj map[string]any) map[string]any {
	switch document.String(obj, "kind") {
	case "Pod":
		return obj
	case "CronJob":
		return document.Map(obj, "spec", "jobTemplate", "spec", "template")
	default:
		if t := document.Map(obj, "spec", "template"); t != nil {
			return t
		}
	}
	return obj
}
