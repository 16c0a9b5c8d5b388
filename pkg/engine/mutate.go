package engine

import (
	"encoding/json"
	"fmt"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/patch"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// mutate applies the rule's patches to run.obj; on success run.obj holds
// the patched resource.
func (run *ruleRun) mutate(rr RuleResponse) RuleResponse {
	if run.rule.cel != nil {
		return run.mutateCEL(rr)
	}
	m := run.rule.Mutation
	if len(m.Targets) > 0 {
		if run.existing {
			return run.mutateTargets(rr)
		}
		// The rule applies to the request; its targets are patched in the
		// background (the generator service).
		rr.Status, rr.Background = StatusSkip, true
		rr.Message = "mutation of existing resources runs in the generator service"
		return rr
	}
	var (
		obj     = run.obj
		changed bool
		err     error
		skipMsg string
	)
	switch {
	case m.PatchStrategicMerge != nil || m.PatchesJSON6902 != "":
		obj, changed, skipMsg, err = run.applyPatches(obj, m.PatchStrategicMerge, m.PatchesJSON6902)
	case len(m.ForEach) > 0:
		for i := range m.ForEach {
			var c bool
			obj, c, err = run.foreachMutate(obj, &m.ForEach[i], 0)
			if err != nil {
				break
			}
			changed = changed || c
		}
	default:
		return run.errorf(rr, "rule %s has no patch", run.rule.Name)
	}
	if err != nil {
		return run.errorf(rr, "failed to mutate: %v", err)
	}
	// Patches that cancel out (a foreach reordering a list and back)
	// change nothing.
	if changed && document.Equal(run.obj, obj) {
		changed = false
	}
	if !changed {
		rr.Status = StatusSkip
		rr.Message = "no patches applied"
		if skipMsg != "" {
			rr.Message = skipMsg
		}
		return rr
	}
	run.obj = obj
	rr.Status = StatusPass
	rr.Message = "mutated resource"
	return rr
}

// applyPatches substitutes variables in the patches and applies them,
// their work (the anchors, the merge, the JSON patch's encoding) charged
// to the request's budget.
func (run *ruleRun) applyPatches(obj map[string]any, smp any, jsonPatch string) (map[string]any, bool, string, error) {
	op := run.req.Operation
	changed := false
	skipMsg := ""
	if smp != nil {
		p, err := run.e.substitute(run.ctx, smp, substStrict, op)
		if err != nil {
			return obj, false, "", err
		}
		res, err := patch.StrategicMergeMetered(obj, p, run.meter())
		if err != nil {
			return obj, false, "", err
		}
		if res.Skipped {
			skipMsg = res.SkipReason
		} else if res.Changed && !document.Equal(obj, res.Object) {
			obj, changed = res.Object, true
		}
	}
	if jsonPatch != "" {
		p, err := run.e.substitute(run.ctx, jsonPatch, substStrict, op)
		if err != nil {
			return obj, false, "", err
		}
		res, err := patch.JSON6902Metered(obj, toText(p), run.meter())
		if err != nil {
			return obj, false, "", err
		}
		if res.Changed && !document.Equal(obj, res.Object) {
			obj, changed = res.Object, true
		}
	}
	return obj, changed, skipMsg, nil
}

// foreachMutate applies one foreach block to obj, element by element, in
// the block's order; each element sees the resource patched so far.
func (run *ruleRun) foreachMutate(obj map[string]any, fe *policy.ForEachMutation, depth int) (map[string]any, bool, error) {
	if err := run.checkForEachDepth(depth); err != nil {
		return obj, false, err
	}
	saved := run.ctx
	defer func() { run.ctx = saved }()
	run.ctx = saved.clone()
	run.ctx.set("request.object", obj)
	list, err := run.evalList(fe.List)
	if err != nil {
		return obj, false, fmt.Errorf("failed to evaluate list %s: %w", fe.List, err)
	}
	order := make([]int, len(list))
	for i := range order {
		order[i] = i
	}
	// A strategic merge moves the element it names to the front of its
	// list, so foreach applies those patches last element first unless an
	// order is given; JSON patches go in list order.
	reverse := fe.PatchStrategicMerge != nil
	if fe.Order != "" {
		reverse = fe.Order == "Descending"
	}
	if reverse {
		for i, j := 0, len(order)-1; i < j; i, j = i+1, j-1 {
			order[i], order[j] = order[j], order[i]
		}
	}
	changed := false
	for _, idx := range order {
		if err := run.step(1); err != nil {
			return obj, changed, err
		}
		run.ctx = saved.clone()
		run.ctx.set("request.object", obj)
		setElement(run.ctx, list[idx], idx, depth)
		if err := run.loadEntries(fe.Context); err != nil {
			return obj, changed, fmt.Errorf("failed to load context: %w", err)
		}
		ok, _, err := run.conditions(fe.Preconditions)
		if err != nil {
			return obj, changed, err
		}
		if !ok {
			continue
		}
		if len(fe.ForEach) > 0 {
			var nested []policy.ForEachMutation
			if err := json.Unmarshal(fe.ForEach, &nested); err != nil {
				return obj, changed, fmt.Errorf("invalid nested foreach: %w", err)
			}
			for j := range nested {
				var c bool
				obj, c, err = run.foreachMutate(obj, &nested[j], depth+1)
				if err != nil {
					return obj, changed, err
				}
				changed = changed || c
			}
			continue
		}
		var c bool
		obj, c, _, err = run.applyPatches(obj, fe.PatchStrategicMerge, fe.PatchesJSON6902)
		if err != nil {
			return obj, changed, err
		}
		changed = changed || c
	}
	return obj, changed, nil
}
