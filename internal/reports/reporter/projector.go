package reporter

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// ProjectorOption configures NewProjector.
type ProjectorOption func(*projectorOptions) error

type projectorOptions struct {
	durable      string
	window       time.Duration
	concurrency  int
	flushWorkers int
	readBatch    int
	maxDeliver   int
	retryMin     time.Duration
	retryMax     time.Duration
	progress     time.Duration
	drainTimeout time.Duration
	log          *zerolog.Logger
	check        *apicheck.Checker
	pendingMax   int
	pendingBytes int64
	rechecks     int
}

// WithChecker sets the checker every result is verified with before it
// changes a report (required): its resource must exist with its uid, at
// its resourceVersion or later (DESIGN.md, invariant 9).
func WithChecker(c *apicheck.Checker) ProjectorOption {
	return func(o *projectorOptions) error {
		if c == nil {
			return fmt.Errorf("%w: nil checker", ErrInvalidOption)
		}
		o.check = c
		return nil
	}
}

// WithWindow sets the coalescing window: how long the first message that
// makes a resource dirty waits for others before the flush. Default 250ms.
// A flush starts earlier when every handler is waiting (no more messages
// can arrive).
func WithWindow(d time.Duration) ProjectorOption {
	return func(o *projectorOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: coalescing window %s", ErrInvalidOption, d)
		}
		o.window = d
		return nil
	}
}

// WithConcurrency sets how many messages one projector holds unacknowledged
// at once (each waits for its resource's write). Keep the sum over the
// replicas under the consumer's MaxAckPending (1000) and its pull-request
// limit (512). Default 64.
func WithConcurrency(n int) ProjectorOption {
	return func(o *projectorOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: concurrency %d", ErrInvalidOption, n)
		}
		o.concurrency = n
		return nil
	}
}

// WithFlushWorkers sets how many reports a flush writes at once. Default 8.
func WithFlushWorkers(n int) ProjectorOption {
	return func(o *projectorOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: flush workers %d", ErrInvalidOption, n)
		}
		o.flushWorkers = n
		return nil
	}
}

// WithReadBatch sets how many resources one Replay of a flush reads (one
// filter each). Default 64.
func WithReadBatch(n int) ProjectorOption {
	return func(o *projectorOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: read batch %d", ErrInvalidOption, n)
		}
		o.readBatch = n
		return nil
	}
}

// WithDurable names the durable consumer. Default bus.ConsumerReporter.
func WithDurable(name string) ProjectorOption {
	return func(o *projectorOptions) error {
		if name == "" {
			return fmt.Errorf("%w: empty durable name", ErrInvalidOption)
		}
		o.durable = name
		return nil
	}
}

// WithAttempts bounds the deliveries of a message whose report cannot be
// written (the API server is down, say) before it is dead-lettered, with
// the runner's backoff from minDelay to maxDelay between them. Default 10,
// 1s to 2m: about ten minutes of outage.
func WithAttempts(n int, minDelay, maxDelay time.Duration) ProjectorOption {
	return func(o *projectorOptions) error {
		if n < 1 || minDelay <= 0 || maxDelay < minDelay {
			return fmt.Errorf("%w: attempts %d, %s..%s", ErrInvalidOption, n, minDelay, maxDelay)
		}
		o.maxDeliver, o.retryMin, o.retryMax = n, minDelay, maxDelay
		return nil
	}
}

// WithProgressEvery sets how often a message waiting for its write tells
// the server it is still in progress. Default 5s (AckWait is 30s).
func WithProgressEvery(d time.Duration) ProjectorOption {
	return func(o *projectorOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: progress interval %s", ErrInvalidOption, d)
		}
		o.progress = d
		return nil
	}
}

// WithPendingLimit bounds the results one projector holds pending (their
// resource not found yet, within the checker's grace period): at most n
// messages of at most size bytes in all. They wait out of the worker
// slots, unacknowledged, but count against the consumer's MaxAckPending
// (1000), which the verified results need: keep replicas x (n + 2 x
// concurrency) under it. A pending result beyond the limit is
// acknowledged, left in the stream and remembered for a recheck
// (WithPendingRechecks). Default 256 and 4 MiB.
func WithPendingLimit(n int, size int64) ProjectorOption {
	return func(o *projectorOptions) error {
		if n < 0 || size < 0 {
			return fmt.Errorf("%w: pending limit %d, %d bytes", ErrInvalidOption, n, size)
		}
		o.pendingMax, o.pendingBytes = n, size
		return nil
	}
}

// WithPendingRechecks bounds the pending results beyond WithPendingLimit
// that one projector remembers, by stream sequence, for a recheck: their
// messages are acknowledged (they stay in the stream, and cost the
// consumer nothing), each is read and checked again about a second later
// (a CREATE's object is stored a moment after the webhook answered),
// and, if its object is still missing, once more when the grace period
// is over. Verified, its resource's report is written from the stream;
// rejected, it is deleted from the stream and counted, as a held one.
// When the list is full a result is forgotten (counted in
// verdict_reporter_results_pending_dropped_total{reason="full"}, left in
// the stream, where the next fold of its resource picks it up): first
// one that already missed its first recheck. About 40 bytes each; 0
// remembers none (a result beyond the pending limit is given up at
// once). Default 16384.
func WithPendingRechecks(n int) ProjectorOption {
	return func(o *projectorOptions) error {
		if n < 0 {
			return fmt.Errorf("%w: pending rechecks %d", ErrInvalidOption, n)
		}
		o.rechecks = n
		return nil
	}
}

// WithShutdownTimeout bounds how long Run waits at shutdown for the
// messages in flight to be written. Default 30s.
func WithShutdownTimeout(d time.Duration) ProjectorOption {
	return func(o *projectorOptions) error {
		if d <= 0 {
			return fmt.Errorf("%w: shutdown timeout %s", ErrInvalidOption, d)
		}
		o.drainTimeout = d
		return nil
	}
}

// WithLogger sets the logger (default: the one in Run's context).
func WithLogger(l zerolog.Logger) ProjectorOption {
	return func(o *projectorOptions) error { o.log = &l; return nil }
}

// Projector keeps the reports current from the durable consumer on
// VERDICT_RESULTS. Any number of projectors, in one process or many, share
// the consumer; none leads.
//
// Each message marks its resource dirty and waits. A flush starts after
// the coalescing window (or at once when every handler waits); for each
// dirty resource it reads the resource's current results (a Replay of
// ResultsOfResource, the last message per subject: that is the state),
// folds them and writes the report through the Writer. Only then are the
// resource's messages acknowledged, so a crash before the write makes
// JetStream deliver them again (at least once). A message arriving while
// its resource is being flushed joins that flush if the read has not
// started yet (the read will see it), otherwise the next one. While a
// message waits, the server is told every few seconds that it is in
// progress.
//
// Before a message marks its resource dirty, the result is checked
// against the API server (WithChecker): a result whose object is not found
// yet (a CREATE is evaluated before the object is stored) is held pending,
// out of the worker slots and bounded (WithPendingLimit), and checked again
// with delay until the checker's grace ends (beyond the bound, its message
// is acknowledged and the result remembered for a recheck:
// WithPendingRechecks); one the checker rejects (the
// object never existed or is gone, the name is another uid's, a version
// from the future) is deleted from the stream, counted in
// verdict_reporter_results_unverified_total by reason, and acknowledged
// without changing any report. A flush folds only verified results; while
// another result of the resource is pending the fold is partial (it
// replaces only an older report and deletes none), and the pending
// result's own message writes the complete fold once it is verified.
//
// A message that cannot be decoded is poison: dead-lettered with the
// reason. A report the API server refuses as invalid makes its messages
// poison too; other failures (the API server down, conflicts that do not
// settle) are retried with backoff and dead-lettered after the attempts.
type Projector struct {
	conn *queue.Conn
	w    *Writer
	m    *Metrics
	o    projectorOptions
	log  zerolog.Logger

	mu           sync.Mutex
	pending      map[string]*entry // the next flush
	pendingSince time.Time
	inflight     map[string]*entry // the flush under way
	blocked      int               // handlers waiting for a write
	kick         chan struct{}

	// copies publishes the verified copies of results (keepVerified).
	copies *queue.AsyncPublisher
	// held are the results waiting for their resource (hold).
	held *pendingSet
	// recheckKick wakes the recheck loop when a result is remembered.
	recheckKick chan struct{}
}

// entry is one dirty resource of a flush.
type entry struct {
	uid    string
	hint   bus.ResourceRef // the resource as the last message named it
	sealed bool            // its read started: later messages need the next flush
	done   chan struct{}
	err    error // set before done is closed
}

// NewProjector returns a projector over conn writing through w.
func NewProjector(conn *queue.Conn, w *Writer, opts ...ProjectorOption) (*Projector, error) {
	if conn == nil || w == nil {
		return nil, fmt.Errorf("%w: a projector needs a connection and a writer", ErrInvalidOption)
	}
	o := projectorOptions{
		durable: bus.ConsumerReporter, window: 250 * time.Millisecond, concurrency: 64, flushWorkers: 8,
		readBatch: 64, maxDeliver: 10, retryMin: time.Second, retryMax: 2 * time.Minute,
		progress: 5 * time.Second, drainTimeout: 30 * time.Second, pendingMax: 256, pendingBytes: 4 << 20,
		rechecks: 16384,
	}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	if o.check == nil {
		return nil, fmt.Errorf("%w: a projector needs a checker (WithChecker)", ErrInvalidOption)
	}
	return &Projector{
		conn: conn, w: w, m: w.Metrics(), o: o,
		held:        newPendingSet(o.pendingMax, o.pendingBytes, o.rechecks, pendingLinger),
		pending:     map[string]*entry{},
		kick:        make(chan struct{}, 1),
		recheckKick: make(chan struct{}, 1),
	}, nil
}

// Run consumes until ctx ends, then drains: no new messages, the ones
// waiting are written (up to the shutdown timeout) and acknowledged, or
// given back.
func (p *Projector) Run(ctx context.Context) error {
	p.log = *zerolog.Ctx(ctx)
	if p.o.log != nil {
		p.log = *p.o.log
	}
	p.log = p.log.With().Str(logkey.Component, "reporter").Logger()
	r, err := p.conn.NewRunner(bus.StreamResults, p.o.durable, p.handle,
		queue.WithConcurrency(p.o.concurrency),
		// One message per handler buffered: a buffered message's AckWait
		// runs while its handler waits for a flush.
		queue.WithPrefetch(p.o.concurrency),
		queue.WithMaxDeliver(p.o.maxDeliver),
		queue.WithRetryDelays(p.o.retryMin, p.o.retryMax),
		queue.WithDrainTimeout(p.o.drainTimeout),
	)
	if err != nil {
		return err
	}
	if p.copies, err = p.conn.NewAsyncPublisher(queue.WithPublisherName("reporter-verified")); err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		if err := p.copies.Close(cctx); err != nil {
			p.log.Warn().Err(err).Msg("verifiedCopiesNotPublished")
		}
	}()
	// The flusher outlives ctx: the runner's drain waits for the messages
	// in flight, which wait for their flush.
	flushCtx, cancel := context.WithCancel(p.log.WithContext(context.WithoutCancel(ctx)))
	stop := make(chan struct{})
	flusherDone := make(chan struct{})
	go func() {
		defer close(flusherDone)
		p.flushLoop(flushCtx, stop)
	}()
	// The rechecks end with ctx, before the flusher: they wait for
	// their flushes.
	rechecksDone := make(chan struct{})
	go func() {
		defer close(rechecksDone)
		p.recheckLoop(ctx)
	}()
	err = r.Run(ctx)
	<-rechecksDone
	p.abandonRechecks()
	close(stop)
	cancel()
	<-flusherDone
	return err
}

// handle is the runner's handler: one message.
func (p *Projector) handle(ctx context.Context, msg *queue.Msg) queue.Outcome {
	p.m.consumed.Inc()
	if _, ok := bus.ParseVerifiedCopy(msg.Subject); ok {
		return queue.Done() // a projector's own copy: its original was folded
	}
	evs, err := bus.DecodeResults(msg.Subject, msg.Data)
	if err != nil {
		p.m.undecodable.Inc()
		return queue.Poison(err.Error())
	}
	// One resource at one version: a single result, or an admission's
	// batch (DecodeResults checks).
	ev := evs[0]
	st, err := p.o.check.Check(ctx, ev.Resource, msg.Published)
	switch {
	case errors.Is(err, apicheck.ErrForbidden):
		p.release(msg.Sequence)
		p.unreadable(msg.Subject, msg.Sequence, ev, err)
		return queue.Done()
	case err != nil:
		p.release(msg.Sequence)
		return queue.Retry().Because(err)
	case st == apicheck.Pending && msg.Delivery+1 < uint64(p.o.maxDeliver):
		return p.hold(msg)
	case st == apicheck.Pending:
		// Out of attempts before the grace ended: as good as not found.
		st = apicheck.NotFound
	}
	p.release(msg.Sequence)
	if st.Rejected() {
		return p.reject(ctx, msg, ev, st)
	}
	e := p.mark(ev.Resource, true)
	defer p.unblock()
	tick := time.NewTicker(p.o.progress)
	defer tick.Stop()
wait:
	for {
		select {
		case <-e.done:
			break wait
		case <-tick.C:
			if err := msg.InProgress(); err != nil {
				p.log.Debug().Err(err).Str(logkey.Subject, msg.Subject).Msg("inProgressFailed")
			}
		case <-ctx.Done():
			return queue.Retry().Because(ctx.Err())
		}
	}
	switch {
	case e.err == nil:
		if d, ok := since(ev.Timestamp); ok {
			p.m.lag.Observe(d.Seconds())
		}
		return queue.Done()
	case errors.Is(e.err, ErrRejected):
		return queue.Poison(e.err.Error())
	default:
		return queue.Retry().Because(e.err)
	}
}

// pendingLinger is how long past its delay a held result may stay in the
// pending set without coming back (AckWait, 30s, and some): by then it
// went to another replica.
const pendingLinger = 45 * time.Second

// hold keeps a result whose resource is not found yet pending: its
// message leaves the worker slot at once, unacknowledged, and comes back
// (to any replica) when it is to be checked again (Checker.RetryIn).
// When the held results are at their bound, the message is acknowledged
// instead and the result remembered for a recheck (recheckLoop): pending
// results never hold verified ones back (issue 28, finding 9), and a real
// CREATE's result that comes while forged ones fill the bound still
// reaches its report.
func (p *Projector) hold(msg *queue.Msg) queue.Outcome {
	delay := p.o.check.RetryIn(msg.Published)
	now := time.Now()
	if p.held.hold(msg.Sequence, int64(len(msg.Subject)+len(msg.Data)), delay, now) {
		p.gaugePending()
		return queue.RetryAfter(delay)
	}
	kept, dropped := p.held.remember(recheck{seq: msg.Sequence, due: now.Add(min(delay, time.Second))})
	p.droppedPending(PendingFull, dropped...)
	if !kept {
		p.droppedPending(PendingFull, msg.Sequence)
	} else {
		p.wakeRechecks()
	}
	p.gaugePending()
	return queue.Done()
}

// droppedPending counts pending results given up for reason.
func (p *Projector) droppedPending(reason string, seqs ...uint64) {
	if len(seqs) == 0 {
		return
	}
	p.m.pendingDropped.WithLabelValues(reason).Add(float64(len(seqs)))
	for _, seq := range seqs {
		p.log.Debug().Uint64(logkey.StreamSeq, seq).Str(logkey.Reason, reason).Msg("resultPendingDropped")
	}
}

func (p *Projector) wakeRechecks() {
	select {
	case p.recheckKick <- struct{}{}:
	default:
	}
}

// release forgets a held result that was decided.
func (p *Projector) release(seq uint64) {
	p.held.release(seq)
	p.gaugePending()
}

func (p *Projector) gaugePending() {
	n, b, r := p.held.size()
	p.m.pending.Set(float64(n))
	p.m.pendingBytes.Set(float64(b))
	p.m.pendingRechecks.Set(float64(r))
	_, absent := p.o.check.Stats()
	p.m.absent.Set(float64(absent))
}

// unreadable counts a result whose resource's kind the reporter may not
// read (verify.ErrForbidden): it is neither confirmed nor refused, so it
// is left in the stream and out of every report, and said so. Retrying
// would not help until the right is granted (then a replay, or the
// resource's next result, folds it).
func (p *Projector) unreadable(subject string, seq uint64, ev bus.ResultEvent, err error) {
	p.m.unreadable.Inc()
	p.log.Warn().Err(err).Str(logkey.Subject, subject).Uint64(logkey.StreamSeq, seq).
		Str(logkey.Kind, ev.Resource.APIVersion+"/"+ev.Resource.Kind).Str(logkey.Namespace, ev.Resource.Namespace).
		Str(logkey.Name, ev.Resource.Name).Msg("resultKindUnreadable")
}

// reject drops a message the checker refused (dropRejected).
func (p *Projector) reject(ctx context.Context, msg *queue.Msg, ev bus.ResultEvent, st apicheck.Status) queue.Outcome {
	if err := p.dropRejected(ctx, msg.Subject, msg.Sequence, ev, st); err != nil {
		return queue.Retry().Because(err)
	}
	return queue.Done()
}

// dropRejected deletes a result the checker refused from the stream (so
// that no replay or later fold meets it again) and counts it; it changes
// no report.
func (p *Projector) dropRejected(ctx context.Context, subject string, seq uint64, ev bus.ResultEvent, st apicheck.Status) error {
	if err := p.conn.DeleteMsg(ctx, bus.StreamResults, seq); err != nil {
		return err
	}
	p.m.unverified.WithLabelValues(string(st)).Inc()
	p.log.Warn().Str(logkey.Subject, subject).Uint64(logkey.StreamSeq, seq).Str(logkey.Reason, string(st)).
		Str(logkey.Kind, ev.Resource.Kind).Str(logkey.Namespace, ev.Resource.Namespace).Str(logkey.Name, ev.Resource.Name).
		Str(logkey.ResourceUID, ev.Resource.UID).Msg("resultUnverified")
	return nil
}

// mark makes the resource of ref dirty and returns the entry to wait for.
// A handler marks blocking (it holds a worker slot until the flush: undo
// with unblock); a recheck does not.
func (p *Projector) mark(ref bus.ResourceRef, blocking bool) *entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	if blocking {
		p.blocked++
	}
	if e := p.inflight[ref.UID]; e != nil && !e.sealed {
		e.hint = ref
		return e
	}
	e := p.pending[ref.UID]
	if e == nil {
		e = &entry{uid: ref.UID, done: make(chan struct{})}
		if len(p.pending) == 0 {
			p.pendingSince = time.Now()
			p.poke()
		}
		p.pending[ref.UID] = e
	}
	e.hint = ref
	if p.blocked >= p.o.concurrency {
		p.poke() // every handler waits: nothing more can come
	}
	return e
}

func (p *Projector) unblock() {
	p.mu.Lock()
	p.blocked--
	p.mu.Unlock()
}

// poke wakes the flusher; p.mu is held.
func (p *Projector) poke() {
	select {
	case p.kick <- struct{}{}:
	default:
	}
}

// flushLoop flushes the dirty resources, one flush at a time, until stop.
func (p *Projector) flushLoop(ctx context.Context, stop <-chan struct{}) {
	for {
		p.mu.Lock()
		n, since, full := len(p.pending), p.pendingSince, p.blocked >= p.o.concurrency
		p.mu.Unlock()
		if n == 0 {
			select {
			case <-p.kick:
				continue
			case <-stop:
				return
			}
		}
		if wait := time.Until(since.Add(p.o.window)); !full && wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-p.kick:
				t.Stop()
				continue
			case <-stop:
				t.Stop()
				return
			}
		}
		p.mu.Lock()
		batch := p.pending
		p.pending = map[string]*entry{}
		p.inflight = batch
		p.mu.Unlock()
		p.flush(ctx, batch)
		p.mu.Lock()
		p.inflight = nil
		p.mu.Unlock()
	}
}

// flush reads, folds and writes every resource of batch, then releases
// their messages.
func (p *Projector) flush(ctx context.Context, batch map[string]*entry) {
	uids := make([]string, 0, len(batch))
	for uid := range batch {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	p.m.flushSize.Observe(float64(len(uids)))
	for chunk := range slices.Chunk(uids, p.o.readBatch) {
		p.mu.Lock()
		for _, uid := range chunk {
			batch[uid].sealed = true
		}
		p.mu.Unlock()
		cur, err := ReadResults(ctx, p.conn, p.m, p.o.check, chunk)
		if err != nil {
			p.log.Warn().Err(err).Int(logkey.Resources, len(chunk)).Msg("readResultsFailed")
			for _, uid := range chunk {
				p.finish(batch[uid], err)
			}
			continue
		}
		work := make(chan *entry)
		var wg sync.WaitGroup
		for range min(p.o.flushWorkers, len(chunk)) {
			wg.Go(func() {
				for e := range work {
					p.finish(e, p.write(ctx, e, cur))
				}
			})
		}
		for _, uid := range chunk {
			work <- batch[uid]
		}
		close(work)
		wg.Wait()
	}
}

// write folds one resource's results and writes its report.
func (p *Projector) write(ctx context.Context, e *entry, cur Current) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic writing report %s: %v", e.uid, r)
			p.log.Error().Str(logkey.ResourceUID, e.uid).Str(logkey.Reason, err.Error()).Msg("writePanic")
		}
	}()
	p.mu.Lock()
	hint := e.hint
	p.mu.Unlock()
	rep, err := cur.Fold(e.uid)
	if err != nil {
		return err
	}
	rep = rep.WithHint(hint)
	out, err := p.w.Write(ctx, rep, Refolder(p.conn, p.m, p.o.check, e.uid, hint))
	if err != nil {
		p.log.Warn().Err(err).Str(logkey.ResourceUID, e.uid).Str(logkey.Namespace, rep.Resource.Namespace).Msg("reportWriteFailed")
		return err
	}
	p.log.Debug().Str(logkey.ResourceUID, e.uid).Str(logkey.Outcome, string(out)).Uint64(logkey.StreamSeq, rep.LastSequence).Msg("reportWritten")
	p.keepVerified(cur.Verified[e.uid])
	return nil
}

// keepVerified keeps a verified copy of the resource's fold: when the
// newest verified result of some policy has no copy yet, it publishes one
// batch (bus.VerifiedBatchMessage, on the resource's
// verdict.verified.<uid>.@batch) holding the newest verified result of
// every policy of the resource. Admissions publish only on result
// subjects, whose short history (MaxMsgsPerSubject) later admissions
// rotate (a policy that a later admission did not evaluate keeps its
// result only in an older batch) and a flood of forged reviews naming the
// object could rotate too; without the copy a verified result could be
// pushed out of the stream, and the next fold, or a replay, would lose it
// (issue 28, finding 8). The copies keep their own history, which only
// projectors write, and the newest holds every policy. One copy per fold
// that changed something, whatever the number of policies. A copy lost
// (the publisher's buffer full, the stream full) is counted, and made
// again at the resource's next flush.
func (p *Projector) keepVerified(results []model.Result) {
	if p.copies == nil || len(results) == 0 {
		return
	}
	newest := map[string]model.Result{}
	copied := map[string][]model.Result{}
	for _, r := range results {
		k := r.Event.Policy.ResultKey()
		if r.Copy {
			copied[k] = append(copied[k], r)
		}
		if cur, ok := newest[k]; !ok || model.CompareResults(r, cur) > 0 {
			newest[k] = r
		}
	}
	missing := false
	for k, r := range newest {
		if !r.Copy && !slices.ContainsFunc(copied[k], func(c model.Result) bool { return bus.CompareResults(c.Event, r.Event) == 0 }) {
			missing = true
			break
		}
	}
	if !missing {
		return
	}
	keys := slices.Sorted(maps.Keys(newest))
	evs := make([]bus.ResultEvent, len(keys))
	parts := make([]string, 0, 1+6*len(keys))
	parts = append(parts, "verified")
	for i, k := range keys {
		ev := newest[k].Event
		evs[i] = ev
		parts = append(parts, k, ev.Policy.UID, ev.Policy.ResourceVersion, ev.Resource.ResourceVersion, ev.Timestamp.UTC().Format(time.RFC3339Nano), ev.Retracted)
	}
	uid := evs[0].Resource.UID
	m, err := bus.VerifiedBatchMessage(evs, queue.MsgID(parts...))
	if err == nil {
		err = p.copies.Publish(m)
	}
	if err != nil {
		p.m.copyFailures.Inc()
		p.log.Warn().Err(err).Str(logkey.ResourceUID, uid).Int(logkey.Results, len(evs)).Msg("verifiedCopyFailed")
		return
	}
	p.m.copies.Add(float64(len(evs)))
}

func (p *Projector) finish(e *entry, err error) {
	e.err = err
	close(e.done)
}
