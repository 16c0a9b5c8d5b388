package engine

import (
	"fmt"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// generate computes the resources the rule would create. Clone sources
// come from the context loader's ConfigMap-like lookup, which the CLI does
// not have: clone rules report the target they would write.
func (run *ruleRun) generate(rr RuleResponse) RuleResponse {
	g := run.rule.Generation
	if len(g.ForEach) > 0 {
		for i := range g.ForEach {
			fe := &g.ForEach[i]
			list, err := run.evalList(fe.List)
			if err != nil {
				return run.errorf(rr, "failed to evaluate list %s: %v", fe.List, err)
			}
			saved := run.ctx
			for idx, el := range list {
				run.ctx = saved.clone()
				setElement(run.ctx, el, idx, 0)
				if err := run.loadEntries(fe.Context); err != nil {
					run.ctx = saved
					return run.errorf(rr, "failed to load context: %v", err)
				}
				ok, _, err := run.checkConditions(fe.Preconditions)
				if err != nil {
					run.ctx = saved
					return run.errorf(rr, "failed to evaluate preconditions: %v", err)
				}
				if !ok {
					continue
				}
				obj, err := run.generatedObject(fe.APIVersion, fe.Kind, fe.Name, fe.Namespace, fe.Data)
				if err != nil {
					run.ctx = saved
					return run.errorf(rr, "%v", err)
				}
				rr.Generated = append(rr.Generated, obj)
			}
			run.ctx = saved
		}
	} else {
		obj, err := run.generatedObject(g.APIVersion, g.Kind, g.Name, g.Namespace, g.Data)
		if err != nil {
			return run.errorf(rr, "%v", err)
		}
		rr.Generated = append(rr.Generated, obj)
	}
	rr.Status = StatusPass
	rr.Message = "created resource"
	return rr
}

func (run *ruleRun) generatedObject(apiVersion, kind, name, namespace string, data any) (map[string]any, error) {
	op := run.req.Operation
	doc := map[string]any{"apiVersion": apiVersion, "kind": kind, "name": name, "namespace": namespace}
	if data != nil {
		doc["data"] = data
	}
	sub, err := run.e.substitute(run.ctx, doc, substStrict, op)
	if err != nil {
		return nil, fmt.Errorf("variable substitution failed: %w", err)
	}
	m, _ := sub.(map[string]any)
	obj := map[string]any{}
	if d, ok := m["data"].(map[string]any); ok {
		obj = document.DeepCopyMap(d)
	}
	obj["apiVersion"] = m["apiVersion"]
	obj["kind"] = m["kind"]
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["name"] = m["name"]
	if ns := toTextOrEmpty(m["namespace"]); ns != "" {
		meta["namespace"] = ns
	}
	obj["metadata"] = meta
	return obj, nil
}

var _ = policy.Generation{}
