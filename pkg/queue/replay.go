package queue

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ReplayMsg is one message of a replay: the last of its subject, or any
// with WithReplayAll.
type ReplayMsg struct {
	Subject   string
	Data      []byte
	Header    nats.Header
	Sequence  uint64
	Published time.Time
}

// ReplayProgress says how far a replay is.
type ReplayProgress struct {
	Done      uint64 // messages handed to the callback so far
	Remaining uint64 // messages the server still has for this replay
	Elapsed   time.Duration
}

// ReplayOption configures Replay.
type ReplayOption func(*replayOptions) error

type replayOptions struct {
	filters  []string
	batch    int
	progress func(ReplayProgress)
	every    time.Duration
	all      bool
	since    time.Time
}

// WithReplaySince hands every stored message under the filters that was
// stored at or after t, in stream order (it implies WithReplayAll): for a
// log read over a time window.
func WithReplaySince(t time.Time) ReplayOption {
	return func(o *replayOptions) error {
		if t.IsZero() {
			return fmt.Errorf("%w: replay since a zero time", ErrInvalidOption)
		}
		o.since, o.all = t, true
		return nil
	}
}

// WithReplayAll hands every stored message under the filters to the
// function, in stream order, not only the last of each subject: for a
// stream that keeps a history per subject (Verdict's results stream keeps
// a few messages per subject, and its readers pick the newest evaluation
// among them, whatever order they arrived in).
func WithReplayAll() ReplayOption {
	return func(o *replayOptions) error { o.all = true; return nil }
}

// WithReplayFilter limits the replay to subjects matching the filters
// (for example ResultsOfResource(uid)). Default: the whole stream.
func WithReplayFilter(subjects ...string) ReplayOption {
	return func(o *replayOptions) error {
		for _, s := range subjects {
			if s == "" {
				return fmt.Errorf("%w: empty replay filter", ErrInvalidOption)
			}
		}
		o.filters = append(o.filters, subjects...)
		return nil
	}
}

// WithReplayBatch sets how many messages one pull asks for. Default 2000.
func WithReplayBatch(n int) ReplayOption {
	return func(o *replayOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: replay batch %d", ErrInvalidOption, n)
		}
		o.batch = n
		return nil
	}
}

// WithReplayProgress calls fn at most once per interval while replaying,
// and once at the end.
func WithReplayProgress(interval time.Duration, fn func(ReplayProgress)) ReplayOption {
	return func(o *replayOptions) error {
		if interval <= 0 || fn == nil {
			return fmt.Errorf("%w: replay progress needs an interval and a function", ErrInvalidOption)
		}
		o.every, o.progress = interval, fn
		return nil
	}
}

// Replay reads the last message of every subject of stream (under the
// filters; every message with WithReplayAll), in stream order, and hands
// each to fn: the way to rebuild a projection of a compacted stream (a
// stream of the latest result per subject). It uses an ephemeral, unacknowledged, in-memory consumer
// that delivers the last message per subject (or all), pulled in large
// batches, so it runs as fast as the server can send. It ends when the
// server has nothing more pending (messages stored meanwhile are
// included); an error from fn stops it and is returned. Rerun it after a
// failure: it is idempotent.
func (c *Conn) Replay(ctx context.Context, stream string, fn func(ReplayMsg) error, opts ...ReplayOption) (ReplayProgress, error) {
	o := replayOptions{batch: 2000}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return ReplayProgress{}, err
		}
	}
	start := time.Now()
	deliver := jetstream.DeliverLastPerSubjectPolicy
	if o.all {
		deliver = jetstream.DeliverAllPolicy
	}
	cfg := jetstream.ConsumerConfig{
		DeliverPolicy:     deliver,
		AckPolicy:         jetstream.AckNonePolicy,
		MemoryStorage:     true,
		Replicas:          1,
		InactiveThreshold: time.Minute,
		Description:       "verdict replay",
	}
	if !o.since.IsZero() {
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &o.since
	}
	if len(o.filters) == 0 {
		// Last-per-subject delivery needs a filter: the stream's own subjects.
		err := retryTransient(ctx, 100*time.Millisecond, func() error {
			s, err := c.js.Stream(ctx, stream)
			if err != nil {
				return err
			}
			o.filters = s.CachedInfo().Config.Subjects
			return nil
		})
		if err != nil {
			return ReplayProgress{}, fmt.Errorf("replay %s: %w", stream, err)
		}
	}
	switch len(o.filters) {
	case 0:
		return ReplayProgress{}, fmt.Errorf("%w: replay %s: the stream has no subjects", ErrInvalidOption, stream)
	case 1:
		cfg.FilterSubject = o.filters[0]
	default:
		cfg.FilterSubjects = o.filters
	}
	var cons jetstream.Consumer
	err := retryTransient(ctx, 100*time.Millisecond, func() error {
		var err error
		cons, err = c.js.CreateConsumer(ctx, stream, cfg)
		return err
	})
	if err != nil {
		return ReplayProgress{}, fmt.Errorf("replay %s: %w", stream, err)
	}
	name := cons.CachedInfo().Name
	defer func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := c.js.DeleteConsumer(dctx, stream, name); err != nil && !errors.Is(err, jetstream.ErrConsumerNotFound) {
			c.log.Debug().Err(err).Str(logKeyStream, stream).Msg("replayConsumerDelete")
		}
	}()

	p := ReplayProgress{Remaining: cons.CachedInfo().NumPending}
	report := func() {
		p.Elapsed = time.Since(start)
		if o.progress != nil {
			o.progress(p)
		}
	}
	mReplayed := c.metrics.replayed.WithLabelValues(stream)
	if p.Remaining == 0 {
		report()
		return p, nil
	}
	iter, err := cons.Messages(jetstream.PullMaxMessages(o.batch))
	if err != nil {
		return p, fmt.Errorf("replay %s: %w", stream, err)
	}
	defer iter.Stop()
	stop := context.AfterFunc(ctx, iter.Stop)
	defer stop()
	// Messages counted pending when the consumer was made may be deleted
	// or purged before they are delivered (a resource's results purged
	// while a fold reads them): then no message ever says that none is
	// left, and the iterator would wait for ever. So while no message
	// comes, the consumer is asked: nothing pending and everything
	// delivered handed to fn means the replay is complete.
	var seen atomic.Uint64 // the messages handed to fn
	var drained atomic.Bool
	wctx, cancelWatch := context.WithCancel(ctx)
	defer cancelWatch()
	activity := make(chan struct{}, 1)
	go c.watchReplay(wctx, cons, &seen, &drained, activity, iter.Stop)
	last := time.Now()
	for {
		raw, err := iter.Next()
		if err != nil {
			if drained.Load() {
				mReplayed.Add(float64(p.Done % 1024))
				p.Remaining = 0
				report()
				return p, nil
			}
			if ctx.Err() != nil {
				return p, fmt.Errorf("replay %s: %w", stream, ctx.Err())
			}
			return p, fmt.Errorf("replay %s after %d messages (%s): %w", stream, p.Done, c.consumerPlace(ctx, cons), err)
		}
		meta, err := raw.Metadata()
		if err != nil {
			return p, fmt.Errorf("replay %s: %w", stream, err)
		}
		if err := fn(ReplayMsg{Subject: raw.Subject(), Data: raw.Data(), Header: raw.Headers(),
			Sequence: meta.Sequence.Stream, Published: meta.Timestamp}); err != nil {
			return p, fmt.Errorf("replay %s: %w", stream, err)
		}
		seen.Add(1)
		select {
		case activity <- struct{}{}:
		default:
		}
		p.Done++
		p.Remaining = meta.NumPending
		if p.Done%1024 == 0 {
			mReplayed.Add(1024)
			if o.progress != nil && time.Since(last) >= o.every {
				last = time.Now()
				report()
			}
		}
		if meta.NumPending == 0 {
			mReplayed.Add(float64(p.Done % 1024))
			report()
			c.log.Debug().Str(logKeyStream, stream).Uint64(logKeyProgress, p.Done).Dur("elapsed", p.Elapsed).Msg("replayDone")
			return p, nil
		}
	}
}

// replayIdle is how long a replay waits for a message before it asks
// its consumer whether any is left.
var replayIdle = time.Second

// watchReplay asks the replay's consumer, whenever no message came for
// replayIdle, whether anything is left: with nothing pending and every
// delivered message handed over (seen counts them; the consumer's
// sequence counts its deliveries), the messages still counted when
// the replay started were removed from the stream; it sets drained and
// stops the iterator.
func (c *Conn) watchReplay(ctx context.Context, cons jetstream.Consumer, seen *atomic.Uint64, drained *atomic.Bool, activity <-chan struct{}, stop func()) {
	t := time.NewTimer(replayIdle)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-activity:
			t.Reset(replayIdle)
			continue
		case <-t.C:
		}
		info, err := cons.Info(ctx)
		if err == nil && info.NumPending == 0 && info.Delivered.Consumer <= seen.Load() {
			drained.Store(true)
			stop()
			return
		}
		t.Reset(replayIdle)
	}
}

// consumerPlace says where a consumer runs and how far it is, for an
// error that needs it (a consumer that sends no heartbeat): its server,
// or why that cannot be told.
func (c *Conn) consumerPlace(ctx context.Context, cons jetstream.Consumer) string {
	ictx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := cons.Info(ictx)
	if err != nil {
		return "consumer info: " + err.Error()
	}
	where := "a single server"
	if info.Cluster != nil {
		where = fmt.Sprintf("server %q of cluster %q", info.Cluster.Leader, info.Cluster.Name)
	}
	return fmt.Sprintf("consumer %s on %s, %d pending, %d pull requests waiting", info.Name, where, info.NumPending, info.NumWaiting)
}
