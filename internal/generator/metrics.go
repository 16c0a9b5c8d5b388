package generator

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons of a work item's outcome, the reason label of
// verdict_queue_work_items_total{consumer="generator"} (the runner counts
// the items by kind, outcome and reason).
const (
	ReasonApplied            = "applied"
	ReasonTriggerNotFound    = "triggerNotFound"
	ReasonTriggerUIDMismatch = "triggerUIDMismatch"
	ReasonTriggerFuture      = "triggerFuture"
	ReasonTriggerDeleting    = "triggerDeleting"
	ReasonTriggerPending     = "triggerPending"
	ReasonPolicyGone         = "policyGone"
	ReasonPolicyReplaced     = "policyReplaced"
	ReasonPolicyCandidate    = "policyCandidate"
	ReasonRuleNotTriggered   = "ruleNotTriggered"
	ReasonAPIError           = "apiError"
	ReasonEvaluationError    = "evaluationError"
	ReasonUndecodable        = "undecodable"
	ReasonInvalidItem        = "invalidItem"
	ReasonUnsupported        = "unsupported"
	ReasonPolicyInvalid      = "policyInvalid"
	ReasonNamespaceForbidden = "namespaceForbidden"
	// ReasonReadRefused: the rule read what its policy may not (another
	// namespace, Verdict's own Secrets, an apiCall POST that is not a
	// review); dead-lettered at once.
	ReasonReadRefused       = "readRefused"
	ReasonRefused           = "refusedByAPI"
	ReasonKindNotServed     = "kindNotServed"
	ReasonDeleted           = "downstreamDeleted"
	ReasonFannedOut         = "fannedOut"
	ReasonTriggerNotDeleted = "triggerNotDeleted"
	ReasonNotSynchronized   = "notSynchronized"
	ReasonPolicyExists      = "policyExists"
	ReasonQueueError        = "queueError"
	// ReasonRequesterUnverified: the item's requester cannot be vouched
	// for (no mutual TLS) and its policy does not run in the background.
	ReasonRequesterUnverified = "requesterUnverified"
)

// What became of a requester the API could not vouch for, the action
// label of verdict_generator_requesters_unverified_total.
const (
	// RequesterDropped: the item was worked without it.
	RequesterDropped = "dropped"
	// RequesterRefused: the item was skipped (requesterUnverified).
	RequesterRefused = "refused"
)

// Metrics are the generator's metrics.
type Metrics struct {
	resources *prometheus.CounterVec
	deleted   *prometheus.CounterVec
	fannedOut *prometheus.CounterVec
	watch     *prometheus.CounterVec
	// requesters counts the requesters of items the API could not vouch
	// for (requester.go).
	requesters *prometheus.CounterVec
}

// NewMetrics registers the generator's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		resources: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verdict_generator_resources_applied_total",
			Help: "Generated resources written with server-side apply, by kind.",
		}, []string{"kind"}),
		deleted: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verdict_generator_resources_deleted_total",
			Help: "Generated resources deleted with their trigger or their policy (synchronize), by kind.",
		}, []string{"kind"}),
		fannedOut: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verdict_generator_fanned_out_items_total",
			Help: "Work items queued for existing triggers when a policy was created or changed, by work kind.",
		}, []string{"kind"}),
		watch: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verdict_generator_watch_events_total",
			Help: "Changes the watches turned into work: generated resources changed by others or deleted (drift) and policies changed or deleted, by event and result (queued; failed: no item could be made; rejected: JetStream refused the item for good).",
		}, []string{"event", "result"}),
		requesters: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verdict_generator_requesters_unverified_total",
			Help: "Admission work items whose requester no one vouched for (the webhook's caller presented no client certificate, and the item is not the creation of its trigger), by operation and action (dropped: worked without the requester; refused: skipped, the policy does not run in the background).",
		}, []string{"operation", "action"}),
	}
	for _, c := range []prometheus.Collector{m.resources, m.deleted, m.fannedOut, m.watch, m.requesters} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register generator metrics: %w", err)
		}
	}
	return m, nil
}
