package webhook

import (
	"context"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"

	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/platform/kyvernometrics"
	"github.com/verdict-dev/verdict/pkg/engine"
)

const metricsNamespace = "verdict_webhook"

// metrics are the server's Prometheus metrics.
type metrics struct {
	requests     *prometheus.CounterVec
	latency      *prometheus.HistogramVec
	panics       *prometheus.CounterVec
	workFailures *prometheus.CounterVec
	workItems    prometheus.Counter
	inFlight     prometheus.Gauge
	overloaded   prometheus.Counter
	refused      *prometheus.CounterVec
	ttlChecks    *prometheus.CounterVec
	shadow       *prometheus.CounterVec
	// kyverno records under Kyverno's names (Config.KyvernoMetrics); nil
	// when off.
	kyverno *kyvernometrics.Metrics
}

// Reasons a work publish failed, as metric labels.
const (
	reasonTimeout    = "timeout"
	reasonError      = "error"
	reasonStreamFull = "streamFull"
)

func newMetrics(reg prometheus.Registerer, src PolicySource, cert *certs.Reloader, kyverno bool) (*metrics, error) {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "requests_total",
			Help: "Requests served, by endpoint and outcome (allowed, denied, patched, warned, rejected, error, ok, unready).",
		}, []string{"endpoint", "outcome"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: metricsNamespace, Name: "request_duration_seconds",
			Help:    "Time to answer a request, by endpoint.",
			Buckets: []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
		}, []string{"endpoint"}),
		panics: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "panics_total",
			Help: "Panics recovered while serving a request, by endpoint.",
		}, []string{"endpoint"}),
		workFailures: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "work_publish_failures_total",
			Help: "Generate work that could not be published before the deadline, by reason (timeout, streamFull: VERDICT_WORK at its limits, error).",
		}, []string{"reason"}),
		workItems: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "work_published_total",
			Help: "Generate work items acknowledged by the work sink.",
		}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "evaluations_in_flight",
			Help: "Admission and policy-validation requests being evaluated now.",
		}),
		overloaded: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "overload_rejections_total",
			Help: "Requests answered 429 because every evaluation slot stayed busy (see --max-concurrent-evaluations).",
		}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: metricsNamespace, Name: "refused_reviews_total",
			Help: "Requests answered 4xx or 5xx before evaluation, by reason (identifier: a uid, name, namespace or resourceVersion the API server cannot have sent; userInfo: beyond what an API server sends).",
		}, []string{"reason"}),
	}
	m.ttlChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "ttl_label_checks_total",
		Help: "Writes that set or changed the cleanup.kyverno.io/ttl label, by result (allowed: the requester may delete the object; denied: may not; error: the API could not answer, denied).",
	}, []string{"result"})
	m.shadow = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace, Name: "shadow_decisions_total",
		Help: "In shadow mode (--shadow), the answers the validating endpoints would have given (allowed, warned, denied); every request was allowed.",
	}, []string{"outcome"})
	collectors := []prometheus.Collector{
		m.requests, m.latency, m.panics, m.workFailures, m.workItems, m.inFlight, m.overloaded, m.refused, m.ttlChecks, m.shadow,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "invalid_policies",
			Help: "Policies and exceptions of the current source that could not be loaded or compiled.",
		}, func() float64 { return float64(len(src.Invalid())) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Namespace: metricsNamespace, Name: "certificate_expiry_timestamp_seconds",
			Help: "NotAfter of the serving certificate, in Unix seconds; 0 when none is loaded.",
		}, func() float64 {
			c := cert.Certificate()
			if c == nil || c.Leaf == nil {
				return 0
			}
			return float64(c.Leaf.NotAfter.Unix())
		}),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("register metrics: %w", err)
		}
	}
	// Every reason from the start, at 0: an alert on the increase of a
	// series fires at the first failure only if the series was there
	// before it.
	for _, r := range []string{reasonTimeout, reasonError, reasonStreamFull} {
		m.workFailures.WithLabelValues(r)
	}
	if kyverno {
		var err error
		if m.kyverno, err = kyvernometrics.New(reg); err != nil {
			return nil, err
		}
		if err := kyvernometrics.RuleInfo(reg, func() []*engine.Policy {
			set, err := src.Set(context.Background())
			if err != nil || set == nil {
				return nil
			}
			return set.Policies
		}); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// KyvernoPolicyChanges returns the watch handler that counts
// kyverno_policy_changes_total, for the informers of ClusterPolicies and
// Policies (the cluster's policy cache), when Kyverno's metrics are on
// (Config.KyvernoMetrics); nil otherwise.
func (s *Server) KyvernoPolicyChanges() cache.ResourceEventHandler {
	if s.metrics.kyverno == nil {
		return nil
	}
	return s.metrics.kyverno.PolicyChanges()
}
