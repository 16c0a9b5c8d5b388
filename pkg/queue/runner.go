package queue

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/rs/zerolog"
)

// Handler processes one message and says what became of it. It must be
// idempotent: every message may be delivered more than once. Its context
// ends at the runner's MaxWorkTime or when a drain runs out of time.
type Handler func(ctx context.Context, m *Msg) Outcome

// Msg is one delivered message.
type Msg struct {
	Subject   string
	Data      []byte
	Header    nats.Header
	Stream    string
	Sequence  uint64    // stream sequence
	Delivery  uint64    // 1 on the first delivery
	Published time.Time // when the stream stored it

	raw          jetstream.Msg
	ctx          msgCtx
	start        time.Time
	lastProgress atomic.Int64 // unix nanos of the last ack-wait reset
	r            *Runner
}

// LastAttempt reports whether this is the last delivery the runner
// allows (WithMaxDeliver): a Retry now dead-letters the message.
func (m *Msg) LastAttempt() bool {
	return m.r != nil && m.Delivery >= uint64(m.r.opts.maxDeliver)
}

// InProgress tells the server the message is still being worked on,
// resetting its AckWait. The runner already does this on its own every
// AckWait/3 until MaxWorkTime; call it for finer control.
func (m *Msg) InProgress() error {
	err := m.raw.InProgress()
	if err != nil {
		m.r.mAckErr["progress"].Inc()
		return fmt.Errorf("in progress %s: %w", m.Subject, err)
	}
	m.lastProgress.Store(time.Now().UnixNano())
	return nil
}

// Dead-letter headers: a message in the dead-letter stream carries its
// origin and why it is there. Original headers are kept, except Nats-*
// ones. (The names are those of the dead letters Verdict has stored.)
const (
	HeaderDeadReason     = "Verdict-Dead-Reason"
	HeaderDeadSubject    = "Verdict-Dead-Subject"
	HeaderDeadStream     = "Verdict-Dead-Stream"
	HeaderDeadSequence   = "Verdict-Dead-Sequence"
	HeaderDeadDeliveries = "Verdict-Dead-Deliveries"
	HeaderDeadConsumer   = "Verdict-Dead-Consumer"
	HeaderDeadTime       = "Verdict-Dead-Time"
)

// DeadLetter is a dead-lettered message read back (see ParseDeadLetter).
type DeadLetter struct {
	Reason     string
	Subject    string // origin subject
	Stream     string // origin stream
	Sequence   uint64 // origin stream sequence
	Deliveries uint64
	Consumer   string
	Time       time.Time
	Data       []byte
}

// ParseDeadLetter reads the dead-letter headers of a dead-letter message.
func ParseDeadLetter(h nats.Header, data []byte) (DeadLetter, error) {
	d := DeadLetter{
		Reason:   h.Get(HeaderDeadReason),
		Subject:  h.Get(HeaderDeadSubject),
		Stream:   h.Get(HeaderDeadStream),
		Consumer: h.Get(HeaderDeadConsumer),
		Data:     data,
	}
	if d.Subject == "" || d.Stream == "" {
		return d, fmt.Errorf("%w: not a dead letter (no origin headers)", ErrInvalidSubject)
	}
	var err error
	if d.Sequence, err = strconv.ParseUint(h.Get(HeaderDeadSequence), 10, 64); err != nil {
		return d, fmt.Errorf("dead letter sequence: %w", err)
	}
	if d.Deliveries, err = strconv.ParseUint(h.Get(HeaderDeadDeliveries), 10, 64); err != nil {
		return d, fmt.Errorf("dead letter deliveries: %w", err)
	}
	if d.Time, err = time.Parse(time.RFC3339Nano, h.Get(HeaderDeadTime)); err != nil {
		return d, fmt.Errorf("dead letter time: %w", err)
	}
	return d, nil
}

// RunnerOption configures NewRunner.
type RunnerOption func(*runnerOptions) error

type runnerOptions struct {
	concurrency  int
	maxDeliver   int
	retryMin     time.Duration
	retryMax     time.Duration
	maxWork      time.Duration
	drainTimeout time.Duration
	prefetch     int
	progress     time.Duration
	ackSync      bool
	heartbeat    time.Duration
	backlog      time.Duration
}

// WithBacklogInterval sets how often the runner reads its consumer's
// backlog into verdict_queue_backlog and
// verdict_queue_oldest_pending_age_seconds. Default 10s.
func WithBacklogInterval(d time.Duration) RunnerOption {
	return func(o *runnerOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: backlog interval %s", ErrInvalidOption, d)
		}
		o.backlog = d
		return nil
	}
}

// WithConcurrency sets how many handlers run at once. Default 4.
func WithConcurrency(n int) RunnerOption {
	return func(o *runnerOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: concurrency %d", ErrInvalidOption, n)
		}
		o.concurrency = n
		return nil
	}
}

// WithMaxDeliver bounds the attempts of one message: when the attempt
// numbered n fails (retry, panic) or attempts were lost (a handler killed
// without an answer), the message goes to the dead-letter stream. Default 5.
func WithMaxDeliver(n int) RunnerOption {
	return func(o *runnerOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: max deliver %d", ErrInvalidOption, n)
		}
		o.maxDeliver = n
		return nil
	}
}

// WithRetryDelays sets the exponential backoff of Retry() and of panics:
// min for the first redelivery, doubling up to max. Default 1s to 1m.
func WithRetryDelays(minDelay, maxDelay time.Duration) RunnerOption {
	return func(o *runnerOptions) error {
		if minDelay <= 0 || maxDelay < minDelay {
			return fmt.Errorf("%w: retry delays %s..%s", ErrInvalidOption, minDelay, maxDelay)
		}
		o.retryMin, o.retryMax = minDelay, maxDelay
		return nil
	}
}

// WithMaxWorkTime bounds one handler run: its context ends then, and the
// runner stops extending the message's AckWait. Default 5m.
func WithMaxWorkTime(d time.Duration) RunnerOption {
	return func(o *runnerOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: max work time %s", ErrInvalidOption, d)
		}
		o.maxWork = d
		return nil
	}
}

// WithDrainTimeout bounds how long Run waits, once its context ends, for
// handlers in flight to finish before their contexts are cancelled.
// Default 30s.
func WithDrainTimeout(d time.Duration) RunnerOption {
	return func(o *runnerOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: drain timeout %s", ErrInvalidOption, d)
		}
		o.drainTimeout = d
		return nil
	}
}

// WithPrefetch sets how many messages the client buffers ahead of the
// handlers (shared among them). Their AckWait runs while they wait, so keep it small for slow
// handlers. Default 4 × concurrency, at least 64.
func WithPrefetch(n int) RunnerOption {
	return func(o *runnerOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: prefetch %d", ErrInvalidOption, n)
		}
		o.prefetch = n
		return nil
	}
}

// WithProgressInterval sets how often a running handler's message gets an
// in-progress. Default AckWait/3.
func WithProgressInterval(d time.Duration) RunnerOption {
	return func(o *runnerOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: progress interval %s", ErrInvalidOption, d)
		}
		o.progress = d
		return nil
	}
}

// WithIdleHeartbeat sets how often the server confirms an idle pull is
// alive; two missed heartbeats make the runner pull again (after a server
// or consumer leader went away). Default 2s.
func WithIdleHeartbeat(d time.Duration) RunnerOption {
	return func(o *runnerOptions) error {
		if d < 500*time.Millisecond || d > 30*time.Second {
			return fmt.Errorf("%w: idle heartbeat %s (500ms to 30s)", ErrInvalidOption, d)
		}
		o.heartbeat = d
		return nil
	}
}

// WithAckSync waits for the server to confirm each ack (a round trip per
// message) instead of checking only that it was sent. Default off: a lost
// ack means one more delivery, which idempotent handlers absorb.
func WithAckSync(on bool) RunnerOption {
	return func(o *runnerOptions) error { o.ackSync = on; return nil }
}

// Runner runs a Handler over a durable pull consumer with N concurrent
// handlers. Several runners (in one process or many) on the same durable
// share its messages.
type Runner struct {
	c       *Conn
	stream  string
	durable string
	h       Handler
	opts    runnerOptions
	log     zerolog.Logger
	dead    jetstream.JetStream
	topo    Topology // where dead letters go

	mHandled    map[string]Counter
	mAckErr     map[string]Counter
	mTime       Observer
	mInFlight   Gauge
	mDead       Counter
	mDeadErrors Counter
	mBacklog    Gauge
	mOldest     Gauge
}

// Outcome labels of the handled metric.
const (
	handledDone   = "done"
	handledRetry  = "retry"
	handledPoison = "poison"
	handledPanic  = "panic"
	handledLost   = "lost"     // the handler's goroutine ended without an answer
	handledMax    = "exceeded" // arrived after MaxDeliver attempts
	handledDrain  = "drained"  // buffered at shutdown and given back
)

// NewRunner prepares a runner of h over the durable consumer durable on
// stream (created by Provision). Run starts it. Messages that fail their
// attempts go to the dead-letter stream of the connection's Topology; a
// connection without one cannot make a runner (ErrNoTopology).
func (c *Conn) NewRunner(stream, durable string, h Handler, opts ...RunnerOption) (*Runner, error) {
	if stream == "" || durable == "" || h == nil {
		return nil, fmt.Errorf("%w: a runner needs a stream, a durable consumer and a handler", ErrInvalidOption)
	}
	o := runnerOptions{concurrency: 4, maxDeliver: 5, retryMin: time.Second, retryMax: time.Minute,
		maxWork: 5 * time.Minute, drainTimeout: 30 * time.Second, heartbeat: 2 * time.Second, backlog: 10 * time.Second}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.prefetch == 0 {
		o.prefetch = max(64, 4*o.concurrency)
	}
	topo, err := c.Topology()
	if err != nil {
		return nil, fmt.Errorf("a runner dead-letters to its connection's topology: %w", err)
	}
	m := c.metrics
	r := &Runner{
		c: c, stream: stream, durable: durable, h: h, opts: o, dead: c.js, topo: topo,
		log:         c.log.With().Str(logKeyStream, stream).Str(logKeyConsumer, durable).Logger(),
		mHandled:    map[string]Counter{},
		mAckErr:     map[string]Counter{},
		mTime:       m.handleTime.WithLabelValues(durable),
		mInFlight:   m.inFlight.WithLabelValues(durable),
		mDead:       m.deadLettered.WithLabelValues(durable),
		mDeadErrors: m.deadErrors.WithLabelValues(durable),
		mBacklog:    m.backlog.WithLabelValues(durable),
		mOldest:     m.oldestPending.WithLabelValues(durable),
	}
	for _, k := range []string{handledDone, handledRetry, handledPoison, handledPanic, handledLost, handledMax, handledDrain} {
		r.mHandled[k] = m.handled.WithLabelValues(durable, k)
	}
	for _, k := range []string{"ack", "nak", "term", "progress"} {
		r.mAckErr[k] = m.ackErrors.WithLabelValues(durable, k)
	}
	return r, nil
}

type slot struct{ cur atomic.Pointer[Msg] }

// msgCtx is a handler's context: its parent's values, a deadline at
// MaxWorkTime, and a Done channel made only if the handler asks for it. The
// runner's heartbeat cancels it at the deadline or when the parent ends, so
// a message costs no timer.
type msgCtx struct {
	context.Context
	deadline time.Time

	mu   sync.Mutex
	done chan struct{}
	err  error
}

func (c *msgCtx) Deadline() (time.Time, bool) { return c.deadline, true }

func (c *msgCtx) Done() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done == nil {
		c.done = make(chan struct{})
		if c.err != nil {
			close(c.done)
		}
	}
	return c.done
}

func (c *msgCtx) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

func (c *msgCtx) cancel(err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		return
	}
	c.err = err
	if c.done != nil {
		close(c.done)
	}
}

// Run consumes until ctx ends, then drains: it stops fetching, gives back
// (naks) messages buffered but not started, waits up to the drain timeout
// for handlers in flight, cancels the rest and answers them as they
// return. It returns nil after a drain, or an error if the consumer cannot
// be found or the connection closed under it.
//
// Each of the N handlers has its own pull subscription on the durable and
// runs on that subscription's delivery goroutine: no hand-off between
// goroutines per message.
func (r *Runner) Run(ctx context.Context) error {
	cons, err := r.lookup(ctx)
	if err != nil {
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	progress := r.opts.progress
	if progress == 0 {
		progress = max(cons.CachedInfo().Config.AckWait/3, 50*time.Millisecond)
	}
	r.log.Info().Int(logKeyConcurrent, r.opts.concurrency).Msg("runnerStarted")

	hardCtx, hardCancel := context.WithCancel(r.log.WithContext(context.WithoutCancel(ctx)))
	defer hardCancel()
	slots := make([]slot, r.opts.concurrency)
	hbStop := make(chan struct{})
	hbDone := make(chan struct{})
	go r.heartbeat(hardCtx, slots, progress, hbStop, hbDone)
	backlogCtx, stopBacklog := context.WithCancel(hardCtx)
	defer stopBacklog()
	go r.watchBacklog(backlogCtx, cons)

	errs := make(chan error, len(slots))
	var wg sync.WaitGroup
	for i := range slots {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- r.consumeSlot(ctx, hardCtx, cons, &slots[i])
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
		timer := time.NewTimer(r.opts.drainTimeout)
		select {
		case <-done:
		case <-timer.C:
			r.log.Warn().Msg("drainTimeout")
			hardCancel()
			for i := range slots {
				if m := slots[i].cur.Load(); m != nil {
					m.ctx.cancel(context.Canceled)
				}
			}
			select {
			case <-done:
			case <-time.After(5 * time.Second):
				r.log.Error().Msg("handlersDidNotReturn")
			}
		}
		timer.Stop()
	}
	close(hbStop)
	<-hbDone
	var runErr error
	for range len(slots) {
		select {
		case err := <-errs:
			if runErr == nil {
				runErr = err
			}
		default:
		}
	}
	r.log.Info().Err(runErr).Msg("runnerStopped")
	return runErr
}

func (r *Runner) lookup(ctx context.Context) (jetstream.Consumer, error) {
	var cons jetstream.Consumer
	err := retryTransient(ctx, 200*time.Millisecond, func() error {
		var err error
		cons, err = r.c.js.Consumer(ctx, r.stream, r.durable)
		if errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound) {
			r.log.Warn().Err(err).Msg("consumerMissing")
			// Provision again what this Conn provisioned (rate-limited;
			// nothing if it never did), and look again once that is done.
			if healed := r.c.reprovision(ctx, causeConsumerMissing); healed != nil {
				select {
				case <-healed:
				case <-ctx.Done():
				}
			}
			return fmt.Errorf("%w (%w: waiting for provisioning)", err, errTryAgain)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("consumer %s on %s: %w", r.durable, r.stream, err)
	}
	return cons, nil
}

// consumeSlot runs one handler slot: a pull subscription whose delivery
// goroutine runs the handler. It returns nil once ctx has ended and the
// slot drained, or an error when the connection closed. Other failures
// (consumer deleted and provisioned again, an unrecoverable status) start a
// new subscription after a backoff; so does a handler that ended its
// goroutine, which leaves the subscription without a deliverer (what it had
// buffered comes back after AckWait).
func (r *Runner) consumeSlot(ctx, hard context.Context, cons jetstream.Consumer, s *slot) error {
	batch := max(1, r.opts.prefetch/r.opts.concurrency)
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return nil
		}
		failed := make(chan error, 1)
		exited := make(chan struct{})
		var exitOnce sync.Once
		cc, err := cons.Consume(func(raw jetstream.Msg) {
			if ctx.Err() != nil {
				r.giveBack(raw)
				return
			}
			finished := false
			defer func() {
				if !finished {
					exitOnce.Do(func() { close(exited) })
				}
			}()
			r.process(hard, s, raw)
			finished = true
		},
			jetstream.PullMaxMessages(batch),
			jetstream.PullHeartbeat(r.opts.heartbeat),
			jetstream.PullExpiry(max(10*time.Second, 4*r.opts.heartbeat)),
			jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
				if errors.Is(err, jetstream.ErrNoHeartbeat) {
					r.log.Debug().Err(err).Msg("pullHeartbeatMissed") // the client pulls again itself
					return
				}
				r.log.Warn().Err(err).Msg("consumeError")
				select {
				case failed <- err:
				default:
				}
			}))
		if err == nil {
			select {
			case <-ctx.Done():
				// Stop fetching; what is buffered is handed to the
				// callback, which gives it back; the handler in flight
				// finishes.
				cc.Drain()
				select {
				case <-cc.Closed():
				case <-exited:
				case <-hard.Done():
					// Handlers were told to stop: give the one in flight
					// a moment to answer.
					select {
					case <-cc.Closed():
					case <-exited:
					case <-time.After(5 * time.Second):
					}
				}
				cc.Stop()
				return nil
			case <-exited:
				cc.Stop()
				attempt = 0
				continue
			case <-cc.Closed():
				select {
				case err = <-failed:
				default:
					err = errors.New("consume stopped")
				}
			}
			cc.Stop()
		}
		if r.c.nc.IsClosed() {
			return fmt.Errorf("consume %s: %w", r.durable, nats.ErrConnectionClosed)
		}
		if errors.Is(err, jetstream.ErrInvalidOption) {
			return fmt.Errorf("consume %s: %w", r.durable, err)
		}
		r.log.Warn().Err(err).Int(logKeyAttempt, attempt).Msg("consumeRestart")
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoffDelay(attempt, 100*time.Millisecond, 5*time.Second)):
		}
		if cons, err = r.lookup(ctx); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
	}
}

// giveBack naks a message buffered but not started at shutdown, so that
// another instance gets it now rather than after AckWait.
func (r *Runner) giveBack(raw jetstream.Msg) {
	r.mHandled[handledDrain].Inc()
	if err := raw.Nak(); err != nil {
		r.mAckErr["nak"].Inc()
		r.log.Warn().Err(err).Str(logKeySubject, raw.Subject()).Msg("nakFailed")
	}
}

// heartbeat sends in-progress for messages whose handlers run long.
// It also ends handler contexts: at MaxWorkTime, or when the runner's hard
// context is cancelled after a drain timeout.
func (r *Runner) heartbeat(hard context.Context, slots []slot, every time.Duration, stop <-chan struct{}, done chan<- struct{}) {
	defer close(done)
	t := time.NewTicker(min(max(every/4, 10*time.Millisecond), 250*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			for i := range slots {
				m := slots[i].cur.Load()
				if m == nil {
					continue
				}
				if err := hard.Err(); err != nil {
					m.ctx.cancel(err)
					continue
				}
				if !now.Before(m.ctx.deadline) {
					m.ctx.cancel(context.DeadlineExceeded)
					continue
				}
				if now.UnixNano()-m.lastProgress.Load() < int64(every) {
					continue
				}
				if err := m.raw.InProgress(); err != nil {
					if !errors.Is(err, jetstream.ErrMsgAlreadyAckd) {
						r.mAckErr["progress"].Inc()
						r.log.Warn().Err(err).Str(logKeySubject, m.Subject).Msg("inProgressFailed")
					}
					continue
				}
				m.lastProgress.Store(now.UnixNano())
			}
		}
	}
}

func (r *Runner) process(ctx context.Context, s *slot, raw jetstream.Msg) {
	meta, err := raw.Metadata()
	if err != nil {
		// Not a JetStream message: nothing to answer.
		r.log.Error().Err(err).Str(logKeySubject, raw.Subject()).Msg("badMetadata")
		return
	}
	m := &Msg{
		Subject: raw.Subject(), Data: raw.Data(), Header: raw.Headers(),
		Stream: meta.Stream, Sequence: meta.Sequence.Stream, Delivery: meta.NumDelivered,
		Published: meta.Timestamp, raw: raw, start: time.Now(), r: r,
	}
	if m.Delivery > uint64(r.opts.maxDeliver) {
		// Earlier attempts ended without an answer (killed handlers,
		// crashed processes): no more tries.
		r.mHandled[handledMax].Inc()
		r.deadLetter(ctx, m, "delivered "+strconv.FormatUint(m.Delivery, 10)+" times, more than max deliver "+strconv.Itoa(r.opts.maxDeliver))
		return
	}
	m.ctx.Context, m.ctx.deadline = ctx, m.start.Add(r.opts.maxWork)
	m.lastProgress.Store(m.start.UnixNano())
	s.cur.Store(m)
	if err := ctx.Err(); err != nil { // cancelled before the slot was visible
		m.ctx.cancel(err)
	}
	r.mInFlight.Inc()
	answered := false
	defer func() {
		s.cur.Store(nil)
		r.mInFlight.Dec()
		if !answered {
			r.mHandled[handledLost].Inc()
			r.log.Error().Str(logKeySubject, m.Subject).Uint64(logKeySequence, m.Sequence).Msg("handlerExitedWithoutAnswer")
		}
	}()
	out, perr, ok := r.call(&m.ctx, m) //nolint:contextcheck // msgCtx derives from the runner's context (deadline and hard stop)
	m.ctx.cancel(context.Canceled)
	answered = true
	r.mTime.Observe(time.Since(m.start).Seconds())
	if !ok {
		r.mHandled[handledPanic].Inc()
		r.log.Error().Str(logKeySubject, m.Subject).Uint64(logKeySequence, m.Sequence).
			Str(logKeyReason, fmt.Sprint(perr)).Bytes("stack", debug.Stack()).Msg("handlerPanic")
		out = Retry().Because(fmt.Errorf("panic: %v", perr))
	}
	if out.kind == outcomeUnset {
		r.log.Error().Str(logKeySubject, m.Subject).Msg("handlerReturnedNoOutcome")
		out = Retry().Because(errors.New("handler returned no outcome"))
	}
	r.record(m, out)
	switch out.kind {
	case outcomeDone:
		r.mHandled[handledDone].Inc()
		var err error
		if r.opts.ackSync {
			actx, acancel := context.WithTimeout(ctx, 5*time.Second)
			err = raw.DoubleAck(actx)
			acancel()
		} else {
			err = raw.Ack()
		}
		if err != nil {
			r.mAckErr["ack"].Inc()
			r.log.Warn().Err(err).Str(logKeySubject, m.Subject).Msg("ackFailed")
		}
	case outcomePoison:
		r.mHandled[handledPoison].Inc()
		r.deadLetter(ctx, m, out.deadLetterReason())
	default:
		if ok {
			r.mHandled[handledRetry].Inc()
		}
		if m.LastAttempt() {
			reason := out.cause
			if reason == "" {
				reason = "retries exhausted"
			}
			r.deadLetter(ctx, m, "after "+strconv.FormatUint(m.Delivery, 10)+" deliveries: "+reason)
			return
		}
		delay := out.delay
		if delay <= 0 {
			delay = backoffDelay(int(m.Delivery), r.opts.retryMin, r.opts.retryMax)
		}
		r.nak(m, delay)
	}
}

// record counts what became of m (work_items_total) and logs it: at
// debug level when done, info when retried, warn when dead-lettered.
func (r *Runner) record(m *Msg, out Outcome) {
	result := out.Result(m)
	r.c.metrics.workItems.WithLabelValues(r.durable, string(r.kindOf(m.Subject)), result, out.reason).Inc()
	ev := r.log.Debug()
	switch result {
	case ResultRetried:
		ev = r.log.Info()
	case ResultDeadLettered:
		ev = r.log.Warn()
	}
	ev.Str(logKeySubject, m.Subject).Uint64(logKeyDelivery, m.Delivery).Str(logKeyOutcome, result).
		Str(logKeyReason, out.reason).Str(logKeyDetail, out.cause).Msg("workItemHandled")
}

// kindOf is the work kind of a subject of the topology's work stream, ""
// for any other (or an unknown kind).
func (r *Runner) kindOf(subject string) WorkKind {
	rest, ok := strings.CutPrefix(subject, r.topo.WorkPrefix)
	if !ok {
		return ""
	}
	k, _, _ := strings.Cut(rest, ".")
	if !r.topo.ValidKind(WorkKind(k)) {
		return ""
	}
	return WorkKind(k)
}

// call runs the handler, turning a panic into ok=false.
func (r *Runner) call(ctx context.Context, m *Msg) (out Outcome, perr any, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			perr, ok = p, false
		}
	}()
	return r.h(ctx, m), nil, true
}

func (r *Runner) nak(m *Msg, delay time.Duration) {
	if err := m.raw.NakWithDelay(delay); err != nil {
		r.mAckErr["nak"].Inc()
		r.log.Warn().Err(err).Str(logKeySubject, m.Subject).Msg("nakFailed")
		return
	}
	r.log.Debug().Str(logKeySubject, m.Subject).Uint64(logKeyDelivery, m.Delivery).Dur(logKeyDelay, delay).Msg("retryScheduled")
}

// deadLetter writes m to the dead-letter stream and only then terminates it (which
// removes it from a work-queue stream). If the dead-letter publish fails,
// the message is nakked and stays: it comes back and is tried again.
func (r *Runner) deadLetter(ctx context.Context, m *Msg, reason string) {
	h := make(nats.Header, len(m.Header)+7)
	for k, v := range m.Header {
		if len(k) >= 5 && k[:5] == "Nats-" {
			continue
		}
		h[k] = v
	}
	seq := strconv.FormatUint(m.Sequence, 10)
	h.Set(HeaderDeadReason, reason)
	h.Set(HeaderDeadSubject, m.Subject)
	h.Set(HeaderDeadStream, m.Stream)
	h.Set(HeaderDeadSequence, seq)
	h.Set(HeaderDeadDeliveries, strconv.FormatUint(m.Delivery, 10))
	h.Set(HeaderDeadConsumer, r.durable)
	h.Set(HeaderDeadTime, time.Now().UTC().Format(time.RFC3339Nano))
	// The same origin message always has the same dead-letter id, so a
	// repeated dead-lettering (the term was lost) is stored once.
	h.Set(jetstream.MsgIDHeader, "dead-"+m.Stream+"-"+seq)
	dm := &nats.Msg{Subject: r.topo.DeadSubject(m.Subject), Data: m.Data, Header: h}

	pctx, cancel := context.WithTimeout(ctx, DefaultSyncPublishTimeout)
	_, err := r.dead.PublishMsg(pctx, dm, jetstream.WithExpectStream(r.topo.DeadStream))
	cancel()
	if err != nil {
		r.mDeadErrors.Inc()
		r.log.Error().Err(err).Str(logKeySubject, m.Subject).Uint64(logKeySequence, m.Sequence).Msg("deadLetterFailed")
		r.nak(m, backoffDelay(int(m.Delivery), r.opts.retryMin, r.opts.retryMax))
		return
	}
	r.mDead.Inc()
	r.log.Warn().Str(logKeySubject, m.Subject).Uint64(logKeySequence, m.Sequence).
		Uint64(logKeyDelivery, m.Delivery).Str(logKeyReason, reason).Msg("deadLettered")
	if err := m.raw.TermWithReason(reason); err != nil {
		r.mAckErr["term"].Inc()
		r.log.Warn().Err(err).Str(logKeySubject, m.Subject).Msg("termFailed")
	}
}

// watchBacklog reads the consumer's backlog every backlog interval until
// ctx ends: the messages not yet done (waiting or in flight) and the age
// of the oldest of them, the first after the consumer's ack floor that its
// filter selects. Every replica reports the same consumer: take the max
// across replicas. A failed read leaves the gauges as they were (logged
// at debug: the runner goes on).
func (r *Runner) watchBacklog(ctx context.Context, cons jetstream.Consumer) {
	t := time.NewTicker(r.opts.backlog)
	defer t.Stop()
	for {
		if err := r.readBacklog(ctx, cons); err != nil && ctx.Err() == nil {
			r.log.Debug().Err(err).Msg("backlogNotRead")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

func (r *Runner) readBacklog(ctx context.Context, cons jetstream.Consumer) error {
	rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := cons.Info(rctx)
	if err != nil {
		return err
	}
	backlog := info.NumPending + uint64(info.NumAckPending)
	r.mBacklog.Set(float64(backlog))
	if backlog == 0 {
		r.mOldest.Set(0)
		return nil
	}
	st, err := r.c.js.Stream(rctx, r.stream)
	if err != nil {
		return err
	}
	filters := info.Config.FilterSubjects
	if f := info.Config.FilterSubject; f != "" {
		filters = append(filters, f)
	}
	if len(filters) == 0 {
		filters = []string{">"}
	}
	var oldest time.Time
	for _, f := range filters {
		msg, err := st.GetMsg(rctx, info.AckFloor.Stream+1, jetstream.WithGetMsgSubject(f))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if oldest.IsZero() || msg.Time.Before(oldest) {
			oldest = msg.Time
		}
	}
	if oldest.IsZero() {
		r.mOldest.Set(0)
		return nil
	}
	r.mOldest.Set(time.Since(oldest).Seconds())
	return nil
}
