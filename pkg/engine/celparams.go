package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// ScopeResolver is implemented by a ResourceLister that can tell whether
// a kind is namespaced: a validate.cel rule's params of a namespaced kind
// are read in the resource's namespace unless paramRef names one.
type ScopeResolver interface {
	Namespaced(ctx context.Context, apiVersion, kind string) (bool, error)
}

// celParams is a validate.cel rule's paramKind and paramRef, checked.
type celParams struct {
	apiVersion, kind string
	name, namespace  string
	selector         *policy.LabelSelector
	// denyIfNone is parameterNotFoundAction Deny: no params is an error.
	denyIfNone bool
}

// compileParams checks paramKind and paramRef, appending what is wrong
// with them to *errs: both are needed, the kind named, and one of name
// or selector.
func compileParams(kind *policy.ParamKind, ref *policy.ParamRef, errs *[]error) *celParams {
	n := len(*errs)
	switch {
	case kind == nil:
		*errs = append(*errs, errors.New("validate.cel.paramKind: required with paramRef"))
	case ref == nil:
		*errs = append(*errs, errors.New("validate.cel.paramRef: required with paramKind"))
	}
	if len(*errs) > n {
		return nil
	}
	if kind.APIVersion == "" {
		*errs = append(*errs, errors.New("validate.cel.paramKind.apiVersion: required"))
	}
	if kind.Kind == "" {
		*errs = append(*errs, errors.New("validate.cel.paramKind.kind: required"))
	}
	if (ref.Name == "") == (ref.Selector == nil) {
		*errs = append(*errs, errors.New("validate.cel.paramRef: exactly one of name and selector is required"))
	}
	deny := false
	switch a := ref.ParameterNotFoundAction; {
	case a == nil || *a == "Allow":
	case *a == "Deny":
		deny = true
	default:
		*errs = append(*errs, fmt.Errorf("validate.cel.paramRef.parameterNotFoundAction: %q is not Allow or Deny", *a))
	}
	if len(*errs) > n {
		return nil
	}
	return &celParams{
		apiVersion: kind.APIVersion, kind: kind.Kind,
		name: ref.Name, namespace: ref.Namespace, selector: ref.Selector,
		denyIfNone: deny,
	}
}

// validateCELParams evaluates a validate.cel rule once per params
// resource, as Kyverno does: the first evaluation that does not pass
// (preconditions not met, a failed expression) is the rule's result; no
// params passes, unless parameterNotFoundAction is Deny; params that
// cannot be read are an error.
func (run *ruleRun) validateCELParams(rr RuleResponse, cr *celRule) RuleResponse {
	params, err := run.collectParams(cr.params)
	if err != nil {
		rr.Status, rr.Message = StatusError, "error in parameterized resource: "+err.Error()
		return rr
	}
	in := run.celInput()
	for _, p := range params {
		out := run.checkCEL(rr, cr, in.WithParams(p).NewEvaluation(run.callCtx(), cr.variables, 0))
		if out.Status != StatusPass {
			return out
		}
	}
	rr.Status, rr.Message = StatusPass, run.rule.pssPassMessage
	return rr
}

// collectParams reads a rule's params resources through the engine's
// context resources. A namespaced kind is read in paramRef's namespace,
// or else the resource's (a cluster-scoped resource has none: an error);
// a cluster-scoped kind takes no namespace.
func (run *ruleRun) collectParams(p *celParams) ([]map[string]any, error) {
	ctx := run.callCtx()
	sr, ok := run.e.reader.inner.(ScopeResolver)
	if !ok {
		return nil, fmt.Errorf("params %s %s: %w", p.apiVersion, p.kind, ErrNotAvailable)
	}
	namespaced, err := sr.Namespaced(ctx, p.apiVersion, p.kind)
	if err != nil {
		return nil, fmt.Errorf("failed to check if resource is namespaced or not (%w)", err)
	}
	ns := ""
	switch {
	case namespaced && p.namespace != "":
		ns = p.namespace
	case namespaced:
		if ns = run.resourceNamespace(); ns == "" {
			return nil, errors.New("can't use namespaced paramRef to match cluster-scoped resources")
		}
	case p.namespace != "":
		return nil, fmt.Errorf("paramRef.namespace must not be provided for a cluster-scoped `paramKind`")
	}
	if p.name != "" {
		obj, err := run.e.reader.GetResource(ctx, p.apiVersion, p.kind, ns, p.name)
		if errors.Is(err, ErrNotFound) || errors.Is(err, ErrNotAvailable) || (err == nil && obj == nil) {
			return nil, fmt.Errorf("%s %s %q not found", p.apiVersion, p.kind, strings.TrimPrefix(ns+"/"+p.name, "/"))
		}
		if err != nil {
			return nil, err
		}
		return []map[string]any{obj}, nil
	}
	list, err := run.e.reader.ListResources(ctx, p.apiVersion, p.kind, ns, p.selector)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return nil, err
	}
	if len(list) == 0 && p.denyIfNone {
		return nil, errors.New("no params found")
	}
	return list, nil
}

// resourceNamespace is the namespace of the request's resource: none
// for a Namespace itself.
func (run *ruleRun) resourceNamespace() string {
	obj := run.req.resource()
	if document.String(obj, "kind") == "Namespace" && document.String(obj, "apiVersion") == "v1" {
		return ""
	}
	if run.req.Namespace != "" {
		return run.req.Namespace
	}
	return document.String(obj, "metadata", "namespace")
}
