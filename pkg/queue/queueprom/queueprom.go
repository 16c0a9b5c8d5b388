// Package queueprom records the metrics of package queue (verdict_queue_*)
// with prometheus collectors, for the services that serve /metrics:
//
//	m, err := queueprom.NewMetrics(reg)
//	...
//	conn, err := queue.Connect(ctx, queue.WithURL(url), queue.WithMetrics(m))
//
// It is apart so that a program linking package queue without serving
// metrics (the pipeline CLI) links no prometheus client. The metrics'
// names, help, labels and buckets are package queue's (queue.MetricSpec);
// this package only turns them into collectors.
package queueprom

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/pkg/queue"
)

// NewMetrics makes the queue's metrics as prometheus collectors and
// registers them on reg; a nil reg means a fresh prometheus.NewRegistry().
// A registerer takes them once: registering again fails with an error
// wrapping queue.ErrInvalidOption (make one Metrics per registry and share
// it between connections), and registers none of them.
func NewMetrics(reg prometheus.Registerer) (*queue.Metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	var f factory
	m := queue.MetricsFrom(&f)
	for i, c := range f.collectors {
		if err := reg.Register(c); err != nil {
			for _, done := range f.collectors[:i] {
				reg.Unregister(done)
			}
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				return nil, fmt.Errorf("%w: metrics already registered on this registerer: share one Metrics", queue.ErrInvalidOption)
			}
			return nil, fmt.Errorf("register queue metrics: %w", err)
		}
	}
	return m, nil
}

// factory makes collectors of queue.MetricSpecs and keeps them for
// registering.
type factory struct {
	collectors []prometheus.Collector
}

func (f *factory) CounterVec(s queue.MetricSpec) queue.CounterVec {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: s.Name, Help: s.Help}, s.Labels)
	f.collectors = append(f.collectors, v)
	return counterVec{v}
}

func (f *factory) GaugeVec(s queue.MetricSpec) queue.GaugeVec {
	v := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: s.Name, Help: s.Help}, s.Labels)
	f.collectors = append(f.collectors, v)
	return gaugeVec{v}
}

func (f *factory) HistogramVec(s queue.MetricSpec) queue.ObserverVec {
	v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: s.Name, Help: s.Help, Buckets: s.Buckets}, s.Labels)
	f.collectors = append(f.collectors, v)
	return histogramVec{v}
}

// The vectors return prometheus's metrics, which are queue's Counter, Gauge
// and Observer.
type (
	counterVec   struct{ v *prometheus.CounterVec }
	gaugeVec     struct{ v *prometheus.GaugeVec }
	histogramVec struct{ v *prometheus.HistogramVec }
)

func (c counterVec) WithLabelValues(values ...string) queue.Counter {
	return c.v.WithLabelValues(values...)
}

func (g gaugeVec) WithLabelValues(values ...string) queue.Gauge {
	return g.v.WithLabelValues(values...)
}

func (h histogramVec) WithLabelValues(values ...string) queue.Observer {
	return h.v.WithLabelValues(values...)
}
