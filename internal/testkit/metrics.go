package testkit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// MetricValue reads the first series of the counter, gauge or histogram
// name whose labels include labels (a histogram's value is its count of
// observations), and whether there is one.
func MetricValue(t testing.TB, reg prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue series
				}
			}
			if g := m.GetGauge(); g != nil {
				return g.GetValue(), true
			}
			if h := m.GetHistogram(); h != nil {
				return float64(h.GetSampleCount()), true
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}
