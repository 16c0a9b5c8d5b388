package bus

import (
	"context"
	"slices"
	"strings"

	"github.com/verdict-dev/verdict/pkg/queue"
)

// Verdict's streams.
const (
	StreamResults   = "VERDICT_RESULTS"
	StreamWork      = "VERDICT_WORK"
	StreamSchedules = "VERDICT_SCHEDULES"
	StreamDead      = "VERDICT_DEAD"
)

// BucketSnapshots is the object store of the serving reporter's snapshots
// of its index of VERDICT_RESULTS (queue.Conn.PutSnapshot).
const BucketSnapshots = "VERDICT_SNAPSHOTS"

// Verdict's durable consumers (see DefaultConsumers).
const (
	ConsumerGenerator = "generator"
	ConsumerCleaner   = "cleaner"
	ConsumerScanner   = "scanner"
	ConsumerReporter  = "reporter"
)

// Subject prefixes of Verdict's streams (see DESIGN.md).
const (
	subjectRoot    = "verdict."
	resultsPrefix  = "verdict.results."
	verifiedPrefix = "verdict.verified."
	workPrefix     = "verdict.work."
	deadPrefix     = "verdict.dead."
	schedulePrefix = "verdict.schedule."
	tickPrefix     = "verdict.tick."
)

// The work kinds of VERDICT_WORK: what a worker does with a WorkItem, the
// work subject's second token.
const (
	WorkGenerate queue.WorkKind = "generate"
	WorkMutate   queue.WorkKind = "mutate"
	WorkCleanup  queue.WorkKind = "cleanup"
	WorkScan     queue.WorkKind = "scan"
)

// topology is where Verdict's work, dead letters and schedules live.
var topology = queue.Topology{
	Root:       subjectRoot,
	WorkStream: StreamWork, WorkPrefix: workPrefix,
	DeadStream: StreamDead, DeadPrefix: deadPrefix,
	ScheduleStream: StreamSchedules, SchedulePrefix: schedulePrefix, TickPrefix: tickPrefix,
	Kinds:          []queue.WorkKind{WorkGenerate, WorkMutate, WorkCleanup, WorkScan},
	SnapshotBucket: BucketSnapshots,
}

// Topology returns Verdict's topology, for queue.WithTopology: every
// connection of Verdict's services and CLI is made with it.
func Topology() queue.Topology {
	t := topology
	t.Kinds = slices.Clone(t.Kinds)
	return t
}

// ValidKind reports whether k is one of Verdict's work kinds.
func ValidKind(k queue.WorkKind) bool { return topology.ValidKind(k) }

// WorkSubject is the VERDICT_WORK subject of one unit of work:
// verdict.work.<kind>.<key>, the key encoded (and shortened when long). It
// fails with queue.ErrInvalidKind for an unknown kind.
func WorkSubject(kind queue.WorkKind, key string) (string, error) {
	return topology.WorkSubject(kind, key)
}

// WorkFilter is the filter matching all work of one kind.
func WorkFilter(kind queue.WorkKind) string { return topology.WorkFilter(kind) }

// ParseWorkSubject splits a work subject back into its kind and key.
func ParseWorkSubject(subject string) (queue.WorkKind, string, error) {
	return topology.ParseWorkSubject(subject)
}

// ScheduleTarget is the target of a message schedule whose ticks are work
// of kind on key: verdict.tick.<kind>.<key> in VERDICT_SCHEDULES, which
// VERDICT_WORK sources as WorkSubject(kind, key).
func ScheduleTarget(kind queue.WorkKind, key string) (string, error) {
	return topology.ScheduleTarget(kind, key)
}

// DeadSubject is the VERDICT_DEAD subject of a message that came from
// origin: verdict.work.generate.k dead-letters to
// verdict.dead.work.generate.k.
func DeadSubject(origin string) string { return topology.DeadSubject(origin) }

// ResultSubject is the VERDICT_RESULTS subject of one policy's latest result
// on one resource: verdict.results.<resource-uid>.<policy-key>, both encoded.
func ResultSubject(resourceUID, policyKey string) string {
	return resultsPrefix + queue.EncodeToken(resourceUID) + "." + queue.EncodeToken(policyKey)
}

// AppendResultSubject appends ResultSubject(resourceUID, policyKey) to b.
func AppendResultSubject(b []byte, resourceUID, policyKey string) []byte {
	b = queue.AppendEncodedToken(append(b, resultsPrefix...), resourceUID)
	return queue.AppendEncodedToken(append(b, '.'), policyKey)
}

// ResultsOfResource is the filter matching every result of one resource
// (the subjects a report folds, or purges when the resource goes away).
func ResultsOfResource(resourceUID string) string {
	return resultsPrefix + queue.EncodeToken(resourceUID) + ".*"
}

// ResultsOfPolicy is the filter matching every result of one policy.
func ResultsOfPolicy(policyKey string) string {
	return resultsPrefix + "*." + queue.EncodeToken(policyKey)
}

// VerifiedCopySubject is the subject of the reporter's copy of a verified
// result published on ResultSubject(uid, policy):
// verdict.verified.<resource-uid>.<policy-key>, in VERDICT_RESULTS too.
// Admissions publish only on result subjects, whose short history a flood
// of forged reviews can rotate; the copies keep a history of their own,
// which only the reporter writes (the webhook's NATS user may not), so no
// admission can push a verified result out of the stream (DESIGN.md
// invariant 10). The reporter's consumer does not select them.
func VerifiedCopySubject(resultSubject string) string {
	return verifiedPrefix + strings.TrimPrefix(resultSubject, resultsPrefix)
}

// VerifiedOfResource is the filter matching the verified copies of one
// resource's results (read, and purged, with ResultsOfResource).
func VerifiedOfResource(resourceUID string) string {
	return verifiedPrefix + queue.EncodeToken(resourceUID) + ".*"
}

// VerifiedOfPolicy is the filter matching the verified copies of one
// policy's results (ResultsOfPolicy's).
func VerifiedOfPolicy(policyKey string) string {
	return verifiedPrefix + "*." + queue.EncodeToken(policyKey)
}

// ParseVerifiedCopy says whether subject is a VerifiedCopySubject, and
// returns the result subject it copies.
func ParseVerifiedCopy(subject string) (resultSubject string, ok bool) {
	rest, ok := strings.CutPrefix(subject, verifiedPrefix)
	if !ok {
		return subject, false
	}
	return resultsPrefix + rest, true
}

// Connect is queue.Connect with Verdict's topology: how every service,
// the CLI and the tests connect.
func Connect(ctx context.Context, opts ...queue.ConnOption) (*queue.Conn, error) {
	return queue.Connect(ctx, append([]queue.ConnOption{queue.WithTopology(Topology())}, opts...)...)
}
