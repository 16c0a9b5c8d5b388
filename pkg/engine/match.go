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
	ok, _ := k.matchesMetered(r, subresource, nil)
	return ok
}

// matchesMetered is matches with each wildcard charged to m (see
// meter.match).
func (k kindSelector) matchesMetered(r gvk, subresource string, m *meter) (bool, error) {
	if ok, err := m.match(k.kind, r.kind); !ok || err != nil {
		return false, err
	}
	if k.group != "*" {
		if ok, err := m.match(k.group, r.group); !ok || err != nil {
			return false, err
		}
	}
	if k.version != "*" {
		if ok, err := m.match(k.version, r.version); !ok || err != nil {
			return false, err
		}
	}
	if subresource == "" {
		return k.subresource == "" || k.subresource == "*" && k.kind == "*", nil
	}
	if k.subresource == "" && subresource == "ephemeralcontainers" && r == (gvk{version: "v1", kind: "Pod"}) {
		// Adding an ephemeral container changes the Pod: a rule on Pods
		// sees it, as in Kyverno.
		return true, nil
	}
	if k.subresource == "" {
		return false, nil
	}
	return m.match(k.subresource, subresource)
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
// any, every filter for all. Each wildcard is charged to m, the meter of
// the call (see meter.match); a match the budget cannot pay for ends it
// with why the evaluation must stop.
func (c *matcher) matches(in *matchInput, m *meter) (bool, error) {
	if c == nil {
		return false, nil
	}
	ignoreUser := c.userOptional && in.noUser
	switch {
	case len(c.any) > 0:
		for i := range c.any {
			if ok, err := c.any[i].matches(in, ignoreUser, m); ok || err != nil {
				return ok, err
			}
		}
		return false, nil
	case len(c.all) > 0:
		for i := range c.all {
			if ok, err := c.all[i].matches(in, ignoreUser, m); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	case c.single != nil:
		return c.single.matches(in, ignoreUser, m)
	}
	return false, nil
}

// matchResources reports whether an exception's match block selects the
// request; its user info always counts (Kyverno's exception matching
// checks it whatever the request carries). Its wildcards are charged to
// m.
func matchResources(mr *policy.MatchResources, in *matchInput, m *meter) (bool, error) {
	return compileBlock(mr).matches(in, m)
}

// matches reports whether the filter selects the request; with
// ignoreUser, its roles, cluster roles and subjects are left out (and a
// filter of only those selects nothing, as Kyverno finds it empty).
func (f *filter) matches(in *matchInput, ignoreUser bool, m *meter) (bool, error) {
	ui := f.ui
	if ignoreUser {
		if f.rd.IsEmpty() {
			return false, nil
		}
		ui = &policy.UserInfo{}
	}
	if len(f.kinds) > 0 {
		ok := false
		for _, k := range f.kinds {
			selected, err := k.matchesMetered(in.gvk, in.subresource, m)
			if err != nil {
				return false, err
			}
			if selected {
				ok = true
				break
			}
		}
		if !ok {
			return false, nil
		}
	}
	return matchFilter(f.rd, ui, in, m)
}

// matchFilter reports whether every attribute the filter sets holds.
// Kinds are checked by the compiled filter.
func matchFilter(rd *policy.ResourceDescription, ui *policy.UserInfo, in *matchInput, m *meter) (bool, error) {
	if rd.Name != "" {
		if ok, err := m.match(rd.Name, in.name); !ok || err != nil {
			return false, err
		}
	}
	if len(rd.Names) > 0 {
		if ok, err := m.matchAny(rd.Names, in.name); !ok || err != nil {
			return false, err
		}
	}
	if len(rd.Namespaces) > 0 {
		ns := in.namespace
		if in.gvk.kind == "Namespace" && in.gvk.group == "" {
			ns = in.name
		}
		if ok, err := m.matchAny(rd.Namespaces, ns); !ok || err != nil {
			return false, err
		}
	}
	if len(rd.Annotations) > 0 {
		if ok, err := matchAnnotations(rd.Annotations, in.annotations, m); !ok || err != nil {
			return false, err
		}
	}
	if rd.Selector != nil {
		if ok, err := matchSelector(rd.Selector, in.labels, m); !ok || err != nil {
			return false, err
		}
	}
	if rd.NamespaceSelector != nil {
		// A namespace has no namespace: select on its own labels.
		labels := in.nsLabels
		if in.gvk.kind == "Namespace" && in.namespace == "" {
			labels = in.labels
		}
		if ok, err := matchSelector(rd.NamespaceSelector, labels, m); !ok || err != nil {
			return false, err
		}
	}
	if len(rd.Operations) > 0 && in.operation != "" && !containsFold(rd.Operations, in.operation) {
		return false, nil
	}
	return matchUser(ui, in.user, m)
}

func containsFold(list []string, s string) bool {
	for _, e := range list {
		if strings.EqualFold(e, s) {
			return true
		}
	}
	return false
}

// matchAnnotations reports whether, for each key and value of want, some
// annotation's key and value match them.
func matchAnnotations(want, have map[string]string, m *meter) (bool, error) {
	for k, v := range want {
		found, err := matchPair(k, v, have, m)
		if !found || err != nil {
			return false, err
		}
	}
	return true, nil
}

// matchPair reports whether some key and value of have match the
// wildcards k and v.
func matchPair(k, v string, have map[string]string, m *meter) (bool, error) {
	for hk, hv := range have {
		ok, err := m.match(k, hk)
		if ok {
			ok, err = m.match(v, hv)
		}
		if ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// matchSelector evaluates a label selector; keys and values of matchLabels
// may hold wildcards, as in Kyverno. The wildcards are charged to m.
func matchSelector(sel *policy.LabelSelector, labels map[string]string, m *meter) (bool, error) {
	for k, v := range sel.MatchLabels {
		if !wildcard.Contains(k) {
			hv, ok := labels[k]
			if !ok {
				return false, nil
			}
			if ok, err := m.match(v, hv); !ok || err != nil {
				return false, err
			}
			continue
		}
		if found, err := matchPair(k, v, labels, m); !found || err != nil {
			return false, err
		}
	}
	for _, e := range sel.MatchExpressions {
		hv, ok := labels[e.Key]
		switch e.Operator {
		case "In":
			if !ok || !contains(e.Values, hv) {
				return false, nil
			}
		case "NotIn":
			if ok && contains(e.Values, hv) {
				return false, nil
			}
		case "Exists":
			if !ok {
				return false, nil
			}
		case "DoesNotExist":
			if ok {
				return false, nil
			}
		default:
			return false, nil
		}
	}
	return true, nil
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

// matchUser checks roles, cluster roles and subjects; each one set must
// hold. The wildcards are charged to m.
func matchUser(ui *policy.UserInfo, u *UserInfo, m *meter) (bool, error) {
	if ui.IsEmpty() {
		return true, nil
	}
	if len(ui.Roles) > 0 {
		if ok, err := anyIn(ui.Roles, u.Roles, m); !ok || err != nil {
			return false, err
		}
	}
	if len(ui.ClusterRoles) > 0 {
		if ok, err := anyIn(ui.ClusterRoles, u.ClusterRoles, m); !ok || err != nil {
			return false, err
		}
	}
	if len(ui.Subjects) > 0 {
		return matchSubjects(ui.Subjects, u, m)
	}
	return true, nil
}

// anyIn reports whether some string of have matches some wildcard of
// want.
func anyIn(want, have []string, m *meter) (bool, error) {
	for _, w := range want {
		for _, h := range have {
			if ok, err := m.match(w, h); ok || err != nil {
				return ok, err
			}
		}
	}
	return false, nil
}

const serviceAccountPrefix = "system:serviceaccount:"

func matchSubjects(subjects []policy.Subject, u *UserInfo, m *meter) (bool, error) {
	for _, s := range subjects {
		var ok bool
		var err error
		switch s.Kind {
		case "ServiceAccount":
			ok, err = m.match(serviceAccountPrefix+s.Namespace+":"+s.Name, u.Username)
		case "User":
			ok, err = m.match(s.Name, u.Username)
		case "Group":
			for _, g := range u.Groups {
				if ok, err = m.match(s.Name, g); ok || err != nil {
					break
				}
			}
		}
		if ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// MatchSelector evaluates a label selector as the engine does (wildcards
// allowed in matchLabels), uncharged: the listers and the CLI select
// objects with it outside an evaluation.
func MatchSelector(sel *policy.LabelSelector, labels map[string]string) bool {
	ok, _ := matchSelector(sel, labels, nil)
	return ok
}
