// Package cleaner runs the cleanup policies (ClusterCleanupPolicy,
// CleanupPolicy) and the deleting policies (DeletingPolicy,
// NamespacedDeletingPolicy: their resource rules resolved through
// discovery, their CEL conditions judged by the engine; watched once
// their CRDs are served) on their schedules and deletes the resources whose
// cleanup.kyverno.io/ttl label says they are due, with no CronJob and no
// leader:
//
//   - every replica watches the cleanup policies and keeps one JetStream
//     message schedule per policy in VERDICT_SCHEDULES (PolicySchedule:
//     the policy's standard cron with a seconds field added, its time
//     zone, and a body naming the policy), with compare-before-write
//     puts that any number of replicas can make at once; a changed
//     policy's schedule is replaced, a deleted one's removed;
//   - at each tick the server stores one message, which VERDICT_WORK
//     sources as work (verdict.work.cleanup.<key>); one replica takes it
//     from the shared durable consumer bus.ConsumerCleaner;
//   - the replica reads the policy from the API (the tick only names
//     it: a policy that is gone removes its own schedule, one whose
//     schedule changed since is not run), lists the kinds it names
//     (discovery; a CleanupPolicy only in its namespace), judges each
//     resource with the engine (engine.Cleanup: match, exclude,
//     conditions with the resource as `target`) and deletes it with a
//     UID precondition (not found: done; another object of the same
//     name: left alone), recording an Event per deletion or failure as
//     Kyverno's cleanup controller does, and the run's time in the
//     policy's status.lastExecutionTime;
//   - the TTL sweep is one more schedule ("ttl", every TTL interval):
//     its tick makes one replica list every served, listable, deletable
//     kind by the label (metadata only) and delete what is due.
//
// A tick ends in one outcome (processed, skipped, retried with backoff,
// dead-lettered with its reason), counted in
// verdict_cleaner_ticks_total; deletions are counted in
// verdict_cleaner_deletions_total{policy,kind,outcome}.
package cleaner
