package main

import (
	"testing"
)

func TestMetricValue(t *testing.T) {
	exposition := []byte("# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.34\nprocess_cpu_seconds_total_other 1\ngo_memstats_mallocs_total 1.2345e+06\n")
	if got, err := metricValue(exposition, "process_cpu_seconds_total"); err != nil || got != 12.34 {
		t.Fatalf("%v, %v", got, err)
	}
	if got, err := metricValue(exposition, "go_memstats_mallocs_total"); err != nil || got != 1234500 {
		t.Fatalf("%v, %v", got, err)
	}
	if _, err := metricValue([]byte("go_goroutines 3\n"), "process_cpu_seconds_total"); err == nil {
		t.Fatal("no error without the metric")
	}
}

// Two runs number their reviews from different points (issue 33: both
// used to start at 1, and a second run within JetStream's duplicate
// window had its results dropped as the first's).
func TestRunsHaveUIDsOfTheirOwn(t *testing.T) {
	seen := map[uint64]bool{}
	for range 8 {
		start := newUIDCounter().Load()
		if start&(1<<40-1) != 0 || seen[start] {
			t.Fatalf("start %#x: want a fresh start with 2^40 uids before the next run's", start)
		}
		seen[start] = true
	}
}
