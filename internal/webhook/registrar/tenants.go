package registrar

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Bounds of the webhooks of namespaced policies.
const (
	// MaxNamespacedTimeoutSeconds caps a namespaced policy's
	// webhookTimeoutSeconds: a tenant may make the API server wait for
	// Verdict no longer than this, and only in its own namespace.
	MaxNamespacedTimeoutSeconds = 10
	// MaxNamespacedWebhooks bounds the namespaced policies' webhooks of
	// one configuration, however many tenants. It is above the number of
	// (failure policy, timeout) pairs, which is what they are merged down
	// to when there are more.
	MaxNamespacedWebhooks = 32
)

// tenantGroup is one webhook of namespaced policies: the namespaces it
// selects, their rules, failure policy and timeout.
type tenantGroup struct {
	name  string
	fail  bool
	accum *accum
}

// coarseKey is what namespaces must share to be merged into one webhook:
// what the API server does when Verdict is slow or down.
type coarseKey struct {
	fail    bool
	timeout int32
	// reinvoke: a tenant's MutatingPolicy asks for reinvocation, which
	// would run the others' mutations twice: never shared.
	reinvoke bool
}

// tenantWebhooks groups the namespaced policies' needs of one webhook
// kind (mutating or validating) into webhooks that select their
// namespaces by name (kubernetes.io/metadata.name In): a tenant's kinds,
// failure policy and timeout (capped at MaxNamespacedTimeoutSeconds)
// reach the API server for its namespace only, and namespaced resources
// only. Namespaces that need the same rules, failure policy and timeout
// share a webhook. When that still makes more than MaxNamespacedWebhooks,
// the namespaces of the largest (failure policy, timeout) classes are
// merged into one webhook per class, with the union of their rules:
// never across a failure policy or a timeout, so a tenant can widen what
// another goes through only to what that tenant already accepted for
// its own policies, and only past the bound.
func tenantWebhooks(tenants map[tenantKey]*accum, mutate bool, o Options) []tenantGroup {
	type preciseKey struct {
		coarseKey
		rules string
	}
	groups := map[preciseKey]*accum{}
	for _, k := range slices.SortedFunc(maps.Keys(tenants), func(a, b tenantKey) int { return strings.Compare(a.namespace, b.namespace) }) {
		a := tenants[k]
		if k.mutate != mutate || len(a.ops) == 0 {
			continue
		}
		pk := preciseKey{coarseKey: coarseKey{fail: k.fail, timeout: tenantTimeout(a.timeout, o), reinvoke: a.reinvoke}, rules: fingerprint(a)}
		g := groups[pk]
		if g == nil {
			g = newAccum(a.scope)
			g.timeout, g.reinvoke = pk.timeout, pk.reinvoke
			groups[pk] = g
		}
		g.merge(a)
		g.namespaces = append(g.namespaces, k.namespace)
	}
	// Past the bound, merge the largest classes first.
	byClass := map[coarseKey][]preciseKey{}
	for pk := range groups {
		byClass[pk.coarseKey] = append(byClass[pk.coarseKey], pk)
	}
	classes := slices.SortedFunc(maps.Keys(byClass), func(a, b coarseKey) int {
		return cmp.Or(cmp.Compare(len(byClass[b]), len(byClass[a])), compareClass(a, b))
	})
	n := len(groups)
	for _, c := range classes {
		if n <= MaxNamespacedWebhooks {
			break
		}
		members := byClass[c]
		if len(members) < 2 {
			continue
		}
		merged := newAccum(groups[members[0]].scope)
		merged.timeout, merged.reinvoke = c.timeout, c.reinvoke
		for _, pk := range members {
			merged.merge(groups[pk])
			merged.namespaces = append(merged.namespaces, groups[pk].namespaces...)
			delete(groups, pk)
		}
		groups[preciseKey{coarseKey: c}] = merged
		n -= len(members) - 1
	}
	out := make([]tenantGroup, 0, len(groups))
	for pk, g := range groups {
		slices.Sort(g.namespaces)
		kind := "validate"
		if mutate {
			kind = "mutate"
		}
		// Unique: a namespace is in one group per failure policy.
		out = append(out, tenantGroup{name: fmt.Sprintf("%s-%s.%s.ns", kind, suffix(pk.fail), g.namespaces[0]), fail: pk.fail, accum: g})
	}
	slices.SortFunc(out, func(a, b tenantGroup) int {
		return cmp.Or(compareClass(coarseKey{a.fail, a.accum.timeout, a.accum.reinvoke}, coarseKey{b.fail, b.accum.timeout, b.accum.reinvoke}), strings.Compare(a.name, b.name))
	})
	return out
}

// compareClass orders Fail before Ignore, then by timeout, then Never
// before IfNeeded.
func compareClass(a, b coarseKey) int {
	if a.fail != b.fail {
		if a.fail {
			return -1
		}
		return 1
	}
	if a.timeout != b.timeout {
		return cmp.Compare(a.timeout, b.timeout)
	}
	switch {
	case a.reinvoke == b.reinvoke:
		return 0
	case b.reinvoke:
		return -1
	}
	return 1
}

// tenantTimeout is a namespaced policies' webhook timeout: theirs, or the
// default, capped at MaxNamespacedTimeoutSeconds.
func tenantTimeout(t int32, o Options) int32 {
	if t == 0 {
		t = o.DefaultTimeoutSeconds
	}
	return max(1, min(t, MaxNamespacedTimeoutSeconds))
}

// fingerprint identifies an accum's rules and operations.
func fingerprint(a *accum) string {
	var b strings.Builder
	for _, r := range a.rules() {
		fmt.Fprintf(&b, "%s/%s/%s:%v;", r.APIGroups[0], r.APIVersions[0], r.Resources[0], r.Operations)
	}
	return b.String()
}

// merge adds b's resources and operations to a.
func (a *accum) merge(b *accum) {
	for rk, ops := range b.ops {
		for op := range ops {
			a.add(rk, []string{string(op)})
		}
	}
}
