package platform

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/pkg/imageverify"
)

// imageMetrics are the metrics of image verification: verifications by
// outcome, cache lookups, and the latency of registry requests. No label
// carries a registry host or an image: a Pod can name any, and each would
// be a new series.
type imageMetrics struct {
	verifications *prometheus.CounterVec
	duration      *prometheus.HistogramVec
	lookups       *prometheus.CounterVec
	registry      *prometheus.HistogramVec
}

// newImageMetrics registers the metrics on reg.
func newImageMetrics(reg prometheus.Registerer) (*imageMetrics, error) {
	m := &imageMetrics{
		verifications: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "verdict", Subsystem: "image", Name: "verifications_total",
			Help: "Image verifications (one image for one verifyImages entry) by outcome (pass, fail, error, unsupported) and whether the result came from the cache."},
			[]string{"outcome", "cached"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "verdict", Subsystem: "image", Name: "verification_duration_seconds",
			Help:    "Time to verify one image for one verifyImages entry, cache lookups and registry calls included, by outcome.",
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"outcome"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "verdict", Subsystem: "image", Name: "verification_cache_lookups_total",
			Help: "Lookups of the image-verification cache (memory, then the bucket the replicas share), by result (hit, miss)."}, []string{"result"}),
		registry: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "verdict", Subsystem: "registry", Name: "request_duration_seconds",
			Help:    "Latency of requests to image registries, by method and status class (2xx, 3xx, 4xx, 5xx, or error when no answer came).",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}}, []string{"method", "code"}),
	}
	for _, c := range []prometheus.Collector{m.verifications, m.duration, m.lookups, m.registry} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("%w: image metrics registered twice on one registry: make one verifier per registry", ErrInvalidConfig)
			}
			return nil, fmt.Errorf("register image metrics: %w", err)
		}
	}
	for _, o := range []imageverify.Outcome{imageverify.OutcomePass, imageverify.OutcomeFail, imageverify.OutcomeError, imageverify.OutcomeUnsupported} {
		m.verifications.WithLabelValues(string(o), "false")
	}
	m.verifications.WithLabelValues(string(imageverify.OutcomePass), "true")
	m.lookups.WithLabelValues("hit")
	m.lookups.WithLabelValues("miss")
	return m, nil
}

func (m *imageMetrics) Verified(o imageverify.Outcome, cached bool, d time.Duration) {
	m.verifications.WithLabelValues(string(o), strconv.FormatBool(cached)).Inc()
	m.duration.WithLabelValues(string(o)).Observe(d.Seconds())
}

func (m *imageMetrics) CacheLookup(hit bool) {
	result := "miss"
	if hit {
		result = "hit"
	}
	m.lookups.WithLabelValues(result).Inc()
}

// transport times each registry request through next.
func (m *imageMetrics) transport(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(req *http.Request) (*http.Response, error) {
		start := time.Now()
		resp, err := next.RoundTrip(req)
		code := "error"
		if err == nil {
			code = strconv.Itoa(resp.StatusCode/100) + "xx"
		}
		m.registry.WithLabelValues(req.Method, code).Observe(time.Since(start).Seconds())
		return resp, err
	})
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
