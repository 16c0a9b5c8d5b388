package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// FollowOption configures Follow.
type FollowOption func(*followOptions) error

type followOptions struct {
	after    uint64
	since    time.Time
	filters  []string
	batch    int
	caughtUp func(seq uint64)
}

// WithFollowFilter hands over only the messages of subjects (wildcards
// allowed). It cannot be combined with WithFollowCaughtUp.
func WithFollowFilter(subjects ...string) FollowOption {
	return func(o *followOptions) error {
		for _, s := range subjects {
			if s == "" {
				return fmt.Errorf("%w: empty follow filter", ErrInvalidOption)
			}
		}
		o.filters = append(o.filters, subjects...)
		return nil
	}
}

// WithFollowSince starts with the first message stored at or after t. It
// cannot be combined with WithFollowAfter or WithFollowCaughtUp.
func WithFollowSince(t time.Time) FollowOption {
	return func(o *followOptions) error {
		if t.IsZero() {
			return fmt.Errorf("%w: follow since a zero time", ErrInvalidOption)
		}
		o.since = t
		return nil
	}
}

// WithFollowAfter starts after the message of sequence seq (the last one
// a caller already holds). Default: the stream's first message.
func WithFollowAfter(seq uint64) FollowOption {
	return func(o *followOptions) error { o.after = seq; return nil }
}

// WithFollowBatch sets how many messages one pull asks for. Default 2000.
func WithFollowBatch(n int) FollowOption {
	return func(o *followOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: follow batch %d", ErrInvalidOption, n)
		}
		o.batch = n
		return nil
	}
}

// WithFollowCaughtUp calls fn once, when every message the stream held
// when Follow started has been handed over (at once for an empty stream),
// with the sequence reached: the moment a projection that follows the
// stream is current and may answer.
func WithFollowCaughtUp(fn func(seq uint64)) FollowOption {
	return func(o *followOptions) error {
		if fn == nil {
			return fmt.Errorf("%w: nil caught-up function", ErrInvalidOption)
		}
		o.caughtUp = fn
		return nil
	}
}

// Follow hands every message of stream to fn, in stream order, from the
// first (or after WithFollowAfter's sequence), then each message stored
// afterwards, until ctx ends (it then returns ctx's error) or fn fails
// (its error is returned). It reads through an ordered consumer: no
// acknowledgements, nothing stored on the server beyond the consumer
// itself, gaps (a reconnect, a server restart) repaired by the client,
// so any number of processes can follow the same stream. Messages deleted
// or purged before they are read are not handed over; Follow does not
// tell of deletions, so what a follower must learn of is published, not
// deleted (a retraction supersedes a result).
func (c *Conn) Follow(ctx context.Context, stream string, fn func(ReplayMsg) error, opts ...FollowOption) error {
	o := followOptions{batch: 2000}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return err
		}
	}
	switch {
	case !o.since.IsZero() && o.after > 0:
		return fmt.Errorf("%w: follow since a time and after a sequence", ErrInvalidOption)
	case o.caughtUp != nil && (!o.since.IsZero() || len(o.filters) > 0):
		// The stream's state says nothing of a filter's or a time's
		// messages: when they are caught up with is not known at start.
		return fmt.Errorf("%w: a follower's caught-up function with a filter or a start time", ErrInvalidOption)
	}
	var state *jetstream.StreamState
	var cons jetstream.Consumer
	err := retryTransient(ctx, 100*time.Millisecond, func() error {
		s, err := c.js.Stream(ctx, stream)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		state = &info.State
		cfg := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy, FilterSubjects: o.filters}
		switch {
		case o.after > 0:
			cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, o.after+1
		case !o.since.IsZero():
			cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &o.since
		}
		cons, err = s.OrderedConsumer(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("follow %s: %w", stream, err)
	}
	caught := false
	catchUp := func(seq uint64) {
		if !caught {
			caught = true
			if o.caughtUp != nil {
				o.caughtUp(seq)
			}
		}
	}
	if state.Msgs == 0 || state.LastSeq <= o.after {
		catchUp(max(o.after, state.LastSeq))
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(o.batch))
	if err != nil {
		return fmt.Errorf("follow %s: %w", stream, err)
	}
	defer iter.Stop()
	stop := context.AfterFunc(ctx, iter.Stop)
	defer stop()
	for {
		raw, err := iter.Next()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return fmt.Errorf("follow %s: %w", stream, err)
			}
			c.log.Debug().Err(err).Str(logKeyStream, stream).Msg("followNext")
			continue
		}
		meta, err := raw.Metadata()
		if err != nil {
			return fmt.Errorf("follow %s: %w", stream, err)
		}
		if err := fn(ReplayMsg{Subject: raw.Subject(), Data: raw.Data(), Header: raw.Headers(),
			Sequence: meta.Sequence.Stream, Published: meta.Timestamp}); err != nil {
			return fmt.Errorf("follow %s: %w", stream, err)
		}
		if meta.NumPending == 0 {
			catchUp(meta.Sequence.Stream)
		}
	}
}
