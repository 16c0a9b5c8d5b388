package engine

import (
	"strings"
	"sync"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// kindSelector is one parsed entry of a kinds list.
type kindSelector struct {
	group, version, kind, subresource string
}

// parseKind reads Kind, Version/Kind, Group/Version/Kind, with an optional
// trailing /subresource, and `*` wildcards anywhere.
func parseKind(s string) kindSelector {
	if !strings.Contains(s, "/") {
		return kindSelector{group: "*", version: "*", kind: s}
	}
	parts := strings.Split(s, "/")
	isSub := func(p string) bool { return p != "" && p != "*" && p[0] >= 'a' && p[0] <= 'z' }
	switch len(parts) {
	case 1:
		return kindSelector{group: "*", version: "*", kind: parts[0]}
	case 2:
		// Kind/subresource or version/Kind.
		if isSub(parts[1]) || (parts[0] == "*" && parts[1] == "*") {
			return kindSelector{group: "*", version: "*", kind: parts[0], subresource: parts[1]}
		}
		return kindSelector{group: "*", version: parts[0], kind: parts[1]}
	case 3:
		// group/version/Kind or version/Kind/subresource.
		if isSub(parts[2]) {
			return kindSelector{group: "*", version: parts[0], kind: parts[1], subresource: parts[2]}
		}
		return kindSelector{group: parts[0], version: parts[1], kind: parts[2]}
	default:
		return kindSelector{group: parts[0], version: parts[1], kind: parts[2], subresource: strings.Join(parts[3:], "/")}
	}
}

func (k kindSelector) matches(r gvk, subresource string) bool {
	if !wildcard.Match(k.kind, r.kind) {
		return false
	}
	if k.group != "*" && !wildcard.Match(k.group, r.group) {
		return false
	}
	if k.version != "*" && !wildcard.Match(k.version, r.version) {
		return false
	}
	if subresource == "" {
		return k.subresource == "" || k.subresource == "*" && k.kind == "*"
	}
	return k.subresource != "" && wildcard.Match(k.subresource, subresource)
}

// kindCache memoizes parsed kind selectors; policies repeat few of them.
var kindCache sync.Map // string -> kindSelector

func cachedKind(s string) kindSelector {
	if v, ok := kindCache.Load(s); ok {
		return v.(kindSelector)
	}
	k := parseKind(s)
	kindCache.Store(s, k)
	return k
}

// matchKinds reports whether any selector matches the resource.
func matchKinds(kinds []string, r gvk, subresource string) bool {
	for _, k := range kinds {
		if cachedKind(k).matches(r, subresource) {
			return true
		}
	}
	return false
}

// matchInput is what matching looks at, computed once per request.
type matchInput struct {
	gvk         gvk
	subresource string
	name        string
	namespace   string
	labels      map[string]string
	annotations map[string]string
	nsLabels    map[string]string
	operation   string
	user        *UserInfo
}

func newMatchInput(req *Request) *matchInput {
	obj := req.resource()
	in := &matchInput{
		gvk:         objectGVK(obj),
		subresource: req.SubResource,
		name:        document.String(obj, "metadata", "name"),
		namespace:   document.String(obj, "metadata", "namespace"),
		labels:      document.StringMap(obj, "metadata", "labels"),
		annotations: document.StringMap(obj, "metadata", "annotations"),
		nsLabels:    req.NamespaceLabels,
		operation:   req.Operation,
		user:        &req.UserInfo,
	}
	if in.name == "" {
		in.name = document.String(obj, "metadata", "generateName")
	}
	return in
}

// matchResources reports whether a match block selects the request.
func matchResources(m *policy.MatchResources, in *matchInput) bool {
	switch {
	case len(m.Any) > 0:
		for i := range m.Any {
			if matchFilter(&m.Any[i].ResourceDescription, &m.Any[i].UserInfo, in) {
				return true
			}
		}
		return false
	case len(m.All) > 0:
		for i := range m.All {
			if !matchFilter(&m.All[i].ResourceDescription, &m.All[i].UserInfo, in) {
				return false
			}
		}
		return true
	default:
		if m.ResourceDescription.IsEmpty() && m.UserInfo.IsEmpty() {
			return false
		}
		return matchFilter(&m.ResourceDescription, &m.UserInfo, in)
	}
}

// excluded reports whether an exclude block removes the request.
func excluded(m *policy.MatchResources, in *matchInput) bool {
	if m == nil {
		return false
	}
	switch {
	case len(m.Any) > 0:
		for i := range m.Any {
			if matchFilter(&m.Any[i].ResourceDescription, &m.Any[i].UserInfo, in) {
				return true
			}
		}
		return false
	case len(m.All) > 0:
		for i := range m.All {
			if !matchFilter(&m.All[i].ResourceDescription, &m.All[i].UserInfo, in) {
				return false
			}
		}
		return true
	default:
		if m.ResourceDescription.IsEmpty() && m.UserInfo.IsEmpty() {
			return false
		}
		return matchFilter(&m.ResourceDescription, &m.UserInfo, in)
	}
}

// matchFilter reports whether every attribute the filter sets holds.
func matchFilter(rd *policy.ResourceDescription, ui *policy.UserInfo, in *matchInput) bool {
	if len(rd.Kinds) > 0 && !matchKinds(rd.Kinds, in.gvk, in.subresource) {
		return false
	}
	if rd.Name != "" && !wildcard.Match(rd.Name, in.name) {
		return false
	}
	if len(rd.Names) > 0 && !wildcard.MatchAny(rd.Names, in.name) {
		return false
	}
	if len(rd.Namespaces) > 0 {
		ns := in.namespace
		if in.gvk.kind == "Namespace" && in.gvk.group == "" {
			ns = in.name
		}
		if !wildcard.MatchAny(rd.Namespaces, ns) {
			return false
		}
	}
	if len(rd.Annotations) > 0 && !matchAnnotations(rd.Annotations, in.annotations) {
		return false
	}
	if rd.Selector != nil && !matchSelector(rd.Selector, in.labels) {
		return false
	}
	if rd.NamespaceSelector != nil {
		if in.gvk.kind == "Namespace" && in.namespace == "" {
			// A namespace has no namespace: select on its own labels.
			if !matchSelector(rd.NamespaceSelector, in.labels) {
				return false
			}
		} else if !matchSelector(rd.NamespaceSelector, in.nsLabels) {
			return false
		}
	}
	if len(rd.Operations) > 0 && in.operation != "" && !containsFold(rd.Operations, in.operation) {
		return false
	}
	return matchUser(ui, in.user)
}

func containsFold(list []string, s string) bool {
	for _, e := range list {
		if strings.EqualFold(e, s) {
			return true
		}
	}
	return false
}

func matchAnnotations(want, have map[string]string) bool {
	for k, v := range want {
		found := false
		for hk, hv := range have {
			if wildcard.Match(k, hk) && wildcard.Match(v, hv) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// matchSelector evaluates a label selector; keys and values of matchLabels
// may hold wildcards, as in Kyverno.
func matchSelector(sel *policy.LabelSelector, labels map[string]string) bool {
	for k, v := range sel.MatchLabels {
		if !wildcard.Contains(k) {
			hv, ok := labels[k]
			if !ok || !wildcard.Match(v, hv) {
				return false
			}
			continue
		}
		found := false
		for hk, hv := range labels {
			if wildcard.Match(k, hk) && wildcard.Match(v, hv) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	for _, e := range sel.MatchExpressions {
		hv, ok := labels[e.Key]
		switch e.Operator {
		case "In":
			if !ok || !contains(e.Values, hv) {
				return false
			}
		case "NotIn":
			if ok && contains(e.Values, hv) {
				return false
			}
		case "Exists":
			if !ok {
				return false
			}
		case "DoesNotExist":
			if ok {
				return false
			}
		default:
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// matchUser checks roles, cluster roles and subjects; each one set must hold.
func matchUser(ui *policy.UserInfo, u *UserInfo) bool {
	if ui.IsEmpty() {
		return true
	}
	if len(ui.Roles) > 0 && !anyIn(ui.Roles, u.Roles) {
		return false
	}
	if len(ui.ClusterRoles) > 0 && !anyIn(ui.ClusterRoles, u.ClusterRoles) {
		return false
	}
	if len(ui.Subjects) > 0 && !matchSubjects(ui.Subjects, u) {
		return false
	}
	return true
}

func anyIn(want, have []string) bool {
	for _, w := range want {
		for _, h := range have {
			if wildcard.Match(w, h) {
				return true
			}
		}
	}
	return false
}

const serviceAccountPrefix = "system:serviceaccount:"

func matchSubjects(subjects []policy.Subject, u *UserInfo) bool {
	for _, s := range subjects {
		switch s.Kind {
		case "ServiceAccount":
			if wildcard.Match(serviceAccountPrefix+s.Namespace+":"+s.Name, u.Username) {
				return true
			}
		case "User":
			if wildcard.Match(s.Name, u.Username) {
				return true
			}
		case "Group":
			for _, g := range u.Groups {
				if wildcard.Match(s.Name, g) {
					return true
				}
			}
		}
	}
	return false
}
