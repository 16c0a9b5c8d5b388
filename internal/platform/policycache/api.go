package policycache

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// ErrUnknownAPI is returned by ParseAPI for a name it does not know.
var ErrUnknownAPI = errors.New("unknown policy API")

// API is where the cluster's policies are served, and so where every
// service watches, reads and (the webhook's leader) writes their status:
// Verdict's own group, or Kyverno's groups, whose objects Verdict then
// reads with their original apiVersions (a shadow beside a running
// Kyverno, or the owner of Kyverno's kinds once Kyverno is gone:
// docs/migrating-from-kyverno.md).
//
// A service reads one API: two groups holding a ClusterPolicy of one name
// would be two policies the reports could not tell apart.
//
// The zero API is VerdictAPI.
type API struct {
	// Name is the flag's value: APIVerdict or APIKyverno.
	Name string
	// kinds are the policy kinds' resources, by kind.
	kinds map[string]schema.GroupVersionResource
	// exceptions are the PolicyException resources: one in Verdict's
	// group (both shapes), two in Kyverno's (kyverno.io's classic one,
	// policies.kyverno.io's for the CEL kinds).
	exceptions []schema.GroupVersionResource
	// required are the kinds a service waits for; the others are
	// watched where the API server serves them.
	required []schema.GroupVersionResource
	// versions are the versions each group serves the kinds at, for the
	// policy-validation webhook (matchPolicy Equivalent sends the others
	// too; a rule names them all to be plain).
	versions map[string][]string
}

// The APIs' names (the services' --policy-api flag, the chart's
// kyverno.mode).
const (
	APIVerdict = "verdict"
	APIKyverno = "kyverno"
)

// Resource names of the policy kinds, the same in every group.
var kindResources = map[string]string{
	policy.KindClusterPolicy:                   "clusterpolicies",
	policy.KindPolicy:                          "policies",
	policy.KindValidatingPolicy:                "validatingpolicies",
	policy.KindNamespacedValidatingPolicy:      "namespacedvalidatingpolicies",
	policy.KindMutatingPolicy:                  "mutatingpolicies",
	policy.KindNamespacedMutatingPolicy:        "namespacedmutatingpolicies",
	policy.KindGeneratingPolicy:                "generatingpolicies",
	policy.KindNamespacedGeneratingPolicy:      "namespacedgeneratingpolicies",
	policy.KindImageValidatingPolicy:           "imagevalidatingpolicies",
	policy.KindNamespacedImageValidatingPolicy: "namespacedimagevalidatingpolicies",
	policy.KindClusterCleanupPolicy:            "clustercleanuppolicies",
	policy.KindCleanupPolicy:                   "cleanuppolicies",
	policy.KindDeletingPolicy:                  "deletingpolicies",
	policy.KindNamespacedDeletingPolicy:        "namespaceddeletingpolicies",
}

// classicKinds are the kinds of kyverno.io; the others are
// policies.kyverno.io's.
var classicKinds = map[string]string{
	policy.KindClusterPolicy:        "v1",
	policy.KindPolicy:               "v1",
	policy.KindClusterCleanupPolicy: "v2",
	policy.KindCleanupPolicy:        "v2",
}

// VerdictAPI is Verdict's own group, verdict.dev/v1 for every kind: the
// default. ClusterPolicy, Policy and PolicyException are required (the
// chart installs their CRDs); the kinds added since are watched where
// served.
var VerdictAPI = func() API {
	a := API{Name: APIVerdict, kinds: map[string]schema.GroupVersionResource{}, versions: map[string][]string{policy.GroupVerdict: {"v1"}}}
	for kind, res := range kindResources {
		a.kinds[kind] = schema.GroupVersionResource{Group: policy.GroupVerdict, Version: "v1", Resource: res}
	}
	a.exceptions = []schema.GroupVersionResource{PolicyExceptions}
	a.required = []schema.GroupVersionResource{ClusterPolicies, Policies, PolicyExceptions}
	return a
}()

// KyvernoAPI is Kyverno's groups at the versions Kyverno 1.19 stores
// and serves: kyverno.io/v1 ClusterPolicy and Policy, kyverno.io/v2
// PolicyException, CleanupPolicy and ClusterCleanupPolicy, and
// policies.kyverno.io/v1 for the CEL kinds and their PolicyException.
// Every kind is optional: Kyverno's CRDs are the cluster's, and a release
// of Kyverno that removed the classic kinds (1.21) leaves the CEL ones.
var KyvernoAPI = func() API {
	a := API{Name: APIKyverno, kinds: map[string]schema.GroupVersionResource{}, versions: map[string][]string{
		policy.GroupKyverno:  {"v1", "v2", "v2beta1"},
		policy.GroupPolicies: {"v1", "v1alpha1", "v1beta1"},
	}}
	for kind, res := range kindResources {
		gvr := schema.GroupVersionResource{Group: policy.GroupPolicies, Version: "v1", Resource: res}
		if v, ok := classicKinds[kind]; ok {
			gvr = schema.GroupVersionResource{Group: policy.GroupKyverno, Version: v, Resource: res}
		}
		a.kinds[kind] = gvr
	}
	a.exceptions = []schema.GroupVersionResource{
		{Group: policy.GroupKyverno, Version: "v2", Resource: "policyexceptions"},
		{Group: policy.GroupPolicies, Version: "v1", Resource: "policyexceptions"},
	}
	return a
}()

// orDefault is a, or VerdictAPI for the zero API.
func (a API) orDefault() API {
	if a.kinds == nil {
		return VerdictAPI
	}
	return a
}

// ParseAPI is the API of a --policy-api value.
func ParseAPI(name string) (API, error) {
	switch name {
	case "", APIVerdict:
		return VerdictAPI, nil
	case APIKyverno:
		return KyvernoAPI, nil
	}
	return API{}, fmt.Errorf("%w %q: want %s or %s", ErrUnknownAPI, name, APIVerdict, APIKyverno)
}

// Resource is the resource a policy kind is served as; the Kubernetes
// admission policies' are the API server's whatever the API.
func (a API) Resource(kind string) (schema.GroupVersionResource, bool) {
	a = a.orDefault()
	switch kind {
	case policy.KindValidatingAdmissionPolicy:
		return ValidatingAdmissionPolicies, true
	case policy.KindMutatingAdmissionPolicy:
		return schema.GroupVersionResource{Group: policy.GroupAdmissionRegistration, Version: mutatingAdmissionPolicyVersions[0], Resource: resourceMAP}, true
	}
	gvr, ok := a.kinds[kind]
	return gvr, ok
}

// MustResource is Resource for a kind every API has.
func (a API) MustResource(kind string) schema.GroupVersionResource {
	gvr, ok := a.Resource(kind)
	if !ok {
		panic("policycache: no resource for policy kind " + kind)
	}
	return gvr
}

// Exceptions are the PolicyException resources.
func (a API) Exceptions() []schema.GroupVersionResource {
	a = a.orDefault()
	return a.exceptions
}

// Groups are the API groups of the policy kinds, sorted, with the
// versions each serves them at.
func (a API) Groups() map[string][]string {
	a = a.orDefault()
	return a.versions
}

// PolicyResources are the resource names of every policy kind and
// PolicyException in the group (sorted), for the policy-validation
// webhook and RBAC.
func (a API) PolicyResources(group string) []string {
	a = a.orDefault()
	var out []string
	for _, gvr := range a.kinds {
		if gvr.Group == group {
			out = append(out, gvr.Resource)
		}
	}
	for _, gvr := range a.exceptions {
		if gvr.Group == group {
			out = append(out, gvr.Resource)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// watched are the resources the policy cache watches: the required
// first, then the optional, in a stable order. The cleanup kinds are the
// cleaner's.
func (a API) watched() (required, optional []schema.GroupVersionResource) {
	a = a.orDefault()
	skip := map[string]bool{policy.KindClusterCleanupPolicy: true, policy.KindCleanupPolicy: true, policy.KindDeletingPolicy: true, policy.KindNamespacedDeletingPolicy: true}
	req := map[schema.GroupVersionResource]bool{}
	for _, gvr := range a.required {
		req[gvr] = true
	}
	var all []schema.GroupVersionResource
	for kind, gvr := range a.kinds {
		if !skip[kind] {
			all = append(all, gvr)
		}
	}
	all = append(all, a.exceptions...)
	sort.Slice(all, func(i, j int) bool { return all[i].String() < all[j].String() })
	for _, gvr := range all {
		if req[gvr] {
			continue
		}
		optional = append(optional, gvr)
	}
	return a.required, optional
}

// KindResources are the policy kinds of every API, with their resource
// names (the same in every group).
func KindResources() map[string]string { return maps.Clone(kindResources) }
