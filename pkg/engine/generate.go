package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// ResourceLister finds existing resources, for generate rules that clone
// and mutate-existing rules' targets. The CLI serves it from the test's
// files, the services from the cluster. ListResources lists every
// namespace for an empty namespace, as the Kubernetes API does. It
// returns ErrNotAvailable when it has no source at all.
type ResourceLister interface {
	GetResource(ctx context.Context, apiVersion, kind, namespace, name string) (map[string]any, error)
	ListResources(ctx context.Context, apiVersion, kind, namespace string, selector *policy.LabelSelector) ([]map[string]any, error)
}

// ErrNotFound is returned by a ResourceLister for a missing resource.
var ErrNotFound = errors.New("resource not found")

// WithResourceLister sets where generate rules find the resources they
// clone.
func WithResourceLister(l ResourceLister) Option {
	return func(e *Engine) error {
		if l == nil {
			return fmt.Errorf("%w: nil resource lister", ErrInvalidOption)
		}
		e.lister = confinedLister{l}
		return nil
	}
}

// WithContextResources sets where context reads of resources (CEL's
// resource.Get and resource.List, validate.cel params) find them, when
// that is not the resource lister: a webhook only decides whether a
// generate rule triggers, so its resource lister stands in for the
// cluster, while its policies' reads must see the cluster itself. By
// default context reads use the resource lister.
func WithContextResources(l ResourceLister) Option {
	return func(e *Engine) error {
		if l == nil {
			return fmt.Errorf("%w: nil context resource lister", ErrInvalidOption)
		}
		e.reader = confinedLister{l}
		return nil
	}
}

// target is what one generate entry writes.
type target struct {
	apiVersion, kind, name, namespace string
	data                              any
	clone                             *policy.CloneFrom
	cloneList                         *policy.CloneList
}

// generate computes the resources the rule would create: from data, or
// copied from the resources it clones.
func (run *ruleRun) generate(rr RuleResponse) RuleResponse {
	g := run.rule.Generation
	if run.triggersOnly {
		if run.rule.cel != nil && !run.gpolTriggers(&rr) {
			return rr
		}
		rr.Status, rr.Background = StatusSkip, true
		rr.Message = "generation runs in the generator service"
		return rr
	}
	if run.rule.cel != nil {
		return run.generateCEL(rr)
	}
	if len(g.ForEach) == 0 {
		objs, err := run.generateTarget(target{g.APIVersion, g.Kind, g.Name, g.Namespace, g.Data, g.Clone, g.CloneList})
		if err != nil {
			return run.generateError(rr, err)
		}
		rr.Generated = append(rr.Generated, objs...)
	}
	for i := range g.ForEach {
		fe := &g.ForEach[i]
		list, err := run.evalList(fe.List)
		if err != nil {
			return run.errorf(rr, "failed to evaluate list %s: %v", fe.List, err)
		}
		saved := run.ctx
		for idx, el := range list {
			if err := run.step(1); err != nil {
				run.ctx = saved
				return run.errorf(rr, "%v", err)
			}
			run.ctx = saved.clone()
			setElement(run.ctx, el, idx, 0)
			if err := run.loadEntries(fe.Context); err != nil {
				run.ctx = saved
				return run.errorf(rr, "failed to load context: %v", err)
			}
			ok, _, err := run.conditions(fe.Preconditions)
			if err != nil {
				run.ctx = saved
				return run.errorf(rr, "failed to evaluate preconditions: %v", err)
			}
			if !ok {
				continue
			}
			objs, err := run.generateTarget(target{fe.APIVersion, fe.Kind, fe.Name, fe.Namespace, fe.Data, fe.Clone, fe.CloneList})
			if err != nil {
				run.ctx = saved
				return run.generateError(rr, err)
			}
			rr.Generated = append(rr.Generated, objs...)
		}
		run.ctx = saved
	}
	rr.Status = StatusPass
	rr.Message = "created resource"
	if len(rr.Generated) != 1 {
		rr.Message = fmt.Sprintf("created %d resources", len(rr.Generated))
	}
	return rr
}

func (run *ruleRun) generateError(rr RuleResponse, err error) RuleResponse {
	if errors.Is(err, ErrNotAvailable) {
		rr.Status = StatusSkip
		rr.Message = "the resource to clone is not available: " + err.Error()
		return rr
	}
	return run.errorf(rr, "%v", err)
}

func (run *ruleRun) generateTarget(t target) ([]map[string]any, error) {
	doc := map[string]any{"apiVersion": t.apiVersion, "kind": t.kind, "name": t.name, "namespace": t.namespace}
	if t.data != nil {
		doc["data"] = t.data
	}
	if t.clone != nil {
		doc["cloneName"], doc["cloneNamespace"] = t.clone.Name, t.clone.Namespace
	}
	if t.cloneList != nil {
		doc["cloneListNamespace"] = t.cloneList.Namespace
	}
	sub, err := run.e.substitute(run.ctx, doc, substStrict, run.req.Operation)
	if err != nil {
		return nil, fmt.Errorf("variable substitution failed: %w", err)
	}
	m, _ := sub.(map[string]any)
	name, namespace := toTextOrEmpty(m["name"]), toTextOrEmpty(m["namespace"])
	apiVersion, kind := toTextOrEmpty(m["apiVersion"]), toTextOrEmpty(m["kind"])
	ctx := run.callCtx()
	switch {
	case t.clone != nil && t.clone.Name != "":
		src, err := run.e.lister.GetResource(ctx, apiVersion, kind, toTextOrEmpty(m["cloneNamespace"]), toTextOrEmpty(m["cloneName"]))
		if err != nil {
			return nil, fmt.Errorf("clone source %s %s/%s: %w", kind, toTextOrEmpty(m["cloneNamespace"]), toTextOrEmpty(m["cloneName"]), err)
		}
		return []map[string]any{cloned(src, name, namespace)}, nil
	case t.cloneList != nil:
		var out []map[string]any
		for _, k := range t.cloneList.Kinds {
			av, kd := policy.SplitKindRef(k)
			srcs, err := run.e.lister.ListResources(ctx, av, kd, toTextOrEmpty(m["cloneListNamespace"]), t.cloneList.Selector)
			if err != nil {
				return nil, fmt.Errorf("clone list %s in %s: %w", k, toTextOrEmpty(m["cloneListNamespace"]), err)
			}
			for _, src := range srcs {
				out = append(out, cloned(src, document.String(src, "metadata", "name"), namespace))
			}
		}
		return out, nil
	}
	obj := map[string]any{}
	if d, ok := m["data"].(map[string]any); ok {
		obj = document.DeepCopyMap(d)
	}
	obj["apiVersion"], obj["kind"] = apiVersion, kind
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["name"] = name
	if namespace != "" {
		meta["namespace"] = namespace
	}
	obj["metadata"] = meta
	return []map[string]any{obj}, nil
}

// cloned copies a source resource under a new name and namespace, without
// the fields the API server owns.
func cloned(src map[string]any, name, namespace string) map[string]any {
	obj := document.DeepCopyMap(src)
	meta, _ := obj["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	for _, f := range []string{"uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink", "ownerReferences", "deletionTimestamp"} {
		delete(meta, f)
	}
	meta["name"] = name
	if namespace != "" {
		meta["namespace"] = namespace
	} else {
		delete(meta, "namespace")
	}
	obj["metadata"] = meta
	delete(obj, "status")
	return obj
}

// noLister is the lister used when none is configured.
type noLister struct{}

func (noLister) GetResource(context.Context, string, string, string, string) (map[string]any, error) {
	return nil, ErrNotAvailable
}

func (noLister) ListResources(context.Context, string, string, string, *policy.LabelSelector) ([]map[string]any, error) {
	return nil, ErrNotAvailable
}
