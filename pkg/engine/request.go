package engine

import (
	"context"
	"errors"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// Admission operations.
const (
	OpCreate  = "CREATE"
	OpUpdate  = "UPDATE"
	OpDelete  = "DELETE"
	OpConnect = "CONNECT"
)

// UserInfo is who made a request: the authenticated user and the RBAC roles
// bound to it.
type UserInfo struct {
	Username     string              `json:"username,omitempty"`
	UID          string              `json:"uid,omitempty"`
	Groups       []string            `json:"groups,omitempty"`
	Extra        map[string][]string `json:"extra,omitempty"`
	Roles        []string            `json:"roles,omitempty"`
	ClusterRoles []string            `json:"clusterRoles,omitempty"`
}

// Request is one evaluation: a resource (and for updates its old state) with
// what the admission request says about it. One Request may be passed to
// several calls in turn (Mutate, then Validate, then Generate, as a
// webhook does): what they compute once is kept with it, and the work
// budget (WithWorkBudget) spans them all. It must not be passed to two
// calls at once.
type Request struct {
	// Operation is CREATE, UPDATE, DELETE or CONNECT; empty means a
	// background evaluation, which matches any operation.
	Operation string
	Object    map[string]any
	OldObject map[string]any
	// SubResource names a subresource ("status", "scale", "exec"), if any.
	SubResource string
	// JSON marks a payload that is no Kubernetes object: only
	// ValidatingPolicies in JSON evaluation mode apply to it, and they
	// apply to nothing else.
	JSON bool
	// Resource is the plural resource of the request (pods,
	// deployments), when known: CEL policies select by it. When empty
	// it is guessed from the object's kind.
	Resource string
	// ParentKind is, for a request on a subresource, the kind of the
	// resource the subresource belongs to (Pod for pods/exec, apps/v1
	// Deployment for deployments/scale), which kind selectors such as
	// Pod/exec or Deployment/scale match, with SubResource. When empty,
	// selectors match the object's own apiVersion and kind.
	ParentKind GroupVersionKind
	// Namespace and Name are the admission request's (request.namespace,
	// request.name). An empty Namespace is the resource's own namespace,
	// as the Kyverno CLI sets it; an empty Name leaves request.name out.
	Namespace string
	Name      string
	UserInfo  UserInfo
	// NamespaceLabels are the labels of the resource's namespace, for
	// namespaceSelector.
	NamespaceLabels map[string]string
	// NamespaceObject is the resource's Namespace as stored, which CEL
	// expressions read as namespaceObject; when nil they see one with its
	// name and NamespaceLabels.
	NamespaceObject map[string]any
	// DryRun mirrors the admission request's dryRun.
	DryRun bool
	// Values are extra variables (dotted names) set in every rule's context
	// before its own context entries, as the CLI's values files do.
	Values map[string]any
	// RuleValues, when set, returns variables for one rule of one policy;
	// they override Values and replace context entries of the same name.
	RuleValues func(policyName, ruleName string) map[string]any
	// ForEachValues, when set, returns variables for the element at index
	// of a foreach of one rule of one policy (the CLI's foreachValues);
	// they replace context entries of the same name inside the foreach.
	ForEachValues func(policyName, ruleName string, index int) map[string]any

	cache *evalCache
}

// resource returns the object the rules look at: the old object for a
// delete.
func (r *Request) resource() map[string]any {
	if r.Operation == OpDelete && r.Object == nil {
		return r.OldObject
	}
	if r.Object == nil {
		return r.OldObject
	}
	return r.Object
}

// ContextLoader supplies external data to rule context entries. The CLI
// serves it from test files, the services from informers and the API.
// A loader returns ErrNotAvailable when it has no source for a kind of
// entry; the entry is then left out of the context.
type ContextLoader interface {
	ConfigMap(ctx context.Context, namespace, name string) (map[string]any, error)
	APICall(ctx context.Context, call *policy.APICall) (any, error)
	GlobalReference(ctx context.Context, name string) (any, error)
	ImageData(ctx context.Context, reference string) (any, error)
}

// ErrNotAvailable tells the engine that a context source is not available
// here (for example the API server, in the CLI).
var ErrNotAvailable = errors.New("context source not available")

// noLoader is the loader used when none is configured.
type noLoader struct{}

func (noLoader) ConfigMap(context.Context, string, string) (map[string]any, error) {
	return nil, ErrNotAvailable
}
func (noLoader) APICall(context.Context, *policy.APICall) (any, error) { return nil, ErrNotAvailable }
func (noLoader) GlobalReference(context.Context, string) (any, error) {
	return nil, ErrNotAvailable
}
func (noLoader) ImageData(context.Context, string) (any, error) { return nil, ErrNotAvailable }

// GroupVersionKind names a kind of resource.
type GroupVersionKind struct {
	Group, Version, Kind string
}

// gvk is a resource's group, version and kind.
type gvk struct{ group, version, kind string }

func objectGVK(obj map[string]any) gvk {
	apiVersion := document.String(obj, "apiVersion")
	g, v := "", apiVersion
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		g, v = apiVersion[:i], apiVersion[i+1:]
	}
	return gvk{group: g, version: v, kind: document.String(obj, "kind")}
}

// Before is the request that stored the old object: a CREATE of it, with
// this request's namespace, requester and labels, sharing its work
// budget; nil when there is no old object. The webhook asks it whether a
// trigger that is deleted, or changed so that it no longer triggers a
// synchronized GeneratingPolicy, triggered it before.
func (r *Request) Before() *Request {
	if r.OldObject == nil {
		return nil
	}
	b := *r
	b.Operation, b.Object, b.OldObject = OpCreate, r.OldObject, nil
	b.cache = &evalCache{budget: r.scratch().budget}
	if b.cache.budget == nil {
		r.cache.budget = &budget{}
		b.cache.budget = r.cache.budget
	}
	return &b
}
