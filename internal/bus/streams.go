package bus

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdict-dev/verdict/pkg/queue"
)

// DefaultConsumers are the durable consumers of Verdict's worker services.
func DefaultConsumers() []queue.ConsumerSpec {
	return []queue.ConsumerSpec{
		{Stream: StreamWork, Durable: ConsumerGenerator, Description: "verdict " + ConsumerGenerator, FilterSubjects: []string{WorkFilter(WorkGenerate), WorkFilter(WorkMutate)}},
		{Stream: StreamWork, Durable: ConsumerCleaner, Description: "verdict " + ConsumerCleaner, FilterSubjects: []string{WorkFilter(WorkCleanup)}},
		{Stream: StreamWork, Durable: ConsumerScanner, Description: "verdict " + ConsumerScanner, FilterSubjects: []string{WorkFilter(WorkScan)}},
		{Stream: StreamResults, Durable: ConsumerReporter, Description: "verdict " + ConsumerReporter, FilterSubjects: []string{resultsPrefix + ">"}},
	}
}

// DefaultConsumer returns the default spec of one of Verdict's durable
// consumers, for a service to provision its own with its settings.
func DefaultConsumer(durable string) (queue.ConsumerSpec, bool) {
	for _, s := range DefaultConsumers() {
		if s.Durable == durable {
			return s, true
		}
	}
	return queue.ConsumerSpec{}, false
}

// ProvisionOption configures Provision.
type ProvisionOption func(*provisionOptions) error

type provisionOptions struct {
	replicas          int
	duplicates        time.Duration
	deadMaxAge        time.Duration
	schedules         bool
	consumers         []queue.ConsumerSpec
	retryBackoff      time.Duration
	resultHistory     int
	resultsMaxBytes   int64
	workMaxMsgs       int64
	workMaxBytes      int64
	decisionsMaxAge   time.Duration
	decisionsMaxBytes int64
}

// Defaults of the stream limits (see WithResultHistory, WithResultsMaxBytes,
// WithWorkMaxMsgs, WithWorkMaxBytes and the package documentation).
const (
	DefaultResultHistory   = 4
	DefaultResultsMaxBytes = 4 << 30 // 4 GiB
	DefaultWorkMaxMsgs     = 1_000_000
	DefaultWorkMaxBytes    = 1 << 30 // 1 GiB
	// DefaultDecisionsMaxAge and DefaultDecisionsMaxBytes bound the
	// admission log: a week, 1 GiB, whichever comes first.
	DefaultDecisionsMaxAge   = 7 * 24 * time.Hour
	DefaultDecisionsMaxBytes = 1 << 30 // 1 GiB
	// MaxResultHistory bounds WithResultHistory.
	MaxResultHistory = 64
)

// WithReplicas sets the replica count of streams and consumers: 1 for an
// embedded or single server, 3 (or 5) in a cluster. Default 1.
func WithReplicas(n int) ProvisionOption {
	return func(o *provisionOptions) error {
		if n < 1 || n > 5 {
			return fmt.Errorf("%w: replicas %d (1 to 5)", queue.ErrInvalidOption, n)
		}
		o.replicas = n
		return nil
	}
}

// WithDuplicateWindow sets how long a stream remembers message ids for
// deduplication. Default 2m.
func WithDuplicateWindow(d time.Duration) ProvisionOption {
	return func(o *provisionOptions) error {
		if d < 100*time.Millisecond {
			return fmt.Errorf("%w: duplicate window %s", queue.ErrInvalidOption, d)
		}
		o.duplicates = d
		return nil
	}
}

// WithDeadLetterMaxAge sets how long VERDICT_DEAD keeps a message. Default
// 14 days.
func WithDeadLetterMaxAge(d time.Duration) ProvisionOption {
	return func(o *provisionOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: dead-letter max age %s", queue.ErrInvalidOption, d)
		}
		o.deadMaxAge = d
		return nil
	}
}

// WithMsgSchedules turns JetStream message schedules on VERDICT_SCHEDULES
// on or off. Default on (the periodic scan's and the cleaner's ticks). The
// server refuses to turn them off again once on.
func WithMsgSchedules(on bool) ProvisionOption {
	return func(o *provisionOptions) error { o.schedules = on; return nil }
}

// WithConsumers replaces DefaultConsumers (none: streams only). Each
// service should provision the consumers it reads with its own settings,
// and no others: provisioning a consumer resets its AckWait and
// MaxAckPending to the spec's.
func WithConsumers(specs ...queue.ConsumerSpec) ProvisionOption {
	return func(o *provisionOptions) error {
		o.consumers = specs
		return nil
	}
}

// WithResultHistory sets how many messages VERDICT_RESULTS keeps per
// subject (MaxMsgsPerSubject): the newest evaluation of a policy on a
// resource survives as long as fewer than n older ones arrive after it
// (a publish retried after backoff, a slow replica). Readers pick the
// newest of them; they never rely on arrival order. Default 4 (1 to 64).
func WithResultHistory(n int) ProvisionOption {
	return func(o *provisionOptions) error {
		if n < 1 || n > MaxResultHistory {
			return fmt.Errorf("%w: result history %d (1 to %d)", queue.ErrInvalidOption, n, MaxResultHistory)
		}
		o.resultHistory = n
		return nil
	}
}

// WithResultsMaxBytes bounds the size of VERDICT_RESULTS. A full stream
// refuses new results (DiscardNew: publishes fail with ErrStreamFull)
// rather than deleting stored ones, which are report state. The server
// reserves the bytes against its file store (max_file_store). Default
// 4 GiB.
func WithResultsMaxBytes(n int64) ProvisionOption {
	return func(o *provisionOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: results max bytes %d", queue.ErrInvalidOption, n)
		}
		o.resultsMaxBytes = n
		return nil
	}
}

// WithWorkMaxMsgs bounds the messages VERDICT_WORK holds (work not yet
// done, and message schedules). A full queue refuses new work
// (DiscardNew: publishes fail with ErrStreamFull) rather than dropping old
// work. Default 1,000,000.
func WithWorkMaxMsgs(n int64) ProvisionOption {
	return func(o *provisionOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: work max messages %d", queue.ErrInvalidOption, n)
		}
		o.workMaxMsgs = n
		return nil
	}
}

// WithWorkMaxBytes bounds the size of VERDICT_WORK, as WithWorkMaxMsgs
// bounds its messages. The server reserves the bytes against its file
// store. Default 1 GiB.
func WithWorkMaxBytes(n int64) ProvisionOption {
	return func(o *provisionOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: work max bytes %d", queue.ErrInvalidOption, n)
		}
		o.workMaxBytes = n
		return nil
	}
}

// WithDecisionsMaxAge sets how long VERDICT_DECISIONS keeps a decision.
// Default 7 days.
func WithDecisionsMaxAge(d time.Duration) ProvisionOption {
	return func(o *provisionOptions) error {
		if d < time.Minute {
			return fmt.Errorf("%w: decisions max age %s (at least 1m)", queue.ErrInvalidOption, d)
		}
		o.decisionsMaxAge = d
		return nil
	}
}

// WithDecisionsMaxBytes bounds the size of VERDICT_DECISIONS: when full,
// the oldest decisions go (DiscardOld), counted by the stream. Default
// 1 GiB.
func WithDecisionsMaxBytes(n int64) ProvisionOption {
	return func(o *provisionOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: decisions max bytes %d", queue.ErrInvalidOption, n)
		}
		o.decisionsMaxBytes = n
		return nil
	}
}

func newProvisionOptions(opts []ProvisionOption) (provisionOptions, error) {
	o := provisionOptions{
		replicas:          1,
		duplicates:        2 * time.Minute,
		deadMaxAge:        14 * 24 * time.Hour,
		schedules:         true,
		consumers:         DefaultConsumers(),
		retryBackoff:      200 * time.Millisecond,
		resultHistory:     DefaultResultHistory,
		resultsMaxBytes:   DefaultResultsMaxBytes,
		workMaxMsgs:       DefaultWorkMaxMsgs,
		workMaxBytes:      DefaultWorkMaxBytes,
		decisionsMaxAge:   DefaultDecisionsMaxAge,
		decisionsMaxBytes: DefaultDecisionsMaxBytes,
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// Plan is what Provision provisions with opts: Verdict's four streams and
// the consumers (DefaultConsumers unless WithConsumers says otherwise).
func Plan(opts ...ProvisionOption) (queue.Plan, error) {
	o, err := newProvisionOptions(opts)
	if err != nil {
		return queue.Plan{}, err
	}
	p := queue.Plan{Streams: o.streams(), Consumers: o.consumers, ConsumerReplicas: o.replicas, RetryBackoff: o.retryBackoff}
	return p, p.Validate()
}

// Provision creates or updates Verdict's streams and durable consumers on
// c (queue.Conn.Provision: idempotent, safe from every replica at once,
// transient failures retried, and what is provisioned provisioned again
// when it goes missing). Each service provisions the streams and the
// consumers it reads, with its settings (WithConsumers).
func Provision(ctx context.Context, c *queue.Conn, opts ...ProvisionOption) error {
	p, err := Plan(opts...)
	if err != nil {
		return err
	}
	return c.Provision(ctx, p)
}

// StreamConfigs are the stream configurations Provision applies.
func StreamConfigs(opts ...ProvisionOption) ([]jetstream.StreamConfig, error) {
	o, err := newProvisionOptions(opts)
	if err != nil {
		return nil, err
	}
	return o.streams(), nil
}

func (o provisionOptions) streams() []jetstream.StreamConfig {
	return []jetstream.StreamConfig{
		{
			Name:              StreamResults,
			Description:       "Latest evaluations of each policy on each resource (a short history per subject; readers keep the newest), and the reporter's copies of verified ones.",
			Subjects:          []string{resultsPrefix + ">", verifiedPrefix + ">"},
			Retention:         jetstream.LimitsPolicy,
			MaxMsgsPerSubject: int64(o.resultHistory),
			MaxBytes:          o.resultsMaxBytes,
			// Full: refuse new results, never delete stored ones (they
			// are report state). A subject at its history limit still
			// takes a message that is not larger than the one it replaces
			// (single replica; a replicated stream refuses every message
			// once full).
			Discard:     jetstream.DiscardNew,
			Storage:     jetstream.FileStorage,
			Replicas:    o.replicas,
			Duplicates:  o.duplicates,
			AllowDirect: true,
		},
		{
			// Message schedules cannot live in a stream that discards new
			// messages (the server refuses it), so they have their own:
			// one message per schedule, and the last tick of each target
			// (a tick not yet sourced into VERDICT_WORK is replaced by the
			// next: ticks coalesce).
			Name:              StreamSchedules,
			Description:       "Message schedules and their ticks, which VERDICT_WORK sources as work.",
			Subjects:          []string{schedulePrefix + ">", tickPrefix + ">"},
			Retention:         jetstream.LimitsPolicy,
			MaxMsgsPerSubject: 1,
			Discard:           jetstream.DiscardOld,
			Storage:           jetstream.FileStorage,
			Replicas:          o.replicas,
			Duplicates:        o.duplicates,
			AllowMsgSchedules: o.schedules,
			// Message schedules need roll-ups (the server forces it on).
			AllowRollup: o.schedules,
		},
		{
			Name:        StreamWork,
			Description: "Units of work for the worker services (work queue).",
			Subjects:    []string{workPrefix + ">"},
			Retention:   jetstream.WorkQueuePolicy,
			MaxMsgs:     o.workMaxMsgs,
			MaxBytes:    o.workMaxBytes,
			// Full: refuse new work visibly, never drop work taken. (A
			// tick meets a full queue too: the source retries it.)
			Discard:    jetstream.DiscardNew,
			Storage:    jetstream.FileStorage,
			Replicas:   o.replicas,
			Duplicates: o.duplicates,
			Sources: []*jetstream.StreamSource{{
				Name: StreamSchedules,
				SubjectTransforms: []jetstream.SubjectTransformConfig{
					{Source: tickPrefix + ">", Destination: workPrefix + ">"},
				},
			}},
		},
		{
			// The admission log: bounded by age and size, the oldest
			// going first; nothing else depends on it.
			Name:        StreamDecisions,
			Description: "The admission log: every admission decision a webhook answered (allowed, warned, denied, patched), by age and size.",
			Subjects:    []string{decisionsPrefix + ">"},
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			MaxAge:      o.decisionsMaxAge,
			MaxBytes:    o.decisionsMaxBytes,
			Storage:     jetstream.FileStorage,
			Replicas:    o.replicas,
			Duplicates:  o.duplicates,
			AllowDirect: true,
		},
		{
			Name:        StreamDead,
			Description: "Messages that failed their attempts or were poison, with the reason.",
			Subjects:    []string{deadPrefix + ">"},
			Retention:   jetstream.LimitsPolicy,
			Discard:     jetstream.DiscardOld,
			MaxAge:      o.deadMaxAge,
			Storage:     jetstream.FileStorage,
			Replicas:    o.replicas,
			Duplicates:  o.duplicates,
			AllowDirect: true,
		},
	}
}
