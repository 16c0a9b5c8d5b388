package latency

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(v ...int) []time.Duration {
		out := make([]time.Duration, len(v))
		for i, x := range v {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	tests := map[string]struct {
		sorted []time.Duration
		p      float64
		want   time.Duration
	}{
		"empty":                 {sorted: nil, p: 99, want: 0},
		"one":                   {sorted: ms(7), p: 99, want: 7 * time.Millisecond},
		"median of odd":         {sorted: ms(1, 2, 3), p: 50, want: 2 * time.Millisecond},
		"median of even":        {sorted: ms(1, 2, 3, 4), p: 50, want: 2500 * time.Microsecond},
		"p99 of 1..101":         {sorted: ms(seq(101)...), p: 99, want: 100 * time.Millisecond},
		"p95 between two ranks": {sorted: ms(0, 10), p: 95, want: 9500 * time.Microsecond},
		"max":                   {sorted: ms(1, 5, 9), p: 100, want: 9 * time.Millisecond},
		"min":                   {sorted: ms(1, 5, 9), p: 0, want: 1 * time.Millisecond},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Percentile(tc.sorted, tc.p); got != tc.want {
				t.Fatalf("Percentile(%v) = %v, want %v", tc.p, got, tc.want)
			}
		})
	}
}

func seq(n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = i + 1
	}
	return out
}

func TestSummarize(t *testing.T) {
	d := []time.Duration{4 * time.Millisecond, time.Millisecond, 3 * time.Millisecond, 2 * time.Millisecond}
	s := Summarize(d)
	if s.N != 4 || s.Min != time.Millisecond || s.Max != 4*time.Millisecond || s.Avg != 2500*time.Microsecond || s.Med != 2500*time.Microsecond {
		t.Fatalf("%+v", s)
	}
	if (Summarize(nil) != Summary{}) {
		t.Fatal("an empty sample is not the zero Summary")
	}
	if got := Ms(1234567 * time.Nanosecond); got != "1.23ms" {
		t.Fatal(got)
	}
}
