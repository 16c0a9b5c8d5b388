package cleaner

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// Reasons of a tick's outcome, the reason label of verdict_cleaner_ticks_total
// (whose outcome label is queue.Outcome.Result's: processed, skipped,
// retried, deadLettered) and of verdict_queue_work_items_total{consumer="cleaner"}.
const (
	ReasonDone            = "done"
	ReasonPartial         = "partial"
	ReasonCoalesced       = "coalesced"
	ReasonPolicyGone      = "policyGone"
	ReasonPolicyReplaced  = "policyReplaced"
	ReasonScheduleChanged = "scheduleChanged"
	ReasonPolicyInvalid   = "policyInvalid"
	ReasonUndecodable     = "undecodable"
	ReasonAPIError        = "apiError"
	ReasonEvaluationError = "evaluationError"
)

// Outcomes of one deletion, the outcome label of
// verdict_cleaner_deletions_total.
const (
	DeletionDeleted  = "deleted"
	DeletionNotFound = "notFound"
	DeletionReplaced = "replaced"
	DeletionFailed   = "failed"
)

// Metrics are the cleaner's metrics.
type Metrics struct {
	ticks      *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	deletions  *prometheus.CounterVec
	evalErrors *prometheus.CounterVec
	ttlInvalid prometheus.Counter
	// ttlUnguarded counts TTL-labelled resources left alone because no
	// webhook checked who set the label (ttl.go).
	ttlUnguarded *prometheus.CounterVec
	schedules    *prometheus.CounterVec
	notServed    *prometheus.CounterVec
}

// NewMetrics registers the cleaner's metrics on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		ticks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verdict_cleaner_ticks_total",
			Help: "Ticks worked, by type (policy, ttl), policy (@ttl for the TTL sweep), outcome (processed, skipped, retried, deadLettered) and reason.",
		}, []string{"type", "policy", "outcome", "reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "verdict_cleaner_tick_duration_seconds",
			Help:    "Time to work one tick (list, evaluate, delete), by type.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 10),
		}, []string{"type"}),
		deletions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verdict_cleaner_deletions_total",
			Help: "Deletions by policy (@ttl for the TTL label), kind and outcome (deleted, notFound, replaced, failed).",
		}, []string{"policy", "kind", "outcome"}),
		evalErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verdict_cleaner_evaluation_errors_total",
			Help: "Resources a policy's conditions could not be evaluated on (not deleted), by policy.",
		}, []string{"policy"}),
		ttlUnguarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verdict_cleaner_ttl_unguarded_total",
			Help: "Resources with the cleanup.kyverno.io/ttl label left alone by the TTL sweep because they are in a namespace or of a resource no Verdict webhook receives (so no one checked that whoever set the label may delete them), by kind.",
		}, []string{"kind"}),
		ttlInvalid: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "verdict_cleaner_ttl_invalid_total",
			Help: "Resources whose cleanup.kyverno.io/ttl label could not be read (not deleted), counted at each sweep.",
		}),
		schedules: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verdict_cleaner_schedule_changes_total",
			Help: "What this replica did to the cleanup schedules: created, replaced, unchanged, kept, deleted, rejected, failed.",
		}, []string{"change"}),
		notServed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verdict_cleaner_kinds_not_served_total",
			Help: "Kinds (cleanup policies) or group/version/resources (deleting policies) a policy names that the API server does not serve as listable and deletable, counted at each tick: nothing of them is listed.",
		}, []string{"policy", "kind"}),
	}
	for _, c := range []prometheus.Collector{m.ticks, m.duration, m.deletions, m.evalErrors, m.ttlInvalid, m.ttlUnguarded, m.schedules, m.notServed} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register cleaner metrics: %w", err)
		}
	}
	return m, nil
}
