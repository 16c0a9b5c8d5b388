package queueprom

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/internal/testkit/golden"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// touching is the factory of NewMetrics that also keeps, for each metric,
// a function that sets one series of it (label values a, b, ...).
type touching struct {
	factory
	touch []func()
}

func labelValues(s queue.MetricSpec) []string {
	vals := make([]string, len(s.Labels))
	for i := range vals {
		vals[i] = string(rune('a' + i))
	}
	return vals
}

func (f *touching) CounterVec(s queue.MetricSpec) queue.CounterVec {
	v := f.factory.CounterVec(s)
	f.touch = append(f.touch, func() { v.WithLabelValues(labelValues(s)...).Inc() })
	return v
}

func (f *touching) GaugeVec(s queue.MetricSpec) queue.GaugeVec {
	v := f.factory.GaugeVec(s)
	f.touch = append(f.touch, func() { v.WithLabelValues(labelValues(s)...).Set(2) })
	return v
}

func (f *touching) HistogramVec(s queue.MetricSpec) queue.ObserverVec {
	v := f.factory.HistogramVec(s)
	f.touch = append(f.touch, func() { v.WithLabelValues(labelValues(s)...).Observe(0.3) })
	return v
}

// exposition writes what g gathers: each metric's help, type and series,
// with a histogram's buckets.
func exposition(t *testing.T, g prometheus.Gatherer) []byte {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	for _, mf := range mfs {
		name := mf.GetName()
		fmt.Fprintf(&b, "# HELP %s %s\n# TYPE %s %s\n", name, mf.GetHelp(), name, strings.ToLower(mf.GetType().String()))
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, lp := range m.GetLabel() {
				ls = append(ls, lp.GetName()+"="+strconv.Quote(lp.GetValue()))
			}
			labels := "{" + strings.Join(ls, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				fmt.Fprintf(&b, "%s%s %g\n", name, labels, m.GetCounter().GetValue())
			case m.GetGauge() != nil:
				fmt.Fprintf(&b, "%s%s %g\n", name, labels, m.GetGauge().GetValue())
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				for _, bk := range h.GetBucket() {
					fmt.Fprintf(&b, "%s_bucket%s le=%g %d\n", name, labels, bk.GetUpperBound(), bk.GetCumulativeCount())
				}
				fmt.Fprintf(&b, "%s_sum%s %g\n%s_count%s %d\n", name, labels, h.GetSampleSum(), name, labels, h.GetSampleCount())
			}
		}
	}
	return b.Bytes()
}

// TestMetricsGolden: the services' /metrics show the queue's metrics with
// the names, help, types, labels and buckets of testdata/metrics.txt
// (written from the collectors pkg/queue had before they moved here).
func TestMetricsGolden(t *testing.T) {
	var f touching
	queue.MetricsFrom(&f)
	reg := prometheus.NewRegistry()
	for _, c := range f.collectors {
		reg.MustRegister(c)
	}
	for _, touch := range f.touch {
		touch()
	}
	golden.Assert(t, "testdata/metrics.txt", exposition(t, reg))
}

// One Metrics per registerer: a second registration fails. A failed
// registration registers nothing.
func TestRegisterTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	if _, err := NewMetrics(reg); err != nil {
		t.Fatal(err)
	}
	if _, err := NewMetrics(reg); !errors.Is(err, queue.ErrInvalidOption) {
		t.Errorf("second registration: %v, want ErrInvalidOption", err)
	}

	// A registration that fails part way takes back what it registered.
	failing := &failingRegisterer{Registry: prometheus.NewRegistry(), after: 3}
	if _, err := NewMetrics(failing); err == nil || errors.Is(err, queue.ErrInvalidOption) {
		t.Errorf("failing registration: %v", err)
	}
	if failing.registered != 0 {
		t.Errorf("%d collectors left registered after a failed registration", failing.registered)
	}

	if _, err := NewMetrics(nil); err != nil {
		t.Errorf("nil registerer: %v", err)
	}
}

// failingRegisterer fails the registration after the first few, and
// counts the collectors registered.
type failingRegisterer struct {
	*prometheus.Registry
	after      int
	registered int
}

func (r *failingRegisterer) Register(c prometheus.Collector) error {
	if r.after == 0 {
		return errors.New("refused")
	}
	r.after--
	if err := r.Registry.Register(c); err != nil {
		return err
	}
	r.registered++
	return nil
}

func (r *failingRegisterer) Unregister(c prometheus.Collector) bool {
	if !r.Registry.Unregister(c) {
		return false
	}
	r.registered--
	return true
}
