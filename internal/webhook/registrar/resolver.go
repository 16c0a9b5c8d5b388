package registrar

import (
	"fmt"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"

	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// DiscoveryResolver resolves kind selectors with the API server's
// discovery (preferred versions). Call Refresh to pick up new CRDs; kinds
// it does not know resolve to nothing until they exist.
type DiscoveryResolver struct {
	disc discovery.DiscoveryInterface

	mu    sync.RWMutex
	kinds map[string][]Resource // by Kind
}

// NewDiscoveryResolver returns a resolver; it reads discovery on Refresh.
func NewDiscoveryResolver(d discovery.DiscoveryInterface) *DiscoveryResolver {
	return &DiscoveryResolver{disc: d, kinds: map[string][]Resource{}}
}

// Refresh rereads the server's preferred resources. Groups that fail to
// answer (an aggregated API that is down) are left out, not fatal.
func (d *DiscoveryResolver) Refresh() error {
	lists, err := d.disc.ServerPreferredResources()
	if err != nil && len(lists) == 0 {
		return fmt.Errorf("discovery: %w", err)
	}
	kinds := map[string][]Resource{}
	for _, l := range lists {
		gv, perr := schema.ParseGroupVersion(l.GroupVersion)
		if perr != nil {
			continue
		}
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") {
				continue
			}
			kinds[r.Kind] = append(kinds[r.Kind], Resource{Group: gv.Group, Version: gv.Version, Resource: r.Name, Namespaced: r.Namespaced})
		}
	}
	d.mu.Lock()
	d.kinds = kinds
	d.mu.Unlock()
	return nil
}

// Resolve implements Resolver.
func (d *DiscoveryResolver) Resolve(selector string) ([]Resource, error) {
	sel := parseSelector(selector)
	if sel.kind == "*" && sel.group == "*" && sel.version == "*" {
		return []Resource{{Group: "*", Version: "*", Resource: "*", Subresource: sel.sub}}, nil
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	var out []Resource
	for kind, resources := range d.kinds {
		if !wildcard.Match(sel.kind, kind) {
			continue
		}
		for _, r := range resources {
			if sel.group != "*" && !wildcard.Match(sel.group, r.Group) {
				continue
			}
			if sel.version != "*" && !wildcard.Match(sel.version, r.Version) {
				continue
			}
			r.Subresource = sel.sub
			out = append(out, r)
		}
	}
	return out, nil
}

type selector struct{ group, version, kind, sub string }

// parseSelector reads the kind selectors policies use; it mirrors the
// engine's matching (Kind, Version/Kind, Group/Version/Kind, each with an
// optional /subresource).
func parseSelector(s string) selector {
	parts := strings.Split(s, "/")
	isSub := func(p string) bool { return p != "" && p != "*" && p[0] >= 'a' && p[0] <= 'z' }
	switch len(parts) {
	case 1:
		return selector{"*", "*", parts[0], ""}
	case 2:
		if isSub(parts[1]) || (parts[0] == "*" && parts[1] == "*") {
			return selector{"*", "*", parts[0], parts[1]}
		}
		return selector{"*", parts[0], parts[1], ""}
	case 3:
		if isSub(parts[2]) {
			return selector{"*", parts[0], parts[1], parts[2]}
		}
		return selector{parts[0], parts[1], parts[2], ""}
	default:
		return selector{parts[0], parts[1], parts[2], strings.Join(parts[3:], "/")}
	}
}

// StaticResolver resolves from a fixed table (tests, and clusters whose
// discovery is not reachable yet). Keys are Kinds.
type StaticResolver map[string][]Resource

// Resolve implements Resolver.
func (s StaticResolver) Resolve(selector string) ([]Resource, error) {
	sel := parseSelector(selector)
	if sel.kind == "*" && sel.group == "*" && sel.version == "*" {
		return []Resource{{Group: "*", Version: "*", Resource: "*", Subresource: sel.sub}}, nil
	}
	var out []Resource
	for kind, resources := range s {
		if !wildcard.Match(sel.kind, kind) {
			continue
		}
		for _, r := range resources {
			if (sel.group == "*" || wildcard.Match(sel.group, r.Group)) && (sel.version == "*" || wildcard.Match(sel.version, r.Version)) {
				r.Subresource = sel.sub
				out = append(out, r)
			}
		}
	}
	return out, nil
}
