package reportindex

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterMetrics registers the serving mode's collectors
// (verdict_report_index_*) on reg: what the feed did with the messages
// it read (none is left out without being counted here), and what the
// index holds. They are read from the feed and the index at each scrape.
func RegisterMetrics(reg prometheus.Registerer, x *Index, f *Feed) error {
	const ns, sub = "verdict", "report_index"
	counter := func(name, help string, v func(FeedStats) uint64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help},
			func() float64 { return float64(v(f.Stats())) })
	}
	gauge := func(name, help string, v func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: name, Help: help}, v)
	}
	collectors := []prometheus.Collector{
		counter("messages_read_total", "Messages of VERDICT_RESULTS read by the feed since the replica started.",
			func(s FeedStats) uint64 { return s.Read }),
		counter("results_applied_total", "Results folded into the index (changing a report or not).",
			func(s FeedStats) uint64 { return s.Applied }),
		counter("results_rejected_total", "Results left out because the API server does not confirm their resource (not found after the grace period, another uid, a resourceVersion not reached, or naming no object); each is logged as resultRejected with its reason.",
			func(s FeedStats) uint64 { return s.Rejected }),
		counter("results_unreadable_total", "Results of a kind this replica may not watch (RBAC: the chart's reporter.rbac.readRules, reporter.rbac.readSecrets): left out, neither confirmed nor refused; each is logged as resultKindUnreadable.",
			func(s FeedStats) uint64 { return s.Unreadable }),
		counter("messages_undecodable_total", "Messages of VERDICT_RESULTS that are no result and were left out.",
			func(s FeedStats) uint64 { return s.Undecodable }),
		counter("results_loaded_total", "Results taken from a snapshot at the start (and confirmed against the API server).",
			func(s FeedStats) uint64 { return s.Loaded }),
		counter("snapshot_load_failures_total", "Snapshots found at the start but not used (damaged, of an older incarnation of the stream): the stream was read in full; each is logged as reportIndexSnapshotNotUsed.",
			func(s FeedStats) uint64 { return s.SnapshotLoadFailures }),
		counter("snapshots_written_total", "Snapshots of the index this replica stored.",
			func(s FeedStats) uint64 { return s.SnapshotsWritten }),
		counter("snapshot_write_failures_total", "Snapshots this replica failed to store; each is logged as reportIndexSnapshotNotWritten.",
			func(s FeedStats) uint64 { return s.SnapshotWriteFailures }),
		gauge("results_pending", "Results waiting for their resource to be seen by the replica's watches (within the grace period).",
			func() float64 { return float64(f.Stats().Pending) }),
		gauge("resources", "Resources the index holds results for.",
			func() float64 { return float64(x.Len()) }),
		gauge("sequence", "The highest VERDICT_RESULTS sequence folded into the index: compare replicas, and with the stream's last sequence.",
			func() float64 { return float64(x.Seq()) }),
		gauge("ready", "1 once the index has caught up with the stream as it stood when the replica started (the replica serves from then on).",
			func() float64 {
				select {
				case <-f.Ready():
					return 1
				default:
					return 0
				}
			}),
	}
	for _, c := range collectors {
		if err := reg.Register(c); err != nil {
			return fmt.Errorf("register report index metrics: %w", err)
		}
	}
	return nil
}
