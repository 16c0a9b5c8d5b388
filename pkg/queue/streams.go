package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Verdict's streams.
const (
	StreamResults = "VERDICT_RESULTS"
	StreamWork    = "VERDICT_WORK"
	StreamDead    = "VERDICT_DEAD"
)

// Verdict's durable consumers (see DefaultConsumers).
const (
	ConsumerGenerator = "generator"
	ConsumerCleaner   = "cleaner"
	ConsumerScanner   = "scanner"
	ConsumerReporter  = "reporter"
)

// ConsumerSpec describes one durable pull consumer.
type ConsumerSpec struct {
	Stream  string
	Durable string
	// FilterSubjects select the consumer's subjects. On VERDICT_WORK the
	// filters of different consumers must not overlap (work-queue rule).
	FilterSubjects []string
	// AckWait is how long a delivered message may go without an ack,
	// in-progress or nak before it is delivered again. Default 30s.
	AckWait time.Duration
	// MaxAckPending bounds the messages delivered and not yet acknowledged
	// across all instances. Default 1000.
	MaxAckPending int
}

// DefaultConsumers are the durable consumers of Verdict's worker services.
func DefaultConsumers() []ConsumerSpec {
	return []ConsumerSpec{
		{Stream: StreamWork, Durable: ConsumerGenerator, FilterSubjects: []string{WorkFilter(WorkGenerate), WorkFilter(WorkMutate)}},
		{Stream: StreamWork, Durable: ConsumerCleaner, FilterSubjects: []string{WorkFilter(WorkCleanup)}},
		{Stream: StreamWork, Durable: ConsumerScanner, FilterSubjects: []string{WorkFilter(WorkScan)}},
		{Stream: StreamResults, Durable: ConsumerReporter, FilterSubjects: []string{resultsPrefix + ">"}},
	}
}

// DefaultConsumer returns the default spec of one of Verdict's durable
// consumers, for a service to provision its own with its settings.
func DefaultConsumer(durable string) (ConsumerSpec, bool) {
	for _, s := range DefaultConsumers() {
		if s.Durable == durable {
			return s, true
		}
	}
	return ConsumerSpec{}, false
}

// ProvisionOption configures Provision.
type ProvisionOption func(*provisionOptions) error

type provisionOptions struct {
	replicas     int
	duplicates   time.Duration
	deadMaxAge   time.Duration
	schedules    bool
	consumers    []ConsumerSpec
	retryBackoff time.Duration
}

// WithReplicas sets the replica count of streams and consumers: 1 for an
// embedded or single server, 3 (or 5) in a cluster. Default 1.
func WithReplicas(n int) ProvisionOption {
	return func(o *provisionOptions) error {
		if n < 1 || n > 5 {
			return fmt.Errorf("%w: replicas %d (1 to 5)", ErrInvalidOption, n)
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
			return fmt.Errorf("%w: duplicate window %s", ErrInvalidOption, d)
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
			return fmt.Errorf("%w: dead-letter max age %s", ErrInvalidOption, d)
		}
		o.deadMaxAge = d
		return nil
	}
}

// WithMsgSchedules turns JetStream message schedules on VERDICT_WORK on or
// off. Default on (the cleaner's cron ticks). The server refuses to turn
// them off again once on.
func WithMsgSchedules(on bool) ProvisionOption {
	return func(o *provisionOptions) error { o.schedules = on; return nil }
}

// WithConsumers replaces DefaultConsumers (none: streams only). Each
// service should provision the consumers it reads with its own settings,
// and no others: provisioning a consumer resets its AckWait and
// MaxAckPending to the spec's.
func WithConsumers(specs ...ConsumerSpec) ProvisionOption {
	return func(o *provisionOptions) error {
		for _, s := range specs {
			if s.Stream == "" || s.Durable == "" || len(s.FilterSubjects) == 0 {
				return fmt.Errorf("%w: consumer %q on %q needs a stream, a name and filters", ErrInvalidOption, s.Durable, s.Stream)
			}
			if s.AckWait < 0 || s.MaxAckPending < 0 {
				return fmt.Errorf("%w: consumer %q: negative AckWait or MaxAckPending", ErrInvalidOption, s.Durable)
			}
		}
		o.consumers = specs
		return nil
	}
}

func newProvisionOptions(opts []ProvisionOption) (provisionOptions, error) {
	o := provisionOptions{
		replicas:     1,
		duplicates:   2 * time.Minute,
		deadMaxAge:   14 * 24 * time.Hour,
		schedules:    true,
		consumers:    DefaultConsumers(),
		retryBackoff: 200 * time.Millisecond,
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	return o, nil
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
			Description:       "Latest evaluation of each policy on each resource (compacted: one message per subject).",
			Subjects:          []string{resultsPrefix + ">"},
			Retention:         jetstream.LimitsPolicy,
			MaxMsgsPerSubject: 1,
			Discard:           jetstream.DiscardOld,
			Storage:           jetstream.FileStorage,
			Replicas:          o.replicas,
			Duplicates:        o.duplicates,
			AllowDirect:       true,
		},
		{
			Name:              StreamWork,
			Description:       "Units of work for the worker services (work queue).",
			Subjects:          []string{workPrefix + ">"},
			Retention:         jetstream.WorkQueuePolicy,
			Discard:           jetstream.DiscardOld,
			Storage:           jetstream.FileStorage,
			Replicas:          o.replicas,
			Duplicates:        o.duplicates,
			AllowMsgSchedules: o.schedules,
			// Message schedules need roll-ups (the server forces it on).
			AllowRollup: o.schedules,
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

func (s ConsumerSpec) config(replicas int) jetstream.ConsumerConfig {
	ackWait := s.AckWait
	if ackWait == 0 {
		ackWait = 30 * time.Second
	}
	maxAckPending := s.MaxAckPending
	if maxAckPending == 0 {
		maxAckPending = 1000
	}
	cfg := jetstream.ConsumerConfig{
		Durable:       s.Durable,
		Description:   "verdict " + s.Durable,
		DeliverPolicy: jetstream.DeliverAllPolicy,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       ackWait,
		// Attempts are bounded by the runner, which dead-letters the
		// message itself: a server-side MaxDeliver would leave a message
		// that ran out of deliveries stuck in the work queue unseen.
		MaxDeliver:    -1,
		MaxAckPending: maxAckPending,
		Replicas:      replicas,
	}
	if len(s.FilterSubjects) == 1 {
		cfg.FilterSubject = s.FilterSubjects[0]
	} else {
		cfg.FilterSubjects = s.FilterSubjects
	}
	return cfg
}

// Provision creates or updates Verdict's streams and durable consumers. It
// is idempotent and safe to run from every replica at once at start-up (no
// leader): a stream is updated if it exists, created if not, and updated
// again if a concurrent creator won. Transient failures (JetStream not yet
// ready, no meta leader, a timeout) are retried until ctx ends; a refused
// configuration fails at once.
func (c *Conn) Provision(ctx context.Context, opts ...ProvisionOption) error {
	o, err := newProvisionOptions(opts)
	if err != nil {
		return err
	}
	for _, cfg := range o.streams() {
		if err := retryTransient(ctx, o.retryBackoff, func() error { return c.ensureStream(ctx, cfg) }); err != nil {
			return fmt.Errorf("%w: stream %s: %w", ErrProvision, cfg.Name, err)
		}
		c.log.Info().Str(logKeyStream, cfg.Name).Int(logKeyReplicas, cfg.Replicas).Msg("streamProvisioned")
	}
	for _, spec := range o.consumers {
		cfg := spec.config(o.replicas)
		if err := retryTransient(ctx, o.retryBackoff, func() error {
			_, err := c.js.CreateOrUpdateConsumer(ctx, spec.Stream, cfg)
			return err
		}); err != nil {
			return fmt.Errorf("%w: consumer %s on %s: %w", ErrProvision, spec.Durable, spec.Stream, err)
		}
		c.log.Info().Str(logKeyStream, spec.Stream).Str(logKeyConsumer, spec.Durable).Msg("consumerProvisioned")
	}
	return nil
}

func (c *Conn) ensureStream(ctx context.Context, cfg jetstream.StreamConfig) error {
	s, err := c.js.Stream(ctx, cfg.Name)
	if err == nil && sameStreamConfig(s.CachedInfo().Config, cfg) {
		return nil // nothing to change: replicas starting together do not churn the stream
	}
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	_, err = c.js.UpdateStream(ctx, cfg)
	if !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	_, err = c.js.CreateStream(ctx, cfg)
	if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
		// Another replica created it in between: make it ours.
		_, err = c.js.UpdateStream(ctx, cfg)
	}
	return err
}

// retryTransient runs fn until it succeeds, fails permanently or ctx ends.
func retryTransient(ctx context.Context, base time.Duration, fn func() error) error {
	for attempt := 1; ; attempt++ {
		err := fn()
		if !retryable(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last error: %w)", ctx.Err(), err)
		case <-time.After(backoffDelay(attempt, base, 5*time.Second)):
		}
	}
}

// sameStreamConfig compares the fields Provision sets.
func sameStreamConfig(have, want jetstream.StreamConfig) bool {
	return slices.Equal(have.Subjects, want.Subjects) &&
		have.Description == want.Description &&
		have.Retention == want.Retention &&
		have.MaxMsgsPerSubject == want.MaxMsgsPerSubject &&
		have.Discard == want.Discard &&
		have.MaxAge == want.MaxAge &&
		have.Storage == want.Storage &&
		have.Replicas == want.Replicas &&
		have.Duplicates == want.Duplicates &&
		have.AllowDirect == want.AllowDirect &&
		have.AllowMsgSchedules == want.AllowMsgSchedules &&
		have.AllowRollup == want.AllowRollup
}
