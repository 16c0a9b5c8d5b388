// Package latency summarises the latencies of a load run: average,
// percentiles and maximum, the percentiles interpolated between the two
// nearest ranks as k6 computes them (so that figures taken here sit beside
// k6's summaries, such as Kyverno's published admission benchmark). What
// cmd/loadgen and the API-server benchmark report.
package latency

import (
	"slices"
	"strconv"
	"time"
)

// Summary is what a run reports of its latencies.
type Summary struct {
	N                                 int
	Avg, Min, Med, P90, P95, P99, Max time.Duration
}

// Summarize sorts d in place and summarises it; an empty d gives a zero
// Summary.
func Summarize(d []time.Duration) Summary {
	if len(d) == 0 {
		return Summary{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	return Summary{
		N:   len(d),
		Avg: sum / time.Duration(len(d)),
		Min: d[0],
		Med: Percentile(d, 50),
		P90: Percentile(d, 90),
		P95: Percentile(d, 95),
		P99: Percentile(d, 99),
		Max: d[len(d)-1],
	}
}

// Percentile is the p-th percentile (0 to 100) of sorted: the value at
// rank p/100·(n-1), interpolated linearly between the two ranks around it.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	switch n := len(sorted); {
	case n == 0:
		return 0
	case n == 1 || p <= 0:
		return sorted[0]
	case p >= 100:
		return sorted[n-1]
	}
	rank := p / 100 * float64(len(sorted)-1)
	lo := int(rank)
	if lo+1 >= len(sorted) {
		return sorted[lo]
	}
	frac := rank - float64(lo)
	return sorted[lo] + time.Duration(frac*float64(sorted[lo+1]-sorted[lo]))
}

// Ms writes d in milliseconds with two decimals ("12.34ms").
func Ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 2, 64) + "ms"
}
