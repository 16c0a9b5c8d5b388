package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Verdict's streams.
const (
	StreamResults   = "VERDICT_RESULTS"
	StreamWork      = "VERDICT_WORK"
	StreamSchedules = "VERDICT_SCHEDULES"
	StreamDead      = "VERDICT_DEAD"
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
	replicas        int
	duplicates      time.Duration
	deadMaxAge      time.Duration
	schedules       bool
	consumers       []ConsumerSpec
	retryBackoff    time.Duration
	resultHistory   int
	resultsMaxBytes int64
	workMaxMsgs     int64
	workMaxBytes    int64
}

// Defaults of the stream limits (see WithResultHistory, WithResultsMaxBytes,
// WithWorkMaxMsgs, WithWorkMaxBytes and the package documentation).
const (
	DefaultResultHistory   = 4
	DefaultResultsMaxBytes = 4 << 30 // 4 GiB
	DefaultWorkMaxMsgs     = 1_000_000
	DefaultWorkMaxBytes    = 1 << 30 // 1 GiB
	// MaxResultHistory bounds WithResultHistory.
	MaxResultHistory = 64
)

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

// WithResultHistory sets how many messages VERDICT_RESULTS keeps per
// subject (MaxMsgsPerSubject): the newest evaluation of a policy on a
// resource survives as long as fewer than n older ones arrive after it
// (a publish retried after backoff, a slow replica). Readers pick the
// newest of them; they never rely on arrival order. Default 4 (1 to 64).
func WithResultHistory(n int) ProvisionOption {
	return func(o *provisionOptions) error {
		if n < 1 || n > MaxResultHistory {
			return fmt.Errorf("%w: result history %d (1 to %d)", ErrInvalidOption, n, MaxResultHistory)
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
			return fmt.Errorf("%w: results max bytes %d", ErrInvalidOption, n)
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
			return fmt.Errorf("%w: work max messages %d", ErrInvalidOption, n)
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
			return fmt.Errorf("%w: work max bytes %d", ErrInvalidOption, n)
		}
		o.workMaxBytes = n
		return nil
	}
}

func newProvisionOptions(opts []ProvisionOption) (provisionOptions, error) {
	o := provisionOptions{
		replicas:        1,
		duplicates:      2 * time.Minute,
		deadMaxAge:      14 * 24 * time.Hour,
		schedules:       true,
		consumers:       DefaultConsumers(),
		retryBackoff:    200 * time.Millisecond,
		resultHistory:   DefaultResultHistory,
		resultsMaxBytes: DefaultResultsMaxBytes,
		workMaxMsgs:     DefaultWorkMaxMsgs,
		workMaxBytes:    DefaultWorkMaxBytes,
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
// configuration fails that stream at once, and Provision goes on with the
// rest (the streams and consumers that can be provisioned are) and returns
// every failure, wrapped in ErrProvision.
//
// The Conn remembers what it provisioned (the streams, and every consumer
// any of its calls named): when a publish finds no stream or a runner
// finds its consumer gone (deleted by hand, or by a client that should not
// have been able to), the Conn provisions them again, at most once per
// ReprovisionInterval, and counts it (verdict_queue_reprovisions_total).
// A Conn that never called Provision creates nothing.
func (c *Conn) Provision(ctx context.Context, opts ...ProvisionOption) error {
	o, err := newProvisionOptions(opts)
	if err != nil {
		return err
	}
	c.heal.remember(o)
	return c.provision(ctx, o)
}

func (c *Conn) provision(ctx context.Context, o provisionOptions) error {
	var errs []error
	for _, cfg := range o.streams() {
		if err := retryTransient(ctx, o.retryBackoff, func() error { return c.ensureStream(ctx, cfg) }); err != nil {
			errs = append(errs, fmt.Errorf("%w: stream %s: %w", ErrProvision, cfg.Name, err))
			if ctx.Err() != nil {
				return errors.Join(errs...)
			}
			continue
		}
		c.log.Info().Str(logKeyStream, cfg.Name).Int(logKeyReplicas, cfg.Replicas).Msg("streamProvisioned")
	}
	for _, spec := range o.consumers {
		cfg := spec.config(o.replicas)
		if err := retryTransient(ctx, o.retryBackoff, func() error {
			_, err := c.js.CreateOrUpdateConsumer(ctx, spec.Stream, cfg)
			return err
		}); err != nil {
			errs = append(errs, fmt.Errorf("%w: consumer %s on %s: %w", ErrProvision, spec.Durable, spec.Stream, err))
			if ctx.Err() != nil {
				return errors.Join(errs...)
			}
			continue
		}
		c.log.Info().Str(logKeyStream, spec.Stream).Str(logKeyConsumer, spec.Durable).Msg("consumerProvisioned")
	}
	return errors.Join(errs...)
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
	if err != nil && cfg.Name == StreamWork && s != nil && s.CachedInfo().Config.AllowMsgSchedules {
		// VERDICT_WORK made before VERDICT_SCHEDULES existed: schedules
		// cannot be turned off, so it cannot be bounded in place.
		return fmt.Errorf("%s holds message schedules (it predates %s) and cannot take its limits in place: "+
			"let the workers drain it, delete it, and provision again: %w", cfg.Name, StreamSchedules, err)
	}
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
		limit(have.MaxMsgsPerSubject) == limit(want.MaxMsgsPerSubject) &&
		limit(have.MaxMsgs) == limit(want.MaxMsgs) &&
		limit(have.MaxBytes) == limit(want.MaxBytes) &&
		have.Discard == want.Discard &&
		have.MaxAge == want.MaxAge &&
		have.Storage == want.Storage &&
		have.Replicas == want.Replicas &&
		have.Duplicates == want.Duplicates &&
		have.AllowDirect == want.AllowDirect &&
		have.AllowMsgSchedules == want.AllowMsgSchedules &&
		have.AllowRollup == want.AllowRollup &&
		sameSources(have.Sources, want.Sources)
}

// limit normalises a stream limit as the server stores it (0, "none",
// becomes -1).
func limit(n int64) int64 {
	if n <= 0 {
		return -1
	}
	return n
}

// sameSources compares the sources Provision sets (stream names and subject
// transforms).
func sameSources(have, want []*jetstream.StreamSource) bool {
	return slices.EqualFunc(have, want, func(a, b *jetstream.StreamSource) bool {
		return a.Name == b.Name && a.FilterSubject == b.FilterSubject && slices.Equal(a.SubjectTransforms, b.SubjectTransforms)
	})
}

// Causes of a re-provisioning (the reprovisions_total metric).
const (
	causeStreamMissing   = "streamMissing"
	causeConsumerMissing = "consumerMissing"
)

// ReprovisionInterval is the least time between two re-provisionings by
// one Conn: a stream deleted again and again costs the server a handful of
// API calls a second per connection, no more.
const ReprovisionInterval = time.Second

// reprovisionTimeout bounds one re-provisioning.
const reprovisionTimeout = 10 * time.Second

// reprovisioner provisions again what a Conn provisioned. The zero value
// knows nothing and does nothing.
type reprovisioner struct {
	mu      sync.Mutex
	opts    *provisionOptions // the streams' options and every consumer provisioned
	running chan struct{}     // closed when the re-provisioning under way ends
	last    time.Time         // when the last one started
}

// remember records what o provisions: its streams' options replace the
// previous ones, its consumers join those already known (a service may
// provision its consumers in several calls).
func (r *reprovisioner) remember(o provisionOptions) {
	r.mu.Lock()
	defer r.mu.Unlock()
	merged := o
	merged.consumers = slices.Clone(o.consumers)
	if r.opts != nil {
		for _, known := range r.opts.consumers {
			if !slices.ContainsFunc(merged.consumers, func(s ConsumerSpec) bool {
				return s.Stream == known.Stream && s.Durable == known.Durable
			}) {
				merged.consumers = append(merged.consumers, known)
			}
		}
	}
	r.opts = &merged
}

// reprovision starts provisioning again what c provisioned, because of
// cause, unless one is under way (its channel is returned), one started
// less than ReprovisionInterval ago, or c never provisioned (nil). The
// channel is closed when it ends; it runs on its own, bounded by
// reprovisionTimeout, whatever happens to the caller's ctx (whose values
// it keeps, not its cancellation).
func (c *Conn) reprovision(ctx context.Context, cause string) <-chan struct{} {
	r := &c.heal
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case r.opts == nil:
		return nil
	case r.running != nil:
		return r.running
	case time.Since(r.last) < ReprovisionInterval:
		return nil
	}
	done := make(chan struct{})
	r.running, r.last = done, time.Now()
	o := *r.opts
	o.consumers = slices.Clone(o.consumers)
	go func() {
		defer close(done)
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reprovisionTimeout)
		defer cancel()
		err := c.provision(ctx, o)
		result := "ok"
		if err != nil {
			result = "error"
			c.log.Error().Err(err).Str(logKeyCause, cause).Msg("reprovisionFailed")
		} else {
			c.log.Warn().Str(logKeyCause, cause).Msg("reprovisioned")
		}
		c.metrics.reprovisions.WithLabelValues(cause, result).Inc()
		r.mu.Lock()
		r.running = nil
		r.mu.Unlock()
	}()
	return done
}
