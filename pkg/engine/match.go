package engine

import (
	"strings"

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
	if k.subresource == "" && subresource == "ephemeralcontainers" && r == (gvk{version: "v1", kind: "Pod"}) {
		// Adding an ephemeral container changes the Pod: a rule on Pods
		// sees it, as in Kyverno.
		return true
	}
	return k.subresource != "" && wildcard.Match(k.subresource, subresource)
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
	// noUser is set when the request carries no user information at all.
	noUser bool
}

func newMatchInput(req *Request) *matchInput {
	obj := req.resource()
	kind := objectGVK(obj)
	if p := req.ParentKind; p.Kind != "" {
		kind = gvk{group: p.Group, version: p.Version, kind: p.Kind}
	}
	in := &matchInput{
		gvk:         kind,
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
	u := &req.UserInfo
	in.noUser = u.Username == "" && u.UID == "" && len(u.Groups) == 0 && len(u.Extra) == 0 && len(u.Roles) == 0 && len(u.ClusterRoles) == 0
	return in
}

// filter is one compiled selector: its attributes with the kinds parsed.
type filter struct {
	rd    *policy.ResourceDescription
	ui    *policy.UserInfo
	kinds []kindSelector
}

// matcher is a compiled match or exclude block.
type matcher struct {
	any, all []filter
	// single is the legacy inline filter, when any and all are empty.
	single *filter
	// userOptional is set for match blocks: a request that carries no
	// user at all (a background scan, a CLI run without user info) is not
	// judged on roles, cluster roles and subjects, as in Kyverno, whose
	// match helper drops the block's user info for an empty request info.
	// Exclude blocks keep it.
	userOptional bool
}

func newFilter(rd *policy.ResourceDescription, ui *policy.UserInfo) filter {
	f := filter{rd: rd, ui: ui}
	for _, k := range rd.Kinds {
		f.kinds = append(f.kinds, parseKind(k))
	}
	return f
}

// compileMatch parses a match block once.
func compileMatch(m *policy.MatchResources) *matcher {
	c := compileBlock(m)
	if c != nil {
		c.userOptional = true
	}
	return c
}

// compileExclude parses an exclude block once.
func compileExclude(m *policy.MatchResources) *matcher { return compileBlock(m) }

func compileBlock(m *policy.MatchResources) *matcher {
	if m == nil {
		return nil
	}
	c := &matcher{}
	for i := range m.Any {
		c.any = append(c.any, newFilter(&m.Any[i].ResourceDescription, &m.Any[i].UserInfo))
	}
	for i := range m.All {
		c.all = append(c.all, newFilter(&m.All[i].ResourceDescription, &m.All[i].UserInfo))
	}
	if len(c.any) == 0 && len(c.all) == 0 && (!m.ResourceDescription.IsEmpty() || !m.UserInfo.IsEmpty()) {
		f := newFilter(&m.ResourceDescription, &m.UserInfo)
		c.single = &f
	}
	return c
}

// matches reports whether the block selects the request: any filter for
// any, every filter for all.
func (c *matcher) matches(in *matchInput) bool {
	if c == nil {
		return false
	}
	ignoreUser := c.userOptional && in.noUser
	switch {
	case len(c.any) > 0:
		for i := range c.any {
			if c.any[i].matches(in, ignoreUser) {
				return true
			}
		}
		return false
	case len(c.all) > 0:
		for i := range c.all {
			if !c.all[i].matches(in, ignoreUser) {
				return false
			}
		}
		return true
	case c.single != nil:
		return c.single.matches(in, ignoreUser)
	}
	return false
}

// matchResources reports whether an exception's match block selects the
// request; its user info always counts (Kyverno's exception matching
// checks it whatever the request carries).
func matchResources(m *policy.MatchResources, in *matchInput) bool {
	return compileBlock(m).matches(in)
}

// matches reports whether the filter selects the request; with
// ignoreUser, its roles, cluster roles and subjects are left out (and a
// filter of only those selects nothing, as Kyverno finds it empty).
func (f *filter) matches(in *matchInput, ignoreUser bool) bool {
	ui := f.ui
	if ignoreUser {
		if f.rd.IsEmpty() {
			return false
		}
		ui = &policy.UserInfo{}
	}
	if len(f.kinds) > 0 {
		ok := false
		for _, k := range f.kinds {
			if k.matches(in.gvk, in.subresource) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return matchFilter(f.rd, ui, in)
}

// matchFilter reports whether every attribute the filter sets holds.
// Kinds are checked by the compiled filter.
func matchFilter(rd *policy.ResourceDescription, ui *policy.UserInfo, in *matchInput) bool {
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

// MatchSelector evaluates a label selector as the engine does (wildcards
// allowed in matchLabels).
func MatchSelector(sel *policy.LabelSelector, labels map[string]string) bool {
	return matchSelector(sel, labels)
}
