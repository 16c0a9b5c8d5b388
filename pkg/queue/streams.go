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

// ConsumerSpec describes one durable pull consumer.
type ConsumerSpec struct {
	Stream  string
	Durable string
	// Description is the consumer's description on the server.
	Description string
	// FilterSubjects select the consumer's subjects. On a work-queue
	// stream the filters of different consumers must not overlap.
	FilterSubjects []string
	// AckWait is how long a delivered message may go without an ack,
	// in-progress or nak before it is delivered again. Default 30s.
	AckWait time.Duration
	// MaxAckPending bounds the messages delivered and not yet acknowledged
	// across all instances. Default 1000.
	MaxAckPending int
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
		Description:   s.Description,
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

// Plan is what Provision creates or updates: streams, then durable
// consumers on them.
type Plan struct {
	// Streams are created or updated as given (replicas included).
	Streams []jetstream.StreamConfig
	// Consumers are created or updated from their specs.
	Consumers []ConsumerSpec
	// ConsumerReplicas is the replica count of the consumers (0: the
	// stream's).
	ConsumerReplicas int
	// RetryBackoff is the first wait before a transient failure is
	// retried; it doubles up to 5s. Default 200ms.
	RetryBackoff time.Duration
}

func (p Plan) backoff() time.Duration {
	if p.RetryBackoff <= 0 {
		return 200 * time.Millisecond
	}
	return p.RetryBackoff
}

// Validate reports a plan Provision cannot carry out, wrapping
// ErrInvalidOption.
func (p Plan) Validate() error {
	for _, s := range p.Streams {
		if s.Name == "" {
			return fmt.Errorf("%w: a stream without a name", ErrInvalidOption)
		}
	}
	for _, s := range p.Consumers {
		if s.Stream == "" || s.Durable == "" || len(s.FilterSubjects) == 0 {
			return fmt.Errorf("%w: consumer %q on %q needs a stream, a name and filters", ErrInvalidOption, s.Durable, s.Stream)
		}
		if s.AckWait < 0 || s.MaxAckPending < 0 {
			return fmt.Errorf("%w: consumer %q: negative AckWait or MaxAckPending", ErrInvalidOption, s.Durable)
		}
	}
	if p.ConsumerReplicas < 0 || p.ConsumerReplicas > 5 {
		return fmt.Errorf("%w: consumer replicas %d (0 to 5)", ErrInvalidOption, p.ConsumerReplicas)
	}
	return nil
}

// Provision creates or updates the plan's streams and durable consumers.
// It is idempotent and safe to run from every replica at once at start-up
// (no leader): a stream is updated if it exists, created if not, and
// updated again if a concurrent creator won. Transient failures (JetStream
// not yet ready, no meta leader, a timeout) are retried until ctx ends; a
// refused configuration fails that stream at once, and Provision goes on
// with the rest (the streams and consumers that can be provisioned are)
// and returns every failure, wrapped in ErrProvision.
//
// The Conn remembers what it provisioned (the streams of its last plan
// that named any, and every consumer any plan named): when a publish finds
// no stream or a runner finds its consumer gone (deleted by hand, or by a
// client that should not have been able to), the Conn provisions them
// again, at most once per ReprovisionInterval, and counts it
// (verdict_queue_reprovisions_total). A Conn that never called Provision
// creates nothing.
func (c *Conn) Provision(ctx context.Context, p Plan) error {
	if err := p.Validate(); err != nil {
		return err
	}
	c.heal.remember(p)
	return c.provision(ctx, p)
}

func (c *Conn) provision(ctx context.Context, o Plan) error {
	var errs []error
	for _, cfg := range o.Streams {
		if err := retryTransient(ctx, o.backoff(), func() error { return c.ensureStream(ctx, cfg) }); err != nil {
			errs = append(errs, fmt.Errorf("%w: stream %s: %w", ErrProvision, cfg.Name, err))
			if ctx.Err() != nil {
				return errors.Join(errs...)
			}
			continue
		}
		c.log.Info().Str(logKeyStream, cfg.Name).Int(logKeyReplicas, cfg.Replicas).Msg("streamProvisioned")
	}
	for _, spec := range o.Consumers {
		cfg := spec.config(o.ConsumerReplicas)
		if err := retryTransient(ctx, o.backoff(), func() error {
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
	if err == nil && SameStreamConfig(s.CachedInfo().Config, cfg) {
		return nil // nothing to change: replicas starting together do not churn the stream
	}
	if err != nil && !errors.Is(err, jetstream.ErrStreamNotFound) {
		return err
	}
	_, err = c.js.UpdateStream(ctx, cfg)
	if err != nil && s != nil && s.CachedInfo().Config.AllowMsgSchedules && !cfg.AllowMsgSchedules {
		// A stream that held message schedules before they moved to a
		// stream of their own: the server cannot turn schedules off, so
		// the stream cannot take its new configuration in place.
		return fmt.Errorf("%s holds message schedules and cannot take its new configuration in place: "+
			"let the workers drain it, delete it, and provision again: %w", cfg.Name, err)
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

// SameStreamConfig reports whether have (a stream's configuration as the
// server holds it) has the fields Provision sets as want has them:
// Provision leaves such a stream alone.
func SameStreamConfig(have, want jetstream.StreamConfig) bool {
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
	plan    *Plan         // the streams and every consumer provisioned
	running chan struct{} // closed when the re-provisioning under way ends
	last    time.Time     // when the last one started
}

// remember records what o provisions: its streams, when it names any,
// replace the previous ones, its consumers join those already known (a
// service may provision its consumers in several calls).
func (r *reprovisioner) remember(o Plan) {
	r.mu.Lock()
	defer r.mu.Unlock()
	merged := o
	merged.Streams = slices.Clone(o.Streams)
	if len(o.Streams) == 0 && r.plan != nil {
		merged.Streams = r.plan.Streams
	}
	merged.Consumers = slices.Clone(o.Consumers)
	if r.plan != nil {
		for _, known := range r.plan.Consumers {
			if !slices.ContainsFunc(merged.Consumers, func(s ConsumerSpec) bool {
				return s.Stream == known.Stream && s.Durable == known.Durable
			}) {
				merged.Consumers = append(merged.Consumers, known)
			}
		}
	}
	r.plan = &merged
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
	case r.plan == nil:
		return nil
	case r.running != nil:
		return r.running
	case time.Since(r.last) < ReprovisionInterval:
		return nil
	}
	done := make(chan struct{})
	r.running, r.last = done, time.Now()
	o := *r.plan
	o.Consumers = slices.Clone(o.Consumers)
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
