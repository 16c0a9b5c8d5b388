package scanner

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// skippedForbidden is the reason of verdict_scanner_skipped_total for a
// kind the reporter may not list.
const skippedForbidden = "forbidden"

// metrics are the scanner's collectors (verdict_scanner_*).
type metrics struct {
	items       *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	published   *prometheus.CounterVec
	unpublished *prometheus.CounterVec
	evaluated   prometheus.Counter
	results     *prometheus.CounterVec
	purged      prometheus.Counter
	skipped     *prometheus.CounterVec
	candidates  *prometheus.CounterVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	const ns, sub = "verdict", "scanner"
	m := &metrics{
		items: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "items_total",
			Help: "Scan items worked on, by action (policy, all, policyDeleted, resourceGone, candidate, candidateGone) and outcome (done, retry, poison)."}, []string{"action", "outcome"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub, Name: "item_seconds",
			Help: "Time to work on one scan item, by action.", Buckets: prometheus.ExponentialBuckets(0.005, 2, 16)}, []string{"action"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "items_published_total",
			Help: "Scan items published to VERDICT_WORK (duplicates from other replicas included; the stream collapses them)."}, []string{"action"}),
		unpublished: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "items_unpublished_total",
			Help: "Scan items that could not be published, by reason; the periodic scan reconciles what they would have done."}, []string{"reason"}),
		evaluated: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "resources_evaluated_total",
			Help: "Resources a policy scan evaluated."}),
		results: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "results_total",
			Help: "Scan results by what became of them: published (changed), unchanged (not republished), retracted."}, []string{"outcome"}),
		purged: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "results_purged_total",
			Help: "Results purged from VERDICT_RESULTS because their resource no longer exists."}),
		skipped: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "skipped_total",
			Help: "Policy scans or kinds left out, by reason: background off, kind wildcard, forbidden (a kind the policy names that the reporter may not list: grant it in the chart's reporter.rbac.readRules, Secrets with reporter.rbac.readSecrets)."}, []string{"reason"}),
		candidates: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: "candidate_evaluated_total",
			Help: "What candidate policies were evaluated on, by source: request (the admission log's recorded requests), resource (the cluster's objects)."}, []string{"source"}),
	}
	for _, c := range []prometheus.Collector{m.items, m.duration, m.published, m.unpublished, m.evaluated, m.results, m.purged, m.skipped, m.candidates} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register scanner metrics: %w", err)
		}
	}
	m.skipped.WithLabelValues(skippedForbidden)
	return m, nil
}
