package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Message is one message to publish.
type Message struct {
	// Subject: built with ResultSubject, WorkSubject and the like.
	Subject string
	// ID becomes the Nats-Msg-Id: deterministic (see MsgID), so a retried
	// publish, or two replicas publishing the same fact, are stored once
	// within the stream's duplicate window. Required.
	ID string
	// Data is the payload. The publisher keeps it until acknowledged: do
	// not change it after publishing.
	Data []byte
	// Header holds extra headers (copied, never changed).
	Header nats.Header
}

// PubAck is the server's acknowledgement of a stored message.
type PubAck struct {
	Stream    string
	Sequence  uint64
	Duplicate bool // an earlier publish with the same id was stored
}

func (m Message) natsMsg() (*nats.Msg, error) {
	msg := &nats.Msg{}
	if err := m.fill(msg); err != nil {
		return nil, err
	}
	return msg, nil
}

// Validate checks that m can be published: a valid subject
// (ErrInvalidSubject) and an id (ErrMissingID).
func (m Message) Validate() error {
	if !validSubject(m.Subject) {
		if len(m.Subject) > MaxSubjectLen {
			return fmt.Errorf("%w: %d bytes, more than %d: %q (cut)", ErrInvalidSubject, len(m.Subject), MaxSubjectLen, m.Subject[:64])
		}
		return fmt.Errorf("%w: %q", ErrInvalidSubject, m.Subject)
	}
	if m.ID == "" {
		return fmt.Errorf("%w: subject %q", ErrMissingID, m.Subject)
	}
	return nil
}

// fill validates m and writes it into dst, with its id header.
func (m Message) fill(dst *nats.Msg) error {
	if err := m.Validate(); err != nil {
		return err
	}
	h := make(nats.Header, len(m.Header)+1)
	for k, v := range m.Header {
		h[k] = v
	}
	h[jetstream.MsgIDHeader] = []string{m.ID}
	dst.Subject, dst.Data, dst.Header = m.Subject, m.Data, h
	return nil
}

// Default deadlines of publishing.
const (
	DefaultSyncPublishTimeout = 5 * time.Second
	syncAttemptTimeout        = 2 * time.Second
)

// PublishSync publishes m and waits until JetStream has stored it (or
// recognised it as a duplicate), for work that must be durable before the
// caller goes on. The deadline is ctx's, or DefaultSyncPublishTimeout if
// ctx has none. Transient failures (a leader election, a reconnect, a lost
// ack) are retried with backoff under the same message id, so a retry never
// stores the message twice. A permanent refusal fails at once with
// ErrPublishRejected, a stream at its limits with ErrStreamFull (and
// ErrPublishRejected); running out of time fails with ErrPublishTimeout.
func (c *Conn) PublishSync(ctx context.Context, m Message) (PubAck, error) {
	msg, err := m.natsMsg()
	if err != nil {
		return PubAck{}, err
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultSyncPublishTimeout)
		defer cancel()
	}
	start := time.Now()
	bo := newBackoff(25*time.Millisecond, time.Second)
	for attempt := 1; ; attempt++ {
		actx, cancel := context.WithTimeout(ctx, syncAttemptTimeout)
		ack, err := c.js.PublishMsg(actx, msg)
		cancel()
		if err == nil {
			res := "ok"
			if ack.Duplicate {
				res = "duplicate"
				c.metrics.duplicates.WithLabelValues("sync").Inc()
			} else {
				c.metrics.published.WithLabelValues("sync").Inc()
			}
			c.metrics.syncPublish.WithLabelValues(res).Observe(time.Since(start).Seconds())
			return PubAck{Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate}, nil
		}
		if streamFull(err) {
			c.metrics.dropped.WithLabelValues("sync", dropStreamFull).Inc()
			c.metrics.syncPublish.WithLabelValues("error").Observe(time.Since(start).Seconds())
			return PubAck{}, fmt.Errorf("%w: %w: %s: %w", ErrStreamFull, ErrPublishRejected, m.Subject, err)
		}
		if permanent(err) {
			c.metrics.dropped.WithLabelValues("sync", dropRejected).Inc()
			c.metrics.syncPublish.WithLabelValues("error").Observe(time.Since(start).Seconds())
			return PubAck{}, fmt.Errorf("%w: %s: %w", ErrPublishRejected, m.Subject, err)
		}
		if errors.Is(err, jetstream.ErrNoStreamResponse) {
			// No stream answered: deleted (provision the streams again,
			// rate-limited, in the background) or electing a leader. The
			// retries below go on meanwhile, without waiting for the
			// heal: an election answers within seconds, and a provision
			// sent while it runs can take as long as the election
			// itself.
			c.reprovision(ctx, causeStreamMissing)
		}
		wait := bo.NextBackOff()
		dl, _ := ctx.Deadline()
		if ctx.Err() != nil || time.Until(dl) < wait {
			c.metrics.dropped.WithLabelValues("sync", dropExpired).Inc()
			c.metrics.syncPublish.WithLabelValues("error").Observe(time.Since(start).Seconds())
			return PubAck{}, fmt.Errorf("%w: %s after %d attempts: %w", ErrPublishTimeout, m.Subject, attempt, err)
		}
		c.metrics.retried.WithLabelValues("sync").Inc()
		c.log.Debug().Err(err).Str(logKeySubject, m.Subject).Int(logKeyAttempt, attempt).Msg("publishRetry")
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
	}
}

func newBackoff(initial, maxInterval time.Duration) *backoff.ExponentialBackOff {
	bo := backoff.NewExponentialBackOff()
	bo.InitialInterval = initial
	bo.MaxInterval = maxInterval
	bo.MaxElapsedTime = 0 // the message's deadline bounds it
	bo.Reset()
	return bo
}

// PublisherStats are an asynchronous publisher's counters.
type PublisherStats struct {
	Published  uint64 // stored as new
	Duplicates uint64 // acknowledged as a duplicate of an earlier publish
	Retried    uint64 // attempts repeated after a transient failure
	Dropped    uint64 // given up: buffer full, deadline passed, rejected, stream full, closed
	Pending    int    // taken and not yet acknowledged or dropped
}

// Reasons a message is dropped.
const (
	dropFull       = "full" // the publisher's buffer
	dropExpired    = "expired"
	dropRejected   = "rejected"
	dropClosed     = "closed"
	dropStreamFull = "streamFull" // the stream's limits (DiscardNew)
)

// PublisherOption configures NewAsyncPublisher.
type PublisherOption func(*publisherOptions) error

type publisherOptions struct {
	name        string
	buffer      int
	deadline    time.Duration
	ackTimeout  time.Duration
	maxInFlight int
	boInitial   time.Duration
	boMax       time.Duration
	linger      time.Duration
	onDrop      func(Message, error)
	onAck       func(Message)
}

// WithPublisherName names the publisher in metrics and logs. Default "async".
func WithPublisherName(name string) PublisherOption {
	return func(o *publisherOptions) error {
		if name == "" {
			return fmt.Errorf("%w: empty publisher name", ErrInvalidOption)
		}
		o.name = name
		return nil
	}
}

// WithBufferSize bounds the messages taken and not yet acknowledged
// (queued, in flight, or waiting to be retried). Default 10000.
func WithBufferSize(n int) PublisherOption {
	return func(o *publisherOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: buffer size %d", ErrInvalidOption, n)
		}
		o.buffer = n
		return nil
	}
}

// WithMessageDeadline is how long after Publish a message may still be
// tried before it is dropped. Default 30s.
func WithMessageDeadline(d time.Duration) PublisherOption {
	return func(o *publisherOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: message deadline %s", ErrInvalidOption, d)
		}
		o.deadline = d
		return nil
	}
}

// WithAckTimeout is how long one attempt waits for its ack before it is
// retried. Default 5s.
func WithAckTimeout(d time.Duration) PublisherOption {
	return func(o *publisherOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: ack timeout %s", ErrInvalidOption, d)
		}
		o.ackTimeout = d
		return nil
	}
}

// WithMaxInFlight bounds the publishes sent and not yet acknowledged by the
// server (the rest wait in the buffer). Default 4000.
func WithMaxInFlight(n int) PublisherOption {
	return func(o *publisherOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: max in flight %d", ErrInvalidOption, n)
		}
		o.maxInFlight = n
		return nil
	}
}

// WithRetryBackoff sets the exponential backoff between attempts of one
// message. Default 50ms to 2s.
func WithRetryBackoff(initial, maxInterval time.Duration) PublisherOption {
	return func(o *publisherOptions) error {
		if initial <= 0 || maxInterval < initial {
			return fmt.Errorf("%w: retry backoff %s..%s", ErrInvalidOption, initial, maxInterval)
		}
		o.boInitial, o.boMax = initial, maxInterval
		return nil
	}
}

// WithLinger makes the pump gather what is taken within d of a message
// before it sends them (up to lingerMax messages), so that a steady stream
// of messages goes out in bursts: one write of the connection for many
// messages, and the server reads, stores and acknowledges them together,
// instead of a write, a read, a store and an acknowledgement for each (at
// 1,000 admissions a second, a millisecond apart, nothing coalesces
// otherwise). Each message reaches the stream up to d later. Default 0:
// each is sent as soon as it is taken.
func WithLinger(d time.Duration) PublisherOption {
	return func(o *publisherOptions) error {
		if d < 0 || d > time.Second {
			return fmt.Errorf("%w: linger %s (0 to 1s)", ErrInvalidOption, d)
		}
		o.linger = d
		return nil
	}
}

// lingerMax bounds what one linger gathers.
const lingerMax = 256

// WithDropHandler is called for every message given up after it was taken
// (deadline passed, rejected, stream full, closed), with the reason
// (errors.Is it against ErrPublishTimeout, ErrPublishRejected,
// ErrStreamFull, ErrPublisherClosed). It runs on the
// publisher's goroutines: it must not block. Messages refused by Publish
// itself are reported by Publish's error, not here.
func WithDropHandler(fn func(Message, error)) PublisherOption {
	return func(o *publisherOptions) error { o.onDrop = fn; return nil }
}

// WithAckHandler is called for every message the stream acknowledged
// (stored, or a duplicate of one stored), on the publisher's goroutines:
// it must not block. A Spool forgets a message there.
func WithAckHandler(fn func(Message)) PublisherOption {
	return func(o *publisherOptions) error { o.onAck = fn; return nil }
}

// AsyncPublisher publishes without making the caller wait: Publish puts the
// message in a bounded buffer and returns; a pump sends it with up to
// WithMaxInFlight acks outstanding, retries transient failures with
// exponential backoff until the message's deadline, and counts the outcome.
// When the buffer is full, Publish fails at once with ErrBufferFull (counted
// as dropped): the admission path never blocks on it.
//
// It keeps its own acknowledgements rather than nats.go's asynchronous
// JetStream publishing, which is the same protocol (a publish with a reply
// subject under one wildcard subscription): one timer per message, a
// future, and encoding/json for every ack cost the webhook about a tenth of
// its CPU per admission, as each admitted object publishes one result per
// policy. Here a sent message is an entry in a map keyed by its attempt's
// number (the reply subject's last token), acks are read by decodePubAck,
// and one ticker times out what is unanswered.
type AsyncPublisher struct {
	c    *Conn
	opts publisherOptions
	log  zerolog.Logger

	// replyPrefix is the reply subjects' prefix (an inbox of its own,
	// ending in a dot); the pump alone numbers attempts with nextID.
	replyPrefix string
	replySub    *nats.Subscription
	nextID      uint64

	// queue carries batches (one Publish or PublishAll, or one retry);
	// its capacity, the buffer size, bounds pending entries, so a batch
	// always fits.
	queue   chan []*pubEntry
	pending atomic.Int64

	// out, outID and replyBuf are the pump's own: each attempt is
	// written into them, as nats.go serialises a message as it takes it.
	out      nats.Msg
	outID    []string
	replyBuf []byte

	mu      sync.Mutex // guards idle, stopped
	idle    chan struct{}
	stopped bool

	flightMu sync.Mutex // guards inflight
	inflight map[uint64]*pubEntry
	// room wakes a pump waiting for a slot (WithMaxInFlight): sent to,
	// without blocking, when an entry leaves a full map.
	room chan struct{}

	connected atomic.Bool // follows the connection's status
	statusCh  chan nats.Status

	closed   atomic.Bool
	stop     chan struct{}
	pumpDone chan struct{}

	published, duplicates, retried, dropped atomic.Uint64

	mPublished, mDuplicates, mRetried Counter
	mDropped                          map[string]Counter
	mPending                          Gauge
}

type pubEntry struct {
	msg      Message
	deadline time.Time
	bo       *backoff.ExponentialBackOff
	sent     time.Time // of the attempt in flight
}

// NewAsyncPublisher starts an asynchronous publisher on c. Stop it with
// Close.
func (c *Conn) NewAsyncPublisher(opts ...PublisherOption) (*AsyncPublisher, error) {
	o := publisherOptions{
		name: "async", buffer: 10000, deadline: 30 * time.Second, ackTimeout: 5 * time.Second,
		maxInFlight: 4000, boInitial: 50 * time.Millisecond, boMax: 2 * time.Second,
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	p := &AsyncPublisher{
		c:        c,
		opts:     o,
		log:      c.log.With().Str(logKeyPublisher, o.name).Logger(),
		queue:    make(chan []*pubEntry, o.buffer),
		inflight: make(map[uint64]*pubEntry, min(o.maxInFlight, o.buffer)),
		room:     make(chan struct{}, 1),
		stop:     make(chan struct{}),
		pumpDone: make(chan struct{}),

		mPublished:  c.metrics.published.WithLabelValues(o.name),
		mDuplicates: c.metrics.duplicates.WithLabelValues(o.name),
		mRetried:    c.metrics.retried.WithLabelValues(o.name),
		mPending:    c.metrics.pending.WithLabelValues(o.name),
		mDropped:    map[string]Counter{},
	}
	for _, r := range []string{dropFull, dropExpired, dropRejected, dropClosed, dropStreamFull} {
		p.mDropped[r] = c.metrics.dropped.WithLabelValues(o.name, r)
	}
	p.replyPrefix = c.nc.NewInbox() + "."
	sub, err := c.nc.Subscribe(p.replyPrefix+"*", p.onReply)
	if err != nil {
		return nil, fmt.Errorf("subscribe to acknowledgements: %w", err)
	}
	p.replySub = sub
	// Follow the connection's status without taking its lock per message.
	p.statusCh = c.nc.StatusChanged(nats.CONNECTED, nats.DISCONNECTED, nats.RECONNECTING, nats.CLOSED)
	p.connected.Store(c.nc.IsConnected())
	go p.watch()
	go p.pump()
	return p, nil
}

// watch follows the connection's status and times out unanswered
// attempts. A lost connection fails every attempt in flight (their acks
// may be lost with it): each is retried under its message id, so one the
// stream stored before is acknowledged as a duplicate.
func (p *AsyncPublisher) watch() {
	tick := time.NewTicker(min(max(p.opts.ackTimeout/4, 5*time.Millisecond), time.Second))
	defer tick.Stop()
	statusCh := p.statusCh
	for {
		select {
		case st, ok := <-statusCh:
			if !ok {
				statusCh = nil
				continue
			}
			// Read the state itself: events can be dropped, never wrong.
			p.connected.Store(p.c.nc.IsConnected())
			switch st {
			case nats.DISCONNECTED, nats.RECONNECTING:
				p.failInFlight(func(*pubEntry) bool { return true }, nats.ErrDisconnected)
			case nats.CLOSED:
				statusCh = nil
			}
		case now := <-tick.C:
			p.failInFlight(func(e *pubEntry) bool { return now.Sub(e.sent) >= p.opts.ackTimeout }, errAckTimeout)
		case <-p.pumpDone:
			p.c.nc.RemoveStatusListener(p.statusCh)
			return
		}
	}
}

// errAckTimeout: an attempt's ack did not come within WithAckTimeout.
var errAckTimeout = errors.New("no acknowledgement in time")

// failInFlight takes the attempts in flight that match and fails each with
// err (retried or dropped).
func (p *AsyncPublisher) failInFlight(match func(*pubEntry) bool, err error) {
	var failed []*pubEntry
	p.flightMu.Lock()
	full := len(p.inflight) >= p.opts.maxInFlight
	for id, e := range p.inflight {
		if match(e) {
			delete(p.inflight, id)
			failed = append(failed, e)
		}
	}
	p.flightMu.Unlock()
	if full && len(failed) > 0 {
		p.signalRoom()
	}
	for _, e := range failed {
		p.failed(e, err)
	}
}

func (p *AsyncPublisher) signalRoom() {
	select {
	case p.room <- struct{}{}:
	default:
	}
}

// Publish takes m for publishing within the default message deadline. It
// never blocks: it fails with ErrBufferFull when the buffer is full, with
// ErrPublisherClosed after Close, and with ErrInvalidSubject or
// ErrMissingID for a malformed message.
func (p *AsyncPublisher) Publish(m Message) error {
	return p.PublishBefore(m, time.Now().Add(p.opts.deadline))
}

// PublishBefore is Publish with the message's own deadline.
func (p *AsyncPublisher) PublishBefore(m Message, deadline time.Time) error {
	return p.PublishAllBefore([]Message{m}, deadline)
}

// PublishAll takes ms as Publish takes each (an admission's results go
// through the buffer as one batch). What fits in the buffer is taken, in
// order; the rest is dropped and counted, and the error (ErrBufferFull)
// says how many. A malformed message fails the whole call before any is
// taken. The messages may share memory (one payload buffer, one string
// for their subjects and ids): a message that must be retried is copied
// out first, so a batch is held only until each message's first attempt
// is answered.
func (p *AsyncPublisher) PublishAll(ms []Message) error {
	return p.PublishAllBefore(ms, time.Now().Add(p.opts.deadline))
}

// PublishAllBefore is PublishAll with the messages' own deadline.
func (p *AsyncPublisher) PublishAllBefore(ms []Message, deadline time.Time) error {
	if p.closed.Load() {
		for range ms {
			p.countDrop(dropClosed)
		}
		return ErrPublisherClosed
	}
	for _, m := range ms {
		if err := m.Validate(); err != nil {
			return err
		}
	}
	if len(ms) == 0 {
		return nil
	}
	k := int64(len(ms))
	n := p.pending.Add(k)
	var full error
	if over := n - int64(p.opts.buffer); over > 0 {
		over = min(over, k)
		p.pending.Add(-over)
		for range over {
			p.countDrop(dropFull)
		}
		full = fmt.Errorf("%w: %d of %d messages dropped, %d pending", ErrBufferFull, over, k, n-k)
		n -= over
		k -= over
		if k == 0 {
			return full
		}
	}
	p.mPending.Set(float64(n))
	entries := make([]pubEntry, k)
	batch := make([]*pubEntry, k)
	for i := range batch {
		entries[i] = pubEntry{msg: ms[i], deadline: deadline}
		batch[i] = &entries[i]
	}
	// Always through the pump: a send can block on a full socket buffer,
	// and the caller (the admission path) must never wait.
	p.queue <- batch
	return full
}

// Stats returns the publisher's counters.
func (p *AsyncPublisher) Stats() PublisherStats {
	return PublisherStats{
		Published:  p.published.Load(),
		Duplicates: p.duplicates.Load(),
		Retried:    p.retried.Load(),
		Dropped:    p.dropped.Load(),
		Pending:    int(p.pending.Load()),
	}
}

// Flush waits until every message taken so far is acknowledged or dropped
// (and any taken meanwhile too), or ctx ends.
func (p *AsyncPublisher) Flush(ctx context.Context) error {
	p.mu.Lock()
	if p.pending.Load() == 0 {
		p.mu.Unlock()
		return nil
	}
	if p.idle == nil {
		p.idle = make(chan struct{})
	}
	idle := p.idle
	p.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("flush %s: %d messages pending: %w", p.opts.name, p.pending.Load(), ctx.Err())
	}
}

// Close stops taking messages, waits (until ctx ends) for those taken to
// be acknowledged or dropped, then stops the pump. Messages still pending
// when ctx ends are dropped and counted, and Close reports how many.
func (p *AsyncPublisher) Close(ctx context.Context) error {
	if p.closed.Swap(true) {
		<-p.pumpDone
		return nil
	}
	flushErr := p.Flush(ctx)
	p.mu.Lock()
	p.stopped = true
	p.mu.Unlock()
	close(p.stop)
	<-p.pumpDone
	abandoned := 0
	for {
		select {
		case batch := <-p.queue:
			for _, e := range batch {
				p.drop(e, dropClosed, ErrPublisherClosed)
				abandoned++
			}
			continue
		default:
		}
		break
	}
	p.flightMu.Lock()
	left := make([]*pubEntry, 0, len(p.inflight))
	for k, e := range p.inflight {
		delete(p.inflight, k)
		left = append(left, e)
	}
	p.flightMu.Unlock()
	for _, e := range left {
		p.drop(e, dropClosed, ErrPublisherClosed)
		abandoned++
	}
	if flushErr != nil || abandoned > 0 {
		p.log.Warn().Int(logKeyDropped, abandoned).Msg("publisherClosedWithLoss")
		return fmt.Errorf("close publisher %s: %d messages dropped: %w", p.opts.name, abandoned, errors.Join(flushErr, ErrPublisherClosed))
	}
	return nil
}

// pump sends queued entries, one at a time, waiting while disconnected.
func (p *AsyncPublisher) pump() {
	defer close(p.pumpDone)
	defer func() { _ = p.replySub.Unsubscribe() }()
	p.outID = []string{""}
	p.out.Header = nats.Header{jetstream.MsgIDHeader: p.outID}
	for {
		select {
		case <-p.stop:
			return
		case batch := <-p.queue:
			if p.opts.linger > 0 {
				batch = p.gather(batch)
			}
			for i, e := range batch {
				if !p.send(e) {
					// Stopping: the rest are dropped as the queue's are.
					for _, e := range batch[i+1:] {
						p.drop(e, dropClosed, ErrPublisherClosed)
					}
					return
				}
			}
		}
	}
}

// gather adds to batch what is queued within the linger (WithLinger), up
// to lingerMax messages, or until the publisher stops.
func (p *AsyncPublisher) gather(batch []*pubEntry) []*pubEntry {
	t := time.NewTimer(p.opts.linger)
	defer t.Stop()
	owned := false // batch is a PublishAll's slice until copied
	for len(batch) < lingerMax {
		select {
		case more := <-p.queue:
			if !owned {
				batch, owned = append(make([]*pubEntry, 0, 2*(len(batch)+len(more))), batch...), true
			}
			batch = append(batch, more...)
		case <-t.C:
			return batch
		case <-p.stop:
			return batch
		}
	}
	return batch
}

// send publishes one entry; false when the publisher is stopping.
func (p *AsyncPublisher) send(e *pubEntry) bool {
	select {
	case <-p.stop:
		p.requeueOrDrop(e) // drops: the publisher is stopped
		return false
	default:
	}
	if time.Now().After(e.deadline) {
		p.drop(e, dropExpired, ErrPublishTimeout)
		return true
	}
	if !p.connected.Load() {
		switch p.waitForConnection(e.deadline) {
		case waitStopped:
			p.requeueOrDrop(e)
			return false
		case waitExpired:
			p.drop(e, dropExpired, fmt.Errorf("%w: not connected", ErrPublishTimeout))
			return true
		}
	}
	id, res := p.register(e)
	switch res {
	case waitStopped:
		p.requeueOrDrop(e)
		return false
	case waitExpired:
		p.drop(e, dropExpired, fmt.Errorf("%w: %d acknowledgements outstanding", ErrPublishTimeout, p.opts.maxInFlight))
		return true
	}
	err := p.c.nc.PublishMsg(p.attempt(e, id))
	// nats.go copied what it needs: the pump's message lets go of e's.
	p.out.Subject, p.out.Data, p.out.Reply = "", nil, ""
	if err != nil && p.take(id) != nil {
		// Not taken meanwhile (by a lost connection): retried or dropped.
		p.failed(e, err)
	}
	return true
}

// attempt writes e, as attempt id, into the pump's message: the id
// header, any extra headers, and the reply subject naming the attempt.
func (p *AsyncPublisher) attempt(e *pubEntry, id uint64) *nats.Msg {
	m := &p.out
	if len(m.Header) != 1 || len(e.msg.Header) > 0 {
		clear(m.Header)
		for k, v := range e.msg.Header {
			m.Header[k] = v
		}
		m.Header[jetstream.MsgIDHeader] = p.outID
	}
	p.outID[0] = e.msg.ID
	p.replyBuf = strconv.AppendUint(append(p.replyBuf[:0], p.replyPrefix...), id, 36)
	m.Subject, m.Data, m.Reply = e.msg.Subject, e.msg.Data, string(p.replyBuf)
	return m
}

// register puts e in flight under a new attempt number once fewer than
// WithMaxInFlight are, waiting (while the server is slow to acknowledge)
// until e's deadline or the publisher's stop.
func (p *AsyncPublisher) register(e *pubEntry) (uint64, waitResult) {
	var expire *time.Timer
	defer func() {
		if expire != nil {
			expire.Stop()
		}
	}()
	for {
		p.flightMu.Lock()
		if len(p.inflight) < p.opts.maxInFlight {
			p.nextID++
			id := p.nextID
			e.sent = time.Now()
			p.inflight[id] = e
			p.flightMu.Unlock()
			return id, waitOK
		}
		p.flightMu.Unlock()
		if expire == nil {
			expire = time.NewTimer(time.Until(e.deadline))
		}
		select {
		case <-p.room:
		case <-p.stop:
			return 0, waitStopped
		case <-expire.C:
			return 0, waitExpired
		}
	}
}

type waitResult int

const (
	waitOK waitResult = iota
	waitExpired
	waitStopped
)

func (p *AsyncPublisher) waitForConnection(deadline time.Time) waitResult {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	expire := time.NewTimer(time.Until(deadline))
	defer expire.Stop()
	for !p.connected.Load() {
		select {
		case <-p.stop:
			return waitStopped
		case <-expire.C:
			return waitExpired
		case <-t.C:
		}
	}
	return waitOK
}

// take removes attempt id from the map; nil if it is not there (answered,
// timed out, or failed with the connection).
func (p *AsyncPublisher) take(id uint64) *pubEntry {
	p.flightMu.Lock()
	e, ok := p.inflight[id]
	full := false
	if ok {
		full = len(p.inflight) >= p.opts.maxInFlight
		delete(p.inflight, id)
	}
	p.flightMu.Unlock()
	if full {
		p.signalRoom()
	}
	return e
}

// onReply reads an acknowledgement, on the subscription's goroutine: it
// must stay short. Anything on the reply subjects is checked: a reply to
// no attempt in flight (late, or not the server's) changes nothing.
func (p *AsyncPublisher) onReply(m *nats.Msg) {
	token := strings.TrimPrefix(m.Subject, p.replyPrefix)
	id, err := strconv.ParseUint(token, 36, 64)
	if err != nil || len(token) == len(m.Subject) {
		return
	}
	e := p.take(id)
	if e == nil {
		return
	}
	if len(m.Data) == 0 && m.Header.Get("Status") == "503" {
		// No responders: no stream takes the subject (yet), or JetStream
		// is not answering. Tried again until the deadline, while the
		// streams are provisioned again (rate-limited).
		p.c.reprovision(context.Background(), causeStreamMissing) // an acknowledgement's handler: no caller
		p.failed(e, jetstream.ErrNoStreamResponse)
		return
	}
	ack, err := decodePubAck(m.Data)
	switch {
	case err != nil:
		p.failed(e, fmt.Errorf("%w: %w", jetstream.ErrInvalidJSAck, err))
		return
	case ack.Error != nil:
		p.failed(e, ack.Error)
		return
	case ack.Stream == "":
		p.failed(e, jetstream.ErrInvalidJSAck)
		return
	}
	if ack.Duplicate {
		p.duplicates.Add(1)
		p.mDuplicates.Inc()
	} else {
		p.published.Add(1)
		p.mPublished.Inc()
	}
	if p.opts.onAck != nil {
		p.opts.onAck(e.msg)
	}
	p.settle()
}

// failed retries e after a backoff, or drops it if the error is permanent
// (a full stream included) or the backoff would pass its deadline.
func (p *AsyncPublisher) failed(e *pubEntry, err error) {
	if streamFull(err) {
		p.drop(e, dropStreamFull, fmt.Errorf("%w: %w: %w", ErrStreamFull, ErrPublishRejected, err))
		return
	}
	if permanent(err) {
		p.drop(e, dropRejected, fmt.Errorf("%w: %w", ErrPublishRejected, err))
		return
	}
	if e.bo == nil {
		e.bo = newBackoff(p.opts.boInitial, p.opts.boMax)
	}
	wait := e.bo.NextBackOff()
	if time.Now().Add(wait).After(e.deadline) {
		p.drop(e, dropExpired, fmt.Errorf("%w: %w", ErrPublishTimeout, err))
		return
	}
	p.retried.Add(1)
	p.mRetried.Inc()
	e = e.detached()
	time.AfterFunc(wait, func() { p.requeueOrDrop(e) })
}

// detached is a copy of e that shares no memory with the batch it came
// in (PublishAll's entries; a caller's shared payload buffer and key
// string): a message waiting for a retry, for as long as its deadline
// allows, holds only its own bytes, not its whole batch's.
func (e *pubEntry) detached() *pubEntry {
	d := *e
	d.msg.Subject = strings.Clone(e.msg.Subject)
	d.msg.ID = strings.Clone(e.msg.ID)
	d.msg.Data = bytes.Clone(e.msg.Data)
	return &d
}

// requeueOrDrop puts e back in the queue; it always fits, as the queue's
// capacity is the bound on pending entries and e is one of them.
func (p *AsyncPublisher) requeueOrDrop(e *pubEntry) {
	p.mu.Lock()
	if p.stopped {
		p.mu.Unlock()
		p.drop(e, dropClosed, ErrPublisherClosed)
		return
	}
	p.queue <- []*pubEntry{e}
	p.mu.Unlock()
}

func (p *AsyncPublisher) countDrop(reason string) {
	p.dropped.Add(1)
	p.mDropped[reason].Inc()
}

func (p *AsyncPublisher) drop(e *pubEntry, reason string, err error) {
	p.countDrop(reason)
	p.log.Debug().Err(err).Str(logKeySubject, e.msg.Subject).Str(logKeyReason, reason).Msg("publishDropped")
	if p.opts.onDrop != nil {
		p.opts.onDrop(e.msg, err)
	}
	p.settle()
}

// settle marks one pending entry finished and wakes Flush at zero.
func (p *AsyncPublisher) settle() {
	n := p.pending.Add(-1)
	p.mPending.Set(float64(n))
	if n == 0 {
		p.mu.Lock()
		if p.idle != nil && p.pending.Load() == 0 {
			close(p.idle)
			p.idle = nil
		}
		p.mu.Unlock()
	}
}
