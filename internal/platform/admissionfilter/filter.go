// Package admissionfilter says which admission requests Verdict never
// evaluates: the objects a cluster needs to heal itself (Nodes, Leases,
// Events, token and access reviews, certificate signing requests, ...) and
// the system namespaces, Verdict's own and those an operator adds (the
// NATS namespace). The registrar writes it into every webhook
// configuration, so the API server never calls Verdict for them even when
// every replica is down; the webhook applies it again to each request it
// receives, so a stale configuration or a forged review cannot get past it.
package admissionfilter

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// ErrInvalidResource wraps every problem of a resource filter entry.
var ErrInvalidResource = errors.New("invalid excluded resource")

// Resource names API resources: a resource of a group ("" is the core
// group), and optionally one of its subresources. Without a subresource
// it covers the resource and all its subresources.
type Resource struct {
	Group       string
	Resource    string
	Subresource string
}

// String writes r as ParseResource reads it: resource[.group][/subresource].
func (r Resource) String() string {
	s := r.Resource
	if r.Group != "" {
		s += "." + r.Group
	}
	if r.Subresource != "" {
		s += "/" + r.Subresource
	}
	return s
}

// ParseResource reads resource[.group][/subresource], as kubectl names
// resources: "leases.coordination.k8s.io", "nodes", "pods/binding".
func ParseResource(s string) (Resource, error) {
	s = strings.TrimSpace(s)
	name, sub, _ := strings.Cut(s, "/")
	res, group, _ := strings.Cut(name, ".")
	r := Resource{Group: group, Resource: res, Subresource: sub}
	if !validName(res) || (group != "" && !validGroup(group)) || (sub != "" && !validName(sub)) || strings.Count(s, "/") > 1 {
		return Resource{}, fmt.Errorf("%w: %q: want resource[.group][/subresource], lower case, for example leases.coordination.k8s.io or pods/binding", ErrInvalidResource, s)
	}
	return r, nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

func validGroup(s string) bool {
	for _, part := range strings.Split(s, ".") {
		if !validName(part) {
			return false
		}
	}
	return true
}

// NeverSent are the resources no Verdict webhook ever receives, whatever
// the policies select: what nodes, the control plane and the garbage
// collector write to keep the cluster running, reviews the API server
// asks of itself, and Verdict's own reports (a report about a report would
// never end).
var NeverSent = []Resource{
	{Resource: "nodes"},
	{Resource: "events"},
	{Group: "events.k8s.io", Resource: "events"},
	{Group: "coordination.k8s.io", Resource: "leases"},
	{Group: "coordination.k8s.io", Resource: "leasecandidates"},
	{Resource: "bindings"},
	{Resource: "pods", Subresource: "binding"},
	{Resource: "componentstatuses"},
	{Group: "authentication.k8s.io", Resource: "tokenreviews"},
	{Group: "authentication.k8s.io", Resource: "selfsubjectreviews"},
	{Group: "authorization.k8s.io", Resource: "subjectaccessreviews"},
	{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"},
	{Group: "authorization.k8s.io", Resource: "selfsubjectrulesreviews"},
	{Group: "authorization.k8s.io", Resource: "localsubjectaccessreviews"},
	{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"},
	{Group: "apiregistration.k8s.io", Resource: "apiservices"},
	{Group: "wgpolicyk8s.io", Resource: "policyreports"},
	{Group: "wgpolicyk8s.io", Resource: "clusterpolicyreports"},
	{Group: "openreports.io", Resource: "reports"},
	{Group: "openreports.io", Resource: "clusterreports"},
}

// SystemNamespaces are excluded from every webhook.
var SystemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// Filter is what Verdict never evaluates. The zero Filter excludes
// nothing; New always includes NeverSent and SystemNamespaces.
type Filter struct {
	namespaces []string
	resources  []Resource
}

// New returns the filter of NeverSent, SystemNamespaces and the given
// extra namespaces (Verdict's own, NATS's) and resources.
func New(namespaces []string, resources []Resource) Filter {
	ns := slices.Concat(SystemNamespaces, namespaces)
	ns = slices.DeleteFunc(ns, func(s string) bool { return s == "" })
	slices.Sort(ns)
	res := slices.Concat(NeverSent, resources)
	slices.SortFunc(res, func(a, b Resource) int { return strings.Compare(a.String(), b.String()) })
	return Filter{namespaces: slices.Compact(ns), resources: slices.Compact(res)}
}

// Namespaces are the excluded namespaces, sorted.
func (f Filter) Namespaces() []string { return slices.Clone(f.namespaces) }

// Resources are the excluded resources, sorted.
func (f Filter) Resources() []Resource { return slices.Clone(f.resources) }

// SkipsNamespace reports whether requests in ns (or about the Namespace
// ns itself) are excluded.
func (f Filter) SkipsNamespace(ns string) bool {
	_, found := slices.BinarySearch(f.namespaces, ns)
	return ns != "" && found
}

// SkipsResource reports whether requests for the resource (and
// subresource, "" for the resource itself) of group are excluded.
func (f Filter) SkipsResource(group, resource, subresource string) bool {
	for _, r := range f.resources {
		if r.Group == group && r.Resource == resource && (r.Subresource == "" || r.Subresource == subresource) {
			return true
		}
	}
	return false
}

// Skips reports whether an admission request is excluded: its resource,
// or its namespace (for a Namespace object the caller passes its name, as
// the API server's namespaceSelector does).
func (f Filter) Skips(group, resource, subresource, namespace string) bool {
	return f.SkipsResource(group, resource, subresource) || f.SkipsNamespace(namespace)
}

// Reaches reports whether a webhook rule over the API groups and
// resources (an admissionregistration Rule's, with its "*" wildcards and
// "resource/subresource" forms) could select a request the filter
// excludes. A webhook none of whose rules reaches one needs no match
// condition: the API server would evaluate it for every request it sends
// (converting the object for CEL) and it could never be false.
func (f Filter) Reaches(groups, resources []string) bool {
	for _, r := range f.resources {
		if !slices.Contains(groups, "*") && !slices.Contains(groups, r.Group) {
			continue
		}
		for _, res := range resources {
			name, sub, hasSub := strings.Cut(res, "/")
			switch {
			case !hasSub:
				// A resource without its subresources ("*": every one).
				if r.Subresource == "" && (name == "*" || name == r.Resource) {
					return true
				}
			case name == "*" || name == r.Resource:
				// Subresources ("*/*", "pods/*", "*/scale", "pods/binding"):
				// an excluded resource without a subresource covers all
				// of its own.
				if r.Subresource == "" || sub == "*" || sub == r.Subresource {
					return true
				}
			}
		}
	}
	return false
}

// MatchConditionName names the webhook match condition Expression builds.
const MatchConditionName = "verdict-excluded-resources"

// Expression is the CEL match condition that keeps the excluded resources
// away from a webhook: the API server evaluates it before calling, so
// they are never sent even when every webhook replica is down.
func (f Filter) Expression() string {
	var terms []string
	for _, r := range f.resources {
		t := "(request.resource.group == " + strconv.Quote(r.Group) + " && request.resource.resource == " + strconv.Quote(r.Resource)
		if r.Subresource != "" {
			// subResource is left out of the request when empty: a match
			// condition that errors fails closed, so guard with has().
			t += " && has(request.subResource) && request.subResource == " + strconv.Quote(r.Subresource)
		}
		terms = append(terms, t+")")
	}
	if len(terms) == 0 {
		return "true"
	}
	return "!(" + strings.Join(terms, " || ") + ")"
}
