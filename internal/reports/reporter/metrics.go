package reporter

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/internal/platform/apicheck"
)

// Metrics are the reporter's prometheus collectors (verdict_reporter_*).
// One Metrics is registered once on a registerer and shared by the
// writers, projectors and replays that report to it.
type Metrics struct {
	consumed    prometheus.Counter
	undecodable prometheus.Counter
	unverified  *prometheus.CounterVec
	reports     *prometheus.CounterVec
	conflicts   prometheus.Counter
	lag         prometheus.Histogram
	flushSize   prometheus.Histogram
	writeTime   prometheus.Histogram

	copies       prometheus.Counter
	copyFailures prometheus.Counter

	pending         prometheus.Gauge
	pendingBytes    prometheus.Gauge
	pendingDropped  *prometheus.CounterVec
	pendingRechecks prometheus.Gauge
	unreadable      prometheus.Counter
	recovered       prometheus.Counter
	absent          prometheus.Gauge
}

// Reasons a projector gives up a pending result
// (verdict_reporter_results_pending_dropped_total).
const (
	// PendingFull: the projector's pending set was full
	// (WithPendingLimit), and so was its list of results to recheck
	// (WithPendingRechecks), or rechecks are off.
	PendingFull = "full"
	// PendingFailed: a remembered result could not be rechecked, or its
	// report written, within the projector's attempts.
	PendingFailed = "failed"
	// PendingShutdown: the replica stopped with the result remembered
	// for a recheck.
	PendingShutdown = "shutdown"
)

// pendingDropReasons are the reasons of
// verdict_reporter_results_pending_dropped_total.
func pendingDropReasons() []string { return []string{PendingFull, PendingFailed, PendingShutdown} }

// NewMetrics creates the collectors and registers them on reg (nil: a
// fresh registry).
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	const ns, sub = "verdict", "reporter"
	m := &Metrics{
		consumed: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "results_consumed_total",
			Help: "Result messages taken from VERDICT_RESULTS by the projector (redeliveries included)."}),
		undecodable: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "results_undecodable_total",
			Help: "Result messages that could not be decoded: dead-lettered by the projector, left out of folds."}),
		unverified: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "results_unverified_total",
			Help: "Result messages (one result, or an admission's batch of them) dropped without changing any report because the API server does not confirm their resource, by reason: notFound (not there after the grace period: never stored, or gone), uidMismatch (the name is another object's), future (a resourceVersion the object has not reached), invalid (names no object). The projector deletes them from the stream; a replay leaves them out."},
			[]string{"reason"}),
		reports: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "reports_total",
			Help: "Report writes by outcome: created, applied, deleted, unchanged (already equal), stale (the report holds a newer state), absent (nothing to delete), gone (the namespace no longer exists)."},
			[]string{"outcome"}),
		conflicts: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "write_conflicts_total",
			Help: "Report writes that met a concurrent writer (resourceVersion conflict or a create race) and were folded again."}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "lag_seconds",
			Help:    "Time from a result's evaluation (ResultEvent.Timestamp) to its report being written or found current.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16)}),
		flushSize: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "flush_resources",
			Help:    "Resources written by one flush of the coalescing window.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 12)}),
		writeTime: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "write_seconds",
			Help:    "Time to read, fold again if needed, and write one report.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 14)}),
		copies: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "results_copied_total",
			Help: "Verified results the projector copied to the verified subject of their resource (one message per fold that changed, holding the newest result of each policy), which no admission can push out of VERDICT_RESULTS."}),
		copyFailures: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "results_copy_failures_total",
			Help: "Verified copies that could not be queued for publishing (made again at the resource's next flush); failures to store them count in verdict_queue_publish_dropped_total{publisher=\"reporter-verified\"}."}),
		pending: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "results_pending",
			Help: "Result messages (one result, or an admission's batch of them) this replica holds pending (their resource not found yet, within the grace period): unacknowledged, out of the worker slots, delivered again later; bounded per replica (256 by default)."}),
		pendingBytes: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "results_pending_bytes",
			Help: "Size of the result messages this replica holds pending; bounded per replica (4 MiB by default)."}),
		pendingDropped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "results_pending_dropped_total",
			Help: "Pending result messages given up without a verdict, by reason: full (the replica's pending set and its list of results to recheck were both full, as under a flood of forged results), failed (a remembered result could not be rechecked, or its report written, within the attempts), shutdown (the replica stopped while it was remembered). Left in VERDICT_RESULTS: the next fold of the resource (at its next result) picks it up if its resource exists."},
			[]string{"reason"}),
		pendingRechecks: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "results_pending_rechecks",
			Help: "Pending result messages beyond the pending set that this replica remembers for a recheck (their messages acknowledged, still in the stream); bounded per replica (16384 by default)."}),
		recovered: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "results_recovered_total",
			Help: "Pending result messages remembered for a recheck (beyond the pending set) that a recheck verified: their reports were written from the stream."}),
		unreadable: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "results_unreadable_total",
			Help: "Results whose resource's kind the reporter may not read (RBAC: the chart's reporter.rbac.readRules, reporter.rbac.readSecrets), so it can neither confirm nor refuse them: acknowledged and left in VERDICT_RESULTS, out of every report (a fold with one is partial) until the right is granted; by the projector per message, by a rebuild per result."}),
		absent: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "checker_absent_cached",
			Help: "References the checker remembers as not found (for a second), so that results naming a missing uid cost one API call a second at most."}),
	}
	for _, c := range []prometheus.Collector{m.consumed, m.undecodable, m.unverified, m.reports, m.conflicts, m.lag, m.flushSize, m.writeTime, m.copies, m.copyFailures,
		m.pending, m.pendingBytes, m.pendingDropped, m.pendingRechecks, m.recovered, m.unreadable, m.absent} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("%w: reporter metrics registered twice on one registry: share one Metrics", ErrInvalidOption)
			}
			return nil, fmt.Errorf("register reporter metrics: %w", err)
		}
	}
	for _, st := range apicheck.RejectedStatuses() {
		m.unverified.WithLabelValues(string(st))
	}
	for _, r := range pendingDropReasons() {
		m.pendingDropped.WithLabelValues(r)
	}
	for _, o := range []WriteOutcome{OutcomeCreated, OutcomeApplied, OutcomeDeleted, OutcomeUnchanged, OutcomeStale, OutcomeAbsent, OutcomeGone} {
		m.reports.WithLabelValues(string(o))
	}
	return m, nil
}
