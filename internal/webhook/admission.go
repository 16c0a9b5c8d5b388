package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/rs/zerolog"
	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	evt "github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/kyvernometrics"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// policyScope is which policies an admission endpoint evaluates. The
// registrar points each webhook at the endpoint of the policies it was
// registered for: the shared webhooks at the cluster policies', a
// tenant's webhook at its namespace's. The API server calls every
// webhook whose rules match, so a request in a tenant's namespace may go
// through both; each call evaluates its own policies, and every policy
// is evaluated, its mutation applied and its results and work published
// once per request (docs/webhook.md, "A namespaced policy stays in its
// namespace").
type policyScope uint8

const (
	// scopeAll is every policy (PathMutate, PathValidate: files mode, a
	// configuration written by hand with one webhook).
	scopeAll policyScope = iota
	// scopeCluster is the cluster policies: ClusterPolicy and the
	// cluster CEL kinds (PathMutateCluster, PathValidateCluster).
	scopeCluster
	// scopeNamespace is the namespaced policies of the request's
	// namespace (PathMutateNamespaced, PathValidateNamespaced).
	scopeNamespace
)

// covers reports whether the scope takes in p for a request in namespace
// ns ("" for a cluster-scoped resource).
func (sc policyScope) covers(p *engine.Policy, ns string) bool {
	switch sc {
	case scopeCluster:
		return !p.Raw.Namespaced()
	case scopeNamespace:
		return p.Raw.Namespaced() && ns != "" && p.Raw.Metadata.Namespace == ns
	}
	return true
}

// evaluation is what the admission endpoints share for one request: the
// policy set, the scope of the endpoint and the engine request.
type evaluation struct {
	rv    *review
	set   *engine.Set
	scope policyScope
	req   *engine.Request
	now   time.Time
	// rules holds the rule results of the request's result events.
	rules evt.RuleArena
}

// evaluate prepares one admission request for the policies of scope: the
// current policy set and the namespace labels. Failures are internal
// errors.
func (s *Server) evaluate(ctx context.Context, rv *review, scope policyScope) (*evaluation, error) {
	set, err := s.policies.Set(ctx)
	if err != nil {
		return nil, httpError(ErrInternal, err, "policies unavailable")
	}
	var nsLabels map[string]string
	if ns := rv.req.Namespace; ns != "" && rv.req.Kind.Kind != "Namespace" {
		if nsLabels, err = s.namespaces.NamespaceLabels(ctx, ns); err != nil {
			return nil, httpError(ErrInternal, err, "labels of namespace %s", ns)
		}
	}
	req := engineRequest(rv, nsLabels)
	if no, ok := s.namespaces.(NamespaceObjects); ok && rv.req.Namespace != "" && rv.req.Kind.Kind != "Namespace" && set.HasCEL() {
		if req.NamespaceObject, err = no.NamespaceObject(ctx, rv.req.Namespace); err != nil {
			return nil, httpError(ErrInternal, err, "namespace %s", rv.req.Namespace)
		}
	}
	if sub := rv.req.SubResource; sub != "" && s.kinds != nil {
		r := rv.req.Resource
		k, err := s.kinds.KindFor(schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource})
		if err != nil {
			return nil, httpError(ErrInternal, err, "kind of resource %s", r.Resource)
		}
		req.ParentKind = engine.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
	}
	if s.roles != nil {
		req.UserInfo.Roles, req.UserInfo.ClusterRoles = s.roles.Roles(rv.req.UserInfo, rv.req.Namespace)
	}
	return &evaluation{rv: rv, set: set, scope: scope, req: req, now: s.now()}, nil
}

// takesPart reports whether p takes part in this evaluation: it is in
// the endpoint's scope and takes part in admission.
func (ev *evaluation) takesPart(p *engine.Policy) bool {
	return ev.scope.covers(p, ev.rv.req.Namespace) && admits(p)
}

// terminating reports an UPDATE of an object that is being deleted:
// admitted untouched, so that finalizers can always be removed.
func terminating(rv *review) bool {
	if rv.req.Operation != admissionv1.Update {
		return false
	}
	_, ok := document.Get(rv.oldObject, "metadata", "deletionTimestamp")
	if !ok {
		_, ok = document.Get(rv.object, "metadata", "deletionTimestamp")
	}
	return ok
}

// admits reports whether the policy takes part in admission.
func admits(p *engine.Policy) bool { return p.Raw.Spec.AdmissionEnabled() }

// failClosed reports whether the policy's failurePolicy is Fail (the
// default).
func failClosed(p *engine.Policy) bool { return p.Raw.Spec.FailurePolicy != "Ignore" }

// reported reports whether a rule outcome is shown to the user (as a
// denial or a warning): not pass, not skip.
func reported(st engine.Status) bool {
	return st != engine.StatusPass && st != engine.StatusSkip
}

// mutate is the mutate endpoint of the policies of scope.
func (s *Server) mutate(scope policyScope) admissionFunc {
	return func(ctx context.Context, rv *review) (decision, error) { return s.mutateIn(ctx, rv, scope) }
}

// mutateIn runs every mutate policy of scope in order, each on the
// previous one's result, and answers with a JSONPatch from the original
// object to the final one.
func (s *Server) mutateIn(ctx context.Context, rv *review, scope policyScope) (decision, error) {
	if rv.object == nil || terminating(rv) || s.cfg.Shadow {
		// A shadow mutates nothing (the registrar registers no mutating
		// webhook for it: its validating webhook sees what the running
		// admission controller's mutations made).
		return allow(nil), nil
	}
	ev, err := s.evaluate(ctx, rv, scope)
	if err != nil {
		return decision{}, err
	}
	var warnings []string
	found := s.newFindings()
	cur := rv.object
	for _, p := range ev.set.Policies {
		if !ev.takesPart(p) || !p.HasRules(engine.TypeMutation) {
			continue
		}
		ev.req.Object = cur
		resp := s.engine.Mutate(ctx, ev.req, p, ev.set.Exceptions)
		s.recordResults(ev, resp)
		var failed, messages []string
		for _, rr := range resp.Rules {
			if reported(rr.Status) {
				failed = append(failed, rr.Name)
				messages = append(messages, rr.Message)
				warnings = append(warnings, ruleWarning(p, rr))
			}
		}
		if len(failed) > 0 {
			if failClosed(p) {
				logFrom(ctx).Info().Str(logkey.Policy, p.Raw.Key()).Strs(logkey.Rules, failed).Strs(logkey.Messages, messages).Msg("mutation failed, request denied")
				found.rules(p, resp, evt.ActionDeny)
				// Kyverno's wording for a mutation that blocks.
				return found.into(deny(fmt.Sprintf("mutation policy %s error: failed to apply policy %s rules %v", p.Name(), p.Name(), failed), nil)), nil
			}
			// failurePolicy Ignore: the policy is skipped as a whole.
			found.rules(p, resp, evt.ActionWarn)
			logFrom(ctx).Warn().Str(logkey.Policy, p.Raw.Key()).Strs(logkey.Rules, failed).Strs(logkey.Messages, messages).Msg("mutation failed, policy skipped")
			continue
		}
		if resp.Patched != nil {
			found.applied(p, resp)
			cur = resp.Patched
		}
	}
	// Images are verified and pinned to their digests after the
	// mutations, as Kyverno's mutating webhook does.
	blocked := map[string]map[string]string{}
	for _, p := range ev.set.Policies {
		if !ev.takesPart(p) || !p.HasRules(engine.TypeImageVerify) {
			continue
		}
		ev.req.Object = cur
		resp := s.engine.VerifyImages(ctx, ev.req, p, ev.set.Exceptions)
		s.recordResults(ev, resp)
		if rules := blockingRules(p, resp); rules != nil {
			blocked[p.Name()] = rules
			found.rules(p, resp, evt.ActionDeny)
			continue
		}
		for _, rr := range resp.Rules {
			if reported(rr.Status) {
				warnings = append(warnings, ruleWarning(p, rr))
			}
		}
		found.rules(p, resp, evt.ActionWarn)
		if resp.Patched != nil {
			found.applied(p, resp)
			cur = resp.Patched
		}
	}
	if len(blocked) > 0 {
		msg, err := blockedMessage(rv.resource(), blocked)
		if err != nil {
			return decision{}, httpError(ErrInternal, err, "format denial")
		}
		return found.into(deny(msg, nil)), nil
	}
	warnings = s.capWarnings(warnings)
	if document.Equal(rv.object, cur) {
		return found.into(allow(warnings)), nil
	}
	patch, err := jsonPatch(rv.object, cur)
	if err != nil {
		return decision{}, httpError(ErrInternal, err, "compute patch")
	}
	d := allow(warnings)
	if len(patch) > 0 {
		pt := admissionv1.PatchTypeJSONPatch
		d.resp.Patch, d.resp.PatchType, d.outcome = patch, &pt, OutcomePatched
	}
	return found.into(d), nil
}

// jsonPatch computes the RFC 6902 patch from one untyped object to
// another. Both sides are encoded from the same untyped form, so numbers
// that float64 cannot hold exactly compare equal and are left alone.
func jsonPatch(from, to map[string]any) ([]byte, error) {
	a, err := json.Marshal(from)
	if err != nil {
		return nil, err
	}
	b, err := json.Marshal(to)
	if err != nil {
		return nil, err
	}
	ops, err := jsonpatch.CreatePatch(a, b)
	if err != nil {
		return nil, err
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

// verdict is what one validation step decides.
type verdict struct {
	// denial, when set, denies the request with this message.
	denial   string
	warnings []string
}

// validateStep is one link of the validation chain; a step that denies
// ends the chain, warnings are collected from every step that ran.
type validateStep func(ctx context.Context, ev *evaluation, st *validateState) (verdict, error)

// validateState carries what the steps pass on: the results to publish
// once the request is admitted.
type validateState struct {
	results []ResultEvent
	// found collects the findings for the admission log (nil: off).
	found *findings
}

// validate is the validate endpoint of the policies of scope.
func (s *Server) validate(scope policyScope) admissionFunc {
	return func(ctx context.Context, rv *review) (decision, error) { return s.validateIn(ctx, rv, scope) }
}

// validateIn runs the validation chain (validate rules, then generate
// triggers) of the policies of scope and, when the request is admitted,
// publishes the results.
func (s *Server) validateIn(ctx context.Context, rv *review, scope policyScope) (decision, error) {
	if terminating(rv) {
		return allow(nil), nil
	}
	ev, err := s.evaluate(ctx, rv, scope)
	if err != nil {
		return decision{}, err
	}
	var (
		st       validateState
		warnings []string
	)
	if s.cfg.Shadow {
		return s.shadowValidate(ctx, ev, &st)
	}
	st.found = s.newFindings()
	for _, step := range []validateStep{s.validateRules, s.triggerGenerate} {
		v, err := step(ctx, ev, &st)
		if err != nil {
			return decision{}, err
		}
		if v.denial != "" {
			// As Kyverno: a denial carries the blocking policies only.
			return st.found.into(deny(v.denial, nil)), nil
		}
		warnings = append(warnings, v.warnings...)
	}
	if publishResults(rv) && len(st.results) > 0 {
		s.results.Publish(ctx, st.results)
	}
	return st.found.into(allow(s.capWarnings(warnings))), nil
}

// shadowValidate is validateIn in shadow mode: the validate rules run and
// their results are published, a denial's included, and the request is
// allowed as it came, with no warning and no work queued. What the
// answer would have been is counted (verdict_webhook_shadow_decisions_total).
func (s *Server) shadowValidate(ctx context.Context, ev *evaluation, st *validateState) (decision, error) {
	v, err := s.validateRules(ctx, ev, st)
	if err != nil {
		return decision{}, err
	}
	would := OutcomeAllowed
	switch {
	case v.denial != "":
		would = OutcomeDenied
	case len(v.warnings) > 0:
		would = OutcomeWarned
	}
	s.metrics.shadow.WithLabelValues(string(would)).Inc()
	if publishResults(ev.rv) && len(st.results) > 0 {
		s.results.Publish(ctx, st.results)
	}
	return allow(nil), nil
}

// publishResults reports whether the request's results go to the result
// sink: admitted creates and updates of a resource itself, not dry runs.
func publishResults(rv *review) bool {
	op := rv.req.Operation
	return (op == admissionv1.Create || op == admissionv1.Update) && rv.req.SubResource == "" && !rv.dryRun()
}

// validateRules runs the validate rules of every policy in the
// evaluation's scope. An Enforce rule that fails, or a rule that errors
// under failurePolicy Fail, blocks the request; every other fail or error
// is a warning.
func (s *Server) validateRules(ctx context.Context, ev *evaluation, st *validateState) (verdict, error) {
	var (
		v       verdict
		blocked = map[string]map[string]string{}
		// vpolDenials are the ValidatingPolicies' reasons, in Kyverno's
		// words for them ("Policy <name> failed: <message>").
		vpolDenials []string
		// deniedBy names the blocking policies, for the request's log
		// line (one line per request, not one per policy).
		deniedBy []string
	)
	// A result per policy at most: one allocation, not one per doubling
	// (a ResultEvent is a few hundred bytes).
	st.results = slices.Grow(st.results, len(ev.set.Policies))
	for _, p := range ev.set.Policies {
		if !ev.takesPart(p) {
			continue
		}
		// Validate rules, then the images again, on what the mutating
		// webhook admitted: verified (from the cache when it verified
		// them), then verifyDigest and required.
		resp := s.engine.Check(ctx, ev.req, p, ev.set.Exceptions)
		if len(resp.Rules) == 0 {
			continue
		}
		s.recordResults(ev, resp)
		if actions, ok := celActions(p); ok {
			denials, warnings := vpolOutcome(p, actions, resp)
			for _, m := range denials {
				st.found.add(p, "", evt.ActionDeny, m)
			}
			for _, m := range warnings {
				st.found.add(p, "", evt.ActionWarn, m)
			}
			if len(denials) > 0 {
				vpolDenials = append(vpolDenials, denials...)
				deniedBy = append(deniedBy, p.Raw.Key())
				if s.cfg.Shadow {
					// Allowed all the same: the results are the object's.
					st.results = append(st.results, resultEvent(ev, p, resp))
				}
				continue
			}
			v.warnings = append(v.warnings, warnings...)
			st.results = append(st.results, resultEvent(ev, p, resp))
			continue
		}
		if rules := blockingRules(p, resp); rules != nil {
			blocked[p.Name()] = rules
			deniedBy = append(deniedBy, p.Raw.Key())
			st.found.rules(p, resp, evt.ActionDeny)
			if s.cfg.Shadow {
				st.results = append(st.results, resultEvent(ev, p, resp))
			}
			continue
		}
		for _, rr := range resp.Rules {
			if reported(rr.Status) {
				v.warnings = append(v.warnings, ruleWarning(p, rr))
			}
		}
		st.found.rules(p, resp, evt.ActionWarn)
		st.results = append(st.results, resultEvent(ev, p, resp))
	}
	if len(deniedBy) > 0 {
		logFrom(ctx).UpdateContext(func(c zerolog.Context) zerolog.Context { return c.Strs(logkey.DeniedBy, deniedBy) })
	}
	if len(blocked) > 0 {
		msg, err := blockedMessage(ev.rv.resource(), blocked)
		if err != nil {
			return verdict{}, httpError(ErrInternal, err, "format denial")
		}
		v.denial = msg
	}
	if len(vpolDenials) > 0 {
		if v.denial != "" {
			v.denial += "\n"
		}
		v.denial += strings.Join(vpolDenials, "; ")
	}
	return v, nil
}

// blockingRules returns the messages of the reported rules of a classic
// policy's response, by rule, when one of them blocks the request (a
// failure of an Enforce rule, an error under failurePolicy Fail); nil
// when none blocks.
func blockingRules(p *engine.Policy, resp engine.Response) map[string]string {
	blocks := false
	for _, rr := range resp.Rules {
		switch {
		case rr.Status == engine.StatusFail && rr.Enforce,
			rr.Status == engine.StatusError && failClosed(p):
			blocks = true
		}
	}
	if !blocks {
		return nil
	}
	rules := map[string]string{}
	for _, rr := range resp.Rules {
		if reported(rr.Status) {
			rules[rr.Name] = rr.Message
		}
	}
	return rules
}

// celActions are the validation actions of a ValidatingPolicy or an
// ImageValidatingPolicy (Deny when it gives none); ok is false for the
// other kinds.
func celActions(p *engine.Policy) (actions []string, ok bool) {
	switch {
	case p.Raw.VPol != nil:
		return p.Raw.VPol.ValidationActions, true
	case p.Raw.IVPol != nil:
		return p.Raw.IVPol.Actions(), true
	}
	return nil, false
}

// vpolOutcome is what the results of a ValidatingPolicy or an
// ImageValidatingPolicy do to a request, as Kyverno's handlers for them
// decide: with Deny among its actions, a failure or an error denies it;
// with Warn, it is a warning; "Policy <name> failed: <message>" (or
// "error:") either way. Audit only reports.
func vpolOutcome(p *engine.Policy, actions []string, resp engine.Response) (denials, warnings []string) {
	deny := slices.Contains(actions, "Deny")
	warn := slices.Contains(actions, "Warn")
	for _, rr := range resp.Rules {
		var msg string
		switch rr.Status {
		case engine.StatusFail:
			msg = fmt.Sprintf("Policy %s failed: %s", p.Name(), rr.Message)
		case engine.StatusError:
			msg = fmt.Sprintf("Policy %s error: %s", p.Name(), rr.Message)
		default:
			continue
		}
		if deny {
			denials = append(denials, msg)
		}
		if warn {
			warnings = append(warnings, msg)
		}
	}
	return denials, warnings
}

// triggerGenerate finds the generate rules (of the policies in the
// evaluation's scope) the request triggers and publishes their work
// before the answer. When the work sink does not acknowledge in time,
// Config.OnWorkPublishFailure decides.
func (s *Server) triggerGenerate(ctx context.Context, ev *evaluation, _ *validateState) (verdict, error) {
	var v verdict
	if ev.rv.dryRun() {
		return v, nil
	}
	var items []WorkItem
	for _, p := range ev.set.Policies {
		if !ev.takesPart(p) {
			continue
		}
		if p.HasRules(engine.TypeGeneration) && ev.req.Operation == engine.OpDelete {
			// A deleted trigger generates nothing more; what a
			// synchronized rule made for it goes with it. A
			// GeneratingPolicy that does not select deletes is asked
			// whether the object, as it was stored, was its trigger.
			req := ev.req
			if p.Raw.GPol != nil && !p.Rules[0].SelectsOperation(engine.OpDelete) {
				req = ev.req.Before()
			}
			var resp engine.Response
			if req != nil {
				resp = s.engine.GenerateTriggers(ctx, req, p, ev.set.Exceptions)
			}
			for _, rr := range resp.Rules {
				if r := p.Rule(rr.Name); rr.Background && r != nil && r.Generation.Synchronize {
					it := workItem(ev, p, rr, evt.WorkGenerate)
					it.Action = evt.WorkDeleteDownstream
					items = append(items, it)
				}
			}
		} else if p.HasRules(engine.TypeGeneration) && p.Raw.GPol != nil {
			// A GeneratingPolicy's generation reads the cluster: the
			// webhook only asks whether the request triggers it (its
			// exceptions and match conditions), the generator generates.
			resp := s.engine.GenerateTriggers(ctx, ev.req, p, ev.set.Exceptions)
			triggered := false
			for _, rr := range resp.Rules {
				switch {
				case rr.Background:
					items = append(items, workItem(ev, p, rr, evt.WorkGenerate))
					triggered = true
				case rr.Status == engine.StatusError:
					v.warnings = append(v.warnings, ruleWarning(p, rr))
				}
			}
			if r := p.Rules[0]; !triggered && ev.req.Operation == engine.OpUpdate && r.Generation.Synchronize && r.SelectsOperation(engine.OpUpdate) {
				// A trigger changed so that it no longer triggers a
				// synchronized GeneratingPolicy: if it did before, the
				// generator evaluates it again and deletes what the
				// policy made for it.
				if before := ev.req.Before(); before != nil {
					for _, rr := range s.engine.GenerateTriggers(ctx, before, p, ev.set.Exceptions).Rules {
						if rr.Background {
							items = append(items, workItem(ev, p, rr, evt.WorkGenerate))
						}
					}
				}
			}
		} else if p.HasRules(engine.TypeGeneration) {
			resp := s.engine.Generate(ctx, ev.req, p, ev.set.Exceptions)
			s.recordResults(ev, resp)
			for _, rr := range resp.Rules {
				switch rr.Status {
				case engine.StatusPass:
					items = append(items, workItem(ev, p, rr, evt.WorkGenerate))
				case engine.StatusError:
					v.warnings = append(v.warnings, ruleWarning(p, rr))
				}
			}
		}
		if hasMutateExisting(p) {
			// Mutate-existing rules the request triggers: their targets
			// are patched by the generator.
			resp := s.engine.MutateExistingTriggers(ctx, ev.req, p, ev.set.Exceptions)
			for _, rr := range resp.Rules {
				switch {
				case rr.Background:
					items = append(items, workItem(ev, p, rr, evt.WorkMutate))
				case rr.Status == engine.StatusError:
					v.warnings = append(v.warnings, ruleWarning(p, rr))
				}
			}
		}
	}
	if len(items) == 0 {
		return v, nil
	}
	// With mutual TLS the caller is the API server, and the requester
	// its word; without, anyone may have written it (the generator
	// decides what to do with it).
	for i := range items {
		items[i].RequesterVerified = s.clientCAs != nil
	}
	// The evaluation is done: waiting for the acknowledgements takes no
	// CPU, and may take seconds while a stream elects a new leader.
	releaseSlot(ctx)
	pctx, cancel := context.WithTimeout(ctx, workPublishBudget(ctx, s.cfg.WorkPublishTimeout))
	defer cancel()
	for _, it := range items {
		err := s.work.Publish(pctx, it)
		if err == nil {
			s.metrics.workItems.Inc()
			continue
		}
		reason := reasonError
		switch {
		case errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled):
			reason = reasonTimeout
		case errors.Is(err, queue.ErrStreamFull):
			reason = reasonStreamFull
		}
		s.metrics.workFailures.WithLabelValues(reason).Inc()
		logFrom(ctx).Error().Err(err).Str(logkey.Policy, it.Policy.Key).Str(logkey.Rule, it.Rule).Str(logkey.Reason, reason).Msg("generate work not published")
		if it.Action == evt.WorkDeleteDownstream {
			// A delete is never refused for its downstream's sake: with
			// JetStream down, Namespaces must still go (the cluster heals
			// through deletes). What the rule made for the trigger stays.
			v.warnings = append(v.warnings, fmt.Sprintf("policy %s.%s: the removal of what it generated for this object could not be queued; it stays", it.Policy.Key, it.Rule))
			continue
		}
		if s.cfg.OnWorkPublishFailure == WorkFailureDeny {
			v.denial = fmt.Sprintf("generate rule %s of policy %s could not be queued: %v", it.Rule, it.Policy.Key, err)
			return v, nil
		}
		v.warnings = append(v.warnings, fmt.Sprintf("policy %s.%s: generate work could not be queued; background reconciliation will apply it", it.Policy.Key, it.Rule))
	}
	return v, nil
}

// answerMargin is the time kept, out of a request's deadline, for the
// answer to reach the API server after the generate work is published
// (or given up on): the API server's own clock started before ours.
const answerMargin = time.Second

// workPublishBudget is how long the generate work of a request may wait
// for JetStream: max, cut so that the answer (a denial, under
// OnWorkPublishFailure deny) still reaches the API server before the
// request's deadline rather than the API server giving up and applying
// the failurePolicy.
func workPublishBudget(ctx context.Context, max time.Duration) time.Duration {
	if dl, ok := ctx.Deadline(); ok {
		if left := time.Until(dl) - answerMargin; left < max {
			return left
		}
	}
	return max
}

// recordResults records the rule results of one engine call under
// Kyverno's metric names, when they are on (Config.KyvernoMetrics).
func (s *Server) recordResults(ev *evaluation, resp engine.Response) {
	if s.metrics.kyverno == nil || len(resp.Rules) == 0 {
		return
	}
	ref := ev.rv.ref()
	s.metrics.kyverno.Results(kyvernometrics.Evaluation{
		Cause: kyvernometrics.AdmissionRequest, Operation: string(ev.rv.req.Operation), DryRun: ev.rv.dryRun(),
		Kind: ref.Kind, Namespace: ref.Namespace,
	}, resp)
}

func policyRef(p *engine.Policy) PolicyRef { return evt.PolicyRefOf(p) }

func resultEvent(ev *evaluation, p *engine.Policy, resp engine.Response) ResultEvent {
	r := ev.rules.NewResult(ev.rv.ref(), p, resp, ev.now)
	r.Admission = true
	r.RequestUID = string(ev.rv.req.UID)
	return r
}

// hasMutateExisting reports whether the policy has mutate rules with
// targets (a MutatingPolicy with mutateExisting included).
func hasMutateExisting(p *engine.Policy) bool {
	for _, r := range p.Rules {
		if r.MutatesExisting() {
			return true
		}
	}
	return false
}

func workItem(ev *evaluation, p *engine.Policy, rr engine.RuleResponse, kind queue.WorkKind) WorkItem {
	targets := make([]ResourceRef, 0, len(rr.Generated))
	for _, g := range rr.Generated {
		targets = append(targets, ResourceRef{
			APIVersion: document.String(g, "apiVersion"),
			Kind:       document.String(g, "kind"),
			Namespace:  document.String(g, "metadata", "namespace"),
			Name:       document.String(g, "metadata", "name"),
		})
	}
	return WorkItem{
		Kind:       kind,
		Policy:     policyRef(p),
		Rule:       rr.Name,
		Trigger:    ev.rv.ref(),
		Operation:  string(ev.rv.req.Operation),
		UserInfo:   ev.req.UserInfo,
		Targets:    targets,
		RequestUID: string(ev.rv.req.UID),
		Timestamp:  ev.now,
	}
}

// triggerLister stands in for the cluster when generate rules clone: the
// webhook only needs to know that a rule triggers; the generator reads the
// real sources. A clone source is a placeholder, a cloneList selects
// nothing.
type triggerLister struct{}

func (triggerLister) GetResource(_ context.Context, apiVersion, kind, namespace, name string) (map[string]any, error) {
	return map[string]any{
		"apiVersion": apiVersion,
		"kind":       kind,
		"metadata":   map[string]any{"name": name, "namespace": namespace},
	}, nil
}

func (triggerLister) ListResources(context.Context, string, string, string, *policy.LabelSelector) ([]map[string]any, error) {
	return nil, nil
}
