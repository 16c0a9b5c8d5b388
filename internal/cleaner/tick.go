package cleaner

import (
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// Resources the cleanup and deleting policies are served as in Verdict's
// group (verdict.dev/v1; WithAPI chooses the group the cleaner reads).
var (
	ClusterCleanupPolicies     = policycache.VerdictAPI.MustResource(policy.KindClusterCleanupPolicy)
	CleanupPolicies            = policycache.VerdictAPI.MustResource(policy.KindCleanupPolicy)
	DeletingPolicies           = policycache.VerdictAPI.MustResource(policy.KindDeletingPolicy)
	NamespacedDeletingPolicies = policycache.VerdictAPI.MustResource(policy.KindNamespacedDeletingPolicy)
)

// policyKind is one kind of policy the cleaner runs.
type policyKind struct {
	namespaced bool
	// optional: the kind may not be served (its CRD is newer than the
	// cluster's): it is then not watched, and the cleaner runs the
	// others.
	optional bool
}

// policyKinds are the kinds of policy the cleaner runs, by kind.
var policyKinds = map[string]policyKind{
	policy.KindClusterCleanupPolicy:     {},
	policy.KindCleanupPolicy:            {namespaced: true},
	policy.KindDeletingPolicy:           {optional: true},
	policy.KindNamespacedDeletingPolicy: {namespaced: true, optional: true},
}

// TickAction is what a tick asks for.
type TickAction string

// Tick actions.
const (
	// TickPolicy: run one cleanup policy.
	TickPolicy TickAction = "policy"
	// TickTTL: delete the resources whose cleanup.kyverno.io/ttl label
	// says they are due.
	TickTTL TickAction = "ttl"
)

// TTLKey is the key of the TTL sweep's schedule (a policy's key always
// holds a slash, so none is "ttl").
const TTLKey = "ttl"

// Tick is the body of every tick of a cleaner schedule. A policy tick
// names the policy it was scheduled for; the replica that takes it reads
// the policy from the API and acts on what it says now, never on the
// tick's word.
type Tick struct {
	Action TickAction `json:"action"`
	Policy *PolicyRef `json:"policy,omitempty"`
}

// PolicyRef names the cleanup policy a schedule was made from, as it was
// then.
type PolicyRef struct {
	// Kind is ClusterCleanupPolicy, CleanupPolicy, DeletingPolicy or
	// NamespacedDeletingPolicy.
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	// Generation is the policy's metadata.generation: a schedule is
	// never replaced by one made from an older generation of the same
	// policy.
	Generation int64 `json:"generation"`
	// Schedule is the policy's spec.schedule.
	Schedule string `json:"schedule"`
}

// ScheduleKey is the key of the policy's schedule and of its ticks'
// work subject: "ClusterCleanupPolicy/<name>", "DeletingPolicy/<name>",
// "CleanupPolicy/<namespace>/<name>" or
// "NamespacedDeletingPolicy/<namespace>/<name>".
func (r PolicyRef) ScheduleKey() string { return policyKey(r.Kind, r.Namespace, r.Name) }

func policyKey(kind, namespace, name string) string {
	if policyKinds[kind].namespaced {
		return kind + "/" + namespace + "/" + name
	}
	return kind + "/" + name
}

// String is "name" or "namespace/name", the policy label of the metrics.
func (r PolicyRef) String() string {
	if r.Namespace != "" {
		return r.Namespace + "/" + r.Name
	}
	return r.Name
}

// GVR is the resource the policy is served as in api (DecodeTick checks
// the kind is one the cleaner runs).
func (r PolicyRef) GVR(api policycache.API) schema.GroupVersionResource {
	return api.MustResource(r.Kind)
}

// RefOf is the reference of a parsed policy.
func RefOf(p *policy.CleanupPolicy) PolicyRef {
	ns := ""
	if p.Namespaced() {
		ns = p.Metadata.Namespace
	}
	return PolicyRef{Kind: p.Kind, Namespace: ns, Name: p.Metadata.Name, UID: p.Metadata.UID, Generation: p.Metadata.Generation, Schedule: p.Spec.Schedule}
}

// DecodeTick reads a tick's body.
func DecodeTick(data []byte) (Tick, error) {
	var t Tick
	if err := json.Unmarshal(data, &t); err != nil {
		return t, fmt.Errorf("decode tick: %w", err)
	}
	switch t.Action {
	case TickTTL:
	case TickPolicy:
		if t.Policy == nil || t.Policy.Name == "" {
			return t, fmt.Errorf("decode tick: a policy tick names no cleanup policy")
		}
		k, ok := policyKinds[t.Policy.Kind]
		switch {
		case !ok:
			return t, fmt.Errorf("decode tick: a policy tick names no cleanup policy: %q is not a kind of policy the cleaner runs", t.Policy.Kind)
		case k.namespaced && t.Policy.Namespace == "":
			return t, fmt.Errorf("decode tick: a policy tick names no cleanup policy: the %s %s has no namespace", t.Policy.Kind, t.Policy.Name)
		}
	default:
		return t, fmt.Errorf("decode tick: unknown action %q", t.Action)
	}
	return t, nil
}

// ServerSpec turns a policy's schedule (standard cron, as Kyverno reads
// it) into the spec and time zone of a JetStream message schedule: five
// fields gain a seconds field (0), descriptors stay as they are (the
// server reads the same ones), and an interval stays an interval (the
// time zone means nothing to it, and the server refuses one there).
func ServerSpec(schedule string) (spec, timeZone string, err error) {
	cs, err := policy.ParseCronSchedule(schedule)
	if err != nil {
		return "", "", err
	}
	switch {
	case cs.Every > 0:
		return "@every " + cs.Every.String(), "", nil
	case cs.Descriptor != "":
		return cs.Descriptor, cs.TimeZone, nil
	}
	return "0 " + strings.Join(cs.Fields, " "), cs.TimeZone, nil
}

// PolicySchedule is the message schedule of a cleanup policy: its ticks
// are policy ticks naming it.
func PolicySchedule(p *policy.CleanupPolicy) (queue.Schedule, error) {
	ref := RefOf(p)
	spec, tz, err := ServerSpec(p.Spec.Schedule)
	if err != nil {
		return queue.Schedule{}, err
	}
	data, err := json.Marshal(Tick{Action: TickPolicy, Policy: &ref})
	if err != nil {
		return queue.Schedule{}, err
	}
	return queue.Schedule{Kind: bus.WorkCleanup, Key: ref.ScheduleKey(), Spec: spec, TimeZone: tz, Data: data}, nil
}

// policyOfSchedule is the policy a stored schedule names (nil for the
// TTL schedule or a body that is not a policy tick).
func policyOfSchedule(s queue.Schedule) *PolicyRef {
	t, err := DecodeTick(s.Data)
	if err != nil || t.Action != TickPolicy {
		return nil
	}
	return t.Policy
}
