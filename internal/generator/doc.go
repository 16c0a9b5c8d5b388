// Package generator works the generate items of VERDICT_WORK: the
// generate rules an admitted request triggered (internal/webhook publishes
// them before it answers, see DESIGN.md invariant 2). Any number of
// replicas share the durable consumer bus.ConsumerGenerator through a
// queue.Runner; each item is worked by exactly one of them at a time, and
// may be delivered again (at-least-once): every write is idempotent.
//
// An item is never taken at its word (invariant 9). Before anything is
// written:
//
//  1. the trigger is checked with internal/platform/apicheck (it exists with the
//     item's uid; a CREATE not stored yet is asked about again within the
//     checker's grace period), then read whole from the API; a trigger
//     that is gone, has another uid or is being deleted ends the item,
//     skipped and counted with the reason;
//  2. the policy is read from the API (ClusterPolicy, or Policy for a
//     "namespace/name" key) and its current spec compiled with the engine;
//     a policy that is gone, or was deleted and created again (another
//     uid), ends the item; nothing the message carries about the rule's
//     output (WorkItem.Targets) is used;
//  3. the rule is evaluated on the trigger as it is now (engine.Generate,
//     the admission's operation, the requester from the item where the
//     webhook's caller proved to be the API server or the item is the
//     trigger's creation (requester.go), the labels of the trigger's
//     namespace, the PolicyExceptions in the API);
//  4. each generated object must be of a served kind, fit its kind's scope,
//     and, for a namespaced Policy, go into the policy's own namespace.
//
// Then each object is written with server-side apply under one field
// manager (FieldManager, force) at the name the rule gives it, with the
// labels Kyverno's background controller puts on downstream resources
// (Labels). Applying the same object again is a no-op for the API server,
// so a duplicated or redelivered item changes nothing.
//
// What becomes of an item is one outcome: processed (ack), skipped (ack,
// with a reason), retried (nak with backoff: API errors, a trigger not
// stored yet, an evaluation error) or dead-lettered (VERDICT_DEAD with the
// reason: at once for what cannot succeed, such as an object the API
// server refuses as invalid or forbidden, a forbidden namespace, an
// undecodable item, clone rules and mutate items, which are not built
// yet; after the last attempt for transient failures that never cleared).
// Each is counted by the runner in
// verdict_queue_work_items_total{consumer="generator",kind,outcome,reason}.
package generator
