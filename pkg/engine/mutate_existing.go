package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// typeMutateExisting selects the mutate rules with targets, for
// MutateExisting; their responses have the type TypeMutation.
// typeMutateTriggers selects the same rules for MutateExistingTriggers,
// which does not touch their targets.
const (
	typeMutateExisting RuleType = "MutateExisting"
	typeMutateTriggers RuleType = "MutateExistingTriggers"
	// typeGenerateTriggers selects the generate rules for
	// GenerateTriggers.
	typeGenerateTriggers RuleType = "GenerateTriggers"
	// typeImageChecks selects the verifyImages rules Check runs: all but
	// the digest mutations of ImageValidatingPolicies.
	typeImageChecks RuleType = "ImageChecks"
)

// GenerateTriggers reports which of the policy's generate rules the
// request triggers (they match and their preconditions hold), without
// evaluating what they generate: each such rule's response has Background
// set (status skip). The webhook uses it for a DELETE, whose trigger has no
// future to generate from: a synchronized rule's downstream goes with it.
func (e *Engine) GenerateTriggers(ctx context.Context, req *Request, p *Policy, exceptions []*policy.Exception) Response {
	return e.run(e.meterFor(ctx, req), req, p, exceptions, typeGenerateTriggers)
}

// MutateExistingTriggers reports which of the policy's mutate-existing
// rules the request triggers (they match and their preconditions hold),
// without looking for their targets: each such rule's response has
// Background set (status skip), for the caller to queue the work that
// MutateExisting then does (the generator service).
func (e *Engine) MutateExistingTriggers(ctx context.Context, req *Request, p *Policy, exceptions []*policy.Exception) Response {
	return e.run(e.meterFor(ctx, req), req, p, exceptions, typeMutateTriggers)
}

// MutateExisting runs the policy's mutate-existing rules (mutate.targets)
// for a trigger: each rule finds its targets through the engine's
// ResourceLister and patches them, as Kyverno's mutate-existing handler
// does. Each rule response lists, in Targets, what happened to each
// target; the rule's status is error if one target's evaluation failed,
// else pass if one target was patched, else skip. A rule whose targets
// are all missing gives no response. The trigger is not changed.
// Admission's Mutate leaves these rules to the background (it reports
// them skipped).
func (e *Engine) MutateExisting(ctx context.Context, req *Request, p *Policy, exceptions []*policy.Exception) Response {
	resp := e.run(e.meterFor(ctx, req), req, p, exceptions, typeMutateExisting)
	resp.Patched = resp.Resource
	return resp
}

// mutateTargets evaluates a mutate-existing rule on its targets.
func (run *ruleRun) mutateTargets(rr RuleResponse) RuleResponse {
	m := run.rule.Mutation
	for i := range m.Targets {
		objs, err := run.loadTargets(&m.Targets[i])
		if err != nil {
			return run.errorf(rr, "failed to load targets: target[%d]: %v", i, err)
		}
		for _, obj := range objs {
			rr.Targets = append(rr.Targets, run.mutateTarget(&m.Targets[i], obj))
		}
	}
	if len(rr.Targets) == 0 {
		rr.Status = statusNone
		return rr
	}
	rr.Status, rr.Message = StatusSkip, "no target was patched"
	for _, t := range rr.Targets {
		switch t.Status {
		case StatusError:
			rr.Status, rr.Message = StatusError, t.Message
			return rr
		case StatusPass:
			rr.Status, rr.Message = StatusPass, t.Message
		}
	}
	return rr
}

// loadTargets finds the resources one target spec names, its fields
// substituted first: by name when it names one in a namespace (none when
// it is missing), else every resource of the kind that the name,
// namespace (wildcards allowed; none is every namespace) and selector
// select. A namespaced policy's targets are in its own namespace. The
// wildcards of the name and namespace are charged to the work budget: an
// error is why the evaluation must stop.
func (run *ruleRun) loadTargets(t *policy.TargetResource) ([]map[string]any, error) {
	field := func(s string) (string, error) {
		if s == "" {
			return "", nil
		}
		v, err := run.e.substitute(run.ctx, s, substStrict, run.req.Operation)
		if err != nil {
			return "", err
		}
		return toTextOrEmpty(v), nil
	}
	var spec [4]string
	for i, s := range []string{t.APIVersion, t.Kind, t.Namespace, t.Name} {
		v, err := field(s)
		if err != nil {
			return nil, err
		}
		spec[i] = v
	}
	apiVersion, kind, namespace, name := spec[0], spec[1], spec[2], spec[3]
	if run.policy.Raw.Namespaced() {
		namespace = run.policy.Raw.Metadata.Namespace
	}
	ctx := run.callCtx()
	lister := run.e.lister
	if name != "" && namespace != "" && !wildcard.Contains(name) && !wildcard.Contains(namespace) && t.Selector == nil {
		obj, err := lister.GetResource(ctx, apiVersion, kind, namespace, name)
		switch {
		case errors.Is(err, ErrNotFound), errors.Is(err, ErrNotAvailable):
			return nil, nil
		case err != nil:
			return nil, err
		}
		return []map[string]any{obj}, nil
	}
	listNamespace := namespace
	if wildcard.Contains(namespace) {
		listNamespace = ""
	}
	objs, err := lister.ListResources(ctx, apiVersion, kind, listNamespace, t.Selector)
	if err != nil {
		return nil, err
	}
	// The target's namespace and name may come from the request through
	// variables: their wildcards are charged to the rule's budget.
	m := run.meter()
	var out []map[string]any
	for _, o := range objs {
		ns, n := document.String(o, "metadata", "namespace"), document.String(o, "metadata", "name")
		ok := true
		if namespace != "" {
			ok, err = m.match(namespace, ns)
		}
		if ok && err == nil && name != "" {
			ok, err = m.match(name, n)
		}
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// mutateTarget patches one target: the rule's context sees it as
// `target`, then the target's own context entries and preconditions
// decide, then the rule's patches (or foreach) apply to it.
func (run *ruleRun) mutateTarget(t *policy.TargetResource, obj map[string]any) TargetResponse {
	out := TargetResponse{Resource: obj}
	saved := run.ctx
	defer func() { run.ctx = saved }()
	run.ctx = saved.clone()
	run.ctx.set("target", obj)
	if err := run.loadEntries(t.Context); err != nil {
		out.Status, out.Message = StatusError, fmt.Sprintf("failed to load context: %v", err)
		return out
	}
	ok, msg, err := run.conditions(t.Preconditions)
	switch {
	case err != nil:
		out.Status, out.Message = StatusError, fmt.Sprintf("failed to evaluate preconditions: %v", err)
		return out
	case !ok:
		out.Status, out.Message = StatusSkip, "preconditions not met"
		if msg != "" {
			out.Message += "; " + msg
		}
		return out
	}
	m := run.rule.Mutation
	patched := obj
	changed := false
	switch {
	case m.PatchStrategicMerge != nil || m.PatchesJSON6902 != "":
		var skipMsg string
		patched, changed, skipMsg, err = run.applyPatches(obj, m.PatchStrategicMerge, m.PatchesJSON6902)
		if err == nil && !changed && skipMsg != "" {
			out.Status, out.Message = StatusSkip, skipMsg
			return out
		}
	case len(m.ForEach) > 0:
		for i := range m.ForEach {
			var c bool
			if patched, c, err = run.foreachMutate(patched, &m.ForEach[i], 0); err != nil {
				break
			}
			changed = changed || c
		}
	default:
		err = fmt.Errorf("rule %s has no patch", run.rule.Name)
	}
	switch {
	case err != nil:
		out.Status, out.Message = StatusError, fmt.Sprintf("failed to mutate: %v", err)
	case !changed || document.Equal(obj, patched):
		out.Status, out.Message = StatusSkip, "no patches applied"
	default:
		out.Status, out.Patched = StatusPass, patched
		out.Message = mutatedMessage(patched)
	}
	return out
}

// mutatedMessage is Kyverno's message for a patched target.
func mutatedMessage(obj map[string]any) string {
	kind, name := document.String(obj, "kind"), document.String(obj, "metadata", "name")
	if ns := document.String(obj, "metadata", "namespace"); ns != "" {
		return fmt.Sprintf("mutated %s/%s in namespace %s", kind, name, ns)
	}
	return fmt.Sprintf("mutated %s/%s", kind, name)
}
