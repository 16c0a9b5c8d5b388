package queue

import (
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// The tests' application. The package holds no names of its own, so its
// tests bring what an application brings: a topology, and streams and
// consumers to provision (an evaluation-results stream with a short
// history per subject, a work queue, its dead letters and its schedules).
const (
	streamResults   = "RESULTS"
	streamWork      = "WORK"
	streamSchedules = "SCHEDULES"
	streamDead      = "DEAD"

	consumerGenerator = "generator"
	consumerCleaner   = "cleaner"
	consumerScanner   = "scanner"
	consumerReporter  = "reporter"

	resultsPrefix  = "app.results."
	workPrefix     = "app.work."
	deadPrefix     = "app.dead."
	schedulePrefix = "app.schedule."
	tickPrefix     = "app.tick."

	workGenerate WorkKind = "generate"
	workMutate   WorkKind = "mutate"
	workCleanup  WorkKind = "cleanup"
	workScan     WorkKind = "scan"
)

var testTopology = Topology{
	Root:       "app.",
	WorkStream: streamWork, WorkPrefix: workPrefix,
	DeadStream: streamDead, DeadPrefix: deadPrefix,
	ScheduleStream: streamSchedules, SchedulePrefix: schedulePrefix, TickPrefix: tickPrefix,
	Kinds:          []WorkKind{workGenerate, workMutate, workCleanup, workScan},
	SnapshotBucket: "SNAPSHOTS",
}

// resultSubject is the subject of one result: two encoded tokens.
func resultSubject(uid, key string) string {
	return resultsPrefix + EncodeToken(uid) + "." + EncodeToken(key)
}

// resultsOfResource matches every result of one resource.
func resultsOfResource(uid string) string { return resultsPrefix + EncodeToken(uid) + ".*" }

func workSubject(kind WorkKind, key string) (string, error) {
	return testTopology.WorkSubject(kind, key)
}

// defaultConsumers are the application's durable consumers.
func defaultConsumers() []ConsumerSpec {
	return []ConsumerSpec{
		{Stream: streamWork, Durable: consumerGenerator, FilterSubjects: []string{testTopology.WorkFilter(workGenerate), testTopology.WorkFilter(workMutate)}},
		{Stream: streamWork, Durable: consumerCleaner, FilterSubjects: []string{testTopology.WorkFilter(workCleanup)}},
		{Stream: streamWork, Durable: consumerScanner, FilterSubjects: []string{testTopology.WorkFilter(workScan)}},
		{Stream: streamResults, Durable: consumerReporter, FilterSubjects: []string{resultsPrefix + ">"}},
	}
}

func defaultConsumer(durable string) (ConsumerSpec, bool) {
	for _, s := range defaultConsumers() {
		if s.Durable == durable {
			return s, true
		}
	}
	return ConsumerSpec{}, false
}

// planOption changes the tests' plan.
type planOption func(*Plan)

// withConsumers replaces the plan's consumers (none: streams only).
func withConsumers(specs ...ConsumerSpec) planOption {
	return func(p *Plan) { p.Consumers = specs }
}

// withReplicas replicates every stream and consumer n times.
func withReplicas(n int) planOption {
	return func(p *Plan) {
		for i := range p.Streams {
			p.Streams[i].Replicas = n
		}
		p.ConsumerReplicas = n
	}
}

// testPlan is the application's streams and consumers.
func testPlan(opts ...planOption) Plan {
	p := Plan{
		Streams: []jetstream.StreamConfig{
			{
				Name: streamResults, Subjects: []string{resultsPrefix + ">"},
				Retention: jetstream.LimitsPolicy, MaxMsgsPerSubject: 4,
				Discard: jetstream.DiscardNew, Storage: jetstream.FileStorage,
				Duplicates: 2 * time.Minute, AllowDirect: true,
			},
			{
				Name: streamSchedules, Subjects: []string{schedulePrefix + ">", tickPrefix + ">"},
				Retention: jetstream.LimitsPolicy, MaxMsgsPerSubject: 1,
				Discard: jetstream.DiscardOld, Storage: jetstream.FileStorage,
				Duplicates: 2 * time.Minute, AllowMsgSchedules: true, AllowRollup: true,
			},
			{
				Name: streamWork, Subjects: []string{workPrefix + ">"},
				Retention: jetstream.WorkQueuePolicy, Discard: jetstream.DiscardNew,
				Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute,
				Sources: []*jetstream.StreamSource{{
					Name:              streamSchedules,
					SubjectTransforms: []jetstream.SubjectTransformConfig{{Source: tickPrefix + ">", Destination: workPrefix + ">"}},
				}},
			},
			{
				Name: streamDead, Subjects: []string{deadPrefix + ">"},
				Retention: jetstream.LimitsPolicy, Discard: jetstream.DiscardOld,
				Storage: jetstream.FileStorage, Duplicates: 2 * time.Minute, AllowDirect: true,
			},
		},
		Consumers: defaultConsumers(),
	}
	for _, o := range opts {
		o(&p)
	}
	return p
}
