// Package reporter projects VERDICT_RESULTS into PolicyReports and
// ClusterPolicyReports (wgpolicyk8s.io/v1alpha2): one report per resource,
// named by the resource's UID, the fold of the newest verified result of
// every policy on that resource. The stream is the state; a report is only ever
// a function of it, so any replica can write any report and `reporter
// replay` rebuilds them all.
//
// # Fold
//
// Fold is pure: the results of one resource (every stored message of its
// subjects, with their stream sequences) become a report object: the
// newest result of each policy by CompareResults (policy version, a
// policyDeleted retraction, resource version, evaluation time, sequence;
// VERDICT_RESULTS keeps a short history per subject and messages arrive in
// any order), with the resource as scope and as a non-controller owner, a
// summary, one result per rule sorted by policy and rule, and the highest
// sequence of the newest results as the annotation
// verdict.dev/last-sequence. The same results in any order give a
// byte-identical object. A resource without rule results folds to no
// object: its report must not exist.
//
// # Checks
//
// No result is folded on its own word (DESIGN.md, invariant 9): every
// reader checks each result with a verify.Checker (its resource exists
// with its uid, at its resourceVersion or later) and folds only verified
// ones; while a result of a resource is still pending (a CREATE is
// evaluated before the object is stored) the resource's fold is partial
// (Report.Partial): it replaces only an older report and deletes none. The
// projector deletes the messages the checker rejects from the stream and
// counts them (verdict_reporter_results_unverified_total).
//
// # Writer
//
// Writer.Write reads the current report and skips the write when its
// last-sequence is higher (stale) or equal with the same content
// (unchanged); otherwise it creates the report, or server-side applies it
// (field manager verdict-reporter, force) with the read resourceVersion.
// A concurrent writer makes the create or the apply fail; the writer then
// reads the stream again, folds again and retries with backoff. A fold
// without results deletes the report, with the read resourceVersion as a
// precondition. Writes go through a token bucket (WithWriteQPS). The
// writer remembers what it wrote (WithMemory) so that the many deliveries
// of an unchanged state cost no API request.
//
// # Projector
//
// A Projector runs the queue runner over the shared durable consumer
// "reporter" on VERDICT_RESULTS; any number of replicas share it, none
// leads. A message is checked, then marks its resource dirty and waits;
// after the coalescing window (or at once when every handler waits) a
// flush reads the dirty resources' results with Replay filtered to
// ResultsOfResource (every message; one Replay per batch of resources),
// checks, folds and writes each, and only then are the messages
// acknowledged. A crash before the write means redelivery, and
// the idempotent, guarded write makes redelivery harmless.
//
// # Rebuild
//
// Rebuild replays the whole stream (every message), groups it by resource,
// checks, folds and writes every report (optionally pruning Verdict's
// reports that have no results), with progress reports: the same reports
// as live operation.
//
// # Who uses it
//
// The background scan (internal/reports/scanner) reads and checks results with
// ReadPolicy, CheckResults and Newest, and writes or deletes reports
// through the same Writer; this package does not import it.
// internal/reports/app composes the projector, Rebuild and the scanner
// into cmd/reporter's `run` and `replay` commands.
package reporter
