package kubeutil

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// Kind is one resource the API server serves (its preferred version, no
// subresource).
type Kind struct {
	GVR        schema.GroupVersionResource
	GVK        schema.GroupVersionKind
	Namespaced bool
	// Deletable: the resource serves delete.
	Deletable bool
}

// ListableKinds reads, through discovery, the resources that can be
// listed, and keeps them for a while (a new CRD is seen once the cache
// expires).
type ListableKinds struct {
	disc discovery.DiscoveryInterface
	ttl  time.Duration

	mu    sync.Mutex
	kinds []Kind
	at    time.Time
}

// NewListableKinds returns a cache that rereads discovery after ttl.
func NewListableKinds(disc discovery.DiscoveryInterface, ttl time.Duration) *ListableKinds {
	return &ListableKinds{disc: disc, ttl: ttl}
}

// List returns the listable resources. Groups that do not answer (an
// aggregated API that is down) are left out with a warning in ctx's
// logger; it fails only when discovery gives nothing.
func (l *ListableKinds) List(ctx context.Context) ([]Kind, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.kinds != nil && time.Since(l.at) < l.ttl {
		return l.kinds, nil
	}
	lists, err := discovery.ServerPreferredResources(l.disc)
	if err != nil {
		if len(lists) == 0 || !discovery.IsGroupDiscoveryFailedError(err) {
			return nil, fmt.Errorf("discover resources: %w", err)
		}
		zerolog.Ctx(ctx).Warn().Err(err).Msg("discoveryPartial")
	}
	var out []Kind
	for _, list := range lists {
		gv, err := schema.ParseGroupVersion(list.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range list.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			g := gv
			if r.Group != "" {
				g.Group = r.Group
			}
			if r.Version != "" {
				g.Version = r.Version
			}
			out = append(out, Kind{GVR: g.WithResource(r.Name), GVK: g.WithKind(r.Kind), Namespaced: r.Namespaced, Deletable: slices.Contains(r.Verbs, "delete")})
		}
	}
	l.kinds, l.at = out, time.Now()
	return out, nil
}
