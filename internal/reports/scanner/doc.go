// Package scanner is the background scan: it evaluates policies on what
// admission never saw (objects that existed before a policy, or were last
// admitted under an older version of it) and publishes the results to
// VERDICT_RESULTS, where internal/reports/reporter projects them into reports like
// any admission result. It also retracts the results of deleted policies
// and purges the results of deleted resources.
//
// # Work items
//
// A Scanner runs on the shared durable consumer "scanner" on
// VERDICT_WORK; any number of replicas share it and none leads. Work is
// partitioned by policy: a scan item (events.ScanItem on
// verdict.work.scan.*) names one policy, and whichever replica takes it
// scans that policy. Items have deterministic message ids, so the replicas
// that all see the same event publish one item between them:
//
//   - ScanPolicy: a policy created or changed, and every policy when a
//     replica starts (id: policy uid and resourceVersion);
//   - ScanPolicyDeleted: the policy's results are retracted (id: policy
//     uid);
//   - ScanAll: a tick of the periodic scan, a JetStream message schedule
//     (ScheduleKey, on VERDICT_SCHEDULES, sourced into VERDICT_WORK) that
//     no replica has to keep a clock for; the replica that takes it
//     publishes one ScanPolicy item per policy (id: the tick's stream
//     sequence);
//   - ScanResourceGone: one of Verdict's reports was deleted
//     (WithReportWatch); when the resource is gone too its results are
//     purged, otherwise the report is written again from the stream.
//
// Every outcome is explicit (pkg/queue runner): done, retry with delay, or
// poison (dead-lettered with the reason).
//
// # A policy scan
//
// A policy scan reads the policy's stored results (reporter.ReadPolicy:
// its own subjects, its entries in the result batches, its verified copies)
// and, for each resource, takes the newest verified one
// (reporter.CheckResults, reporter.Newest) as the report shows it; lists
// the kinds the policy's validate and verifyImages rules name (a kind
// selected only by a wildcard is not listed, and a kind the reporter may
// not list is skipped, said so: scanKindForbidden,
// verdict_scanner_skipped_total{reason="forbidden"}); evaluates each
// object with the engine (engine.Check: validate rules, then images
// verified, from the cache the webhooks share); and
// publishes only the results that changed (events.SameOutcome), with ids
// made of the resource and policy versions, so a periodic scan of an
// unchanged cluster writes nothing. A resource the policy no longer
// selects gets a retraction (a result without rules); a resource that no
// longer exists has every result purged and its report deleted through the
// reporter's Writer. Policies with background: false are not scanned.
//
// # What it shares with the reporter
//
// The scanner reads and checks results the way the projector does, and
// writes or deletes reports through the same reporter.Writer (the same
// guards, the same write rate), so a report is still only ever the fold of
// the stream (docs/reporter.md). It imports internal/reports/reporter; the
// reporter does not know about it. internal/reports/app composes both into
// the reporter service (`reporter run`, with --scan, the default).
//
// Metrics are verdict_scanner_* (WithRegisterer).
package scanner
