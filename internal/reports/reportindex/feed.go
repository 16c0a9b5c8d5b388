package reportindex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// Checker says whether the API server confirms a result's resource
// (DESIGN.md, invariant 9); verify.Checker is one.
type Checker interface {
	Check(ctx context.Context, ref bus.ResourceRef, stored time.Time) (apicheck.Status, error)
	RetryIn(stored time.Time) time.Duration
}

// seer is a Checker that tells when it has seen objects it had not
// (Cluster: its watches delivered an addition or a change): the pending
// results are checked again then, not only after RetryIn.
type seer interface {
	Seen() <-chan struct{}
}

// FeedStats counts what a Feed did with the messages it read.
type FeedStats struct {
	Read        uint64 // messages read
	Applied     uint64 // results folded in (changing a report or not)
	Undecodable uint64 // messages that are no result: left out
	Rejected    uint64 // results the checker rejected: left out
	// Unreadable counts the results of kinds the replica may not watch
	// (verify.ErrForbidden): left out, neither confirmed nor refused.
	Unreadable uint64
	Pending    int // results waiting for their resource to be stored

	// Loaded counts the results taken from a snapshot at the start (and
	// confirmed); SnapshotLoadFailures the snapshots found but not
	// usable (the stream is then read in full).
	Loaded               uint64
	SnapshotLoadFailures uint64
	// SnapshotsWritten and SnapshotWriteFailures count the snapshots
	// this replica stored, or failed to.
	SnapshotsWritten      uint64
	SnapshotWriteFailures uint64
}

// Feed keeps an Index current with VERDICT_RESULTS: it follows the
// stream from its first message, decodes messages on every core while
// applying them in stream order, and applies only results the checker
// confirms (a pending one waits, and is checked again when the checker
// says; a rejected one is counted and left out). Ready is closed once
// every message stored when it started has been read and checked.
type Feed struct {
	x     *Index
	conn  *queue.Conn
	check Checker
	log   zerolog.Logger

	ready chan struct{}
	// gcPercent, when set, is the GC percentage while catching up.
	gcPercent int
	// snapshot is the snapshot's name ("": none read or written);
	// snapshotEvery how often one is written (0: never).
	snapshot      string
	snapshotEvery time.Duration

	mu    sync.Mutex
	stats FeedStats
	// pending are the results of messages whose resource is not stored
	// yet, by stream sequence (a batch's results share theirs).
	pending map[uint64][]model.Result
}

// NewFeed returns a Feed of x from conn's VERDICT_RESULTS, checking
// results with check.
func NewFeed(x *Index, conn *queue.Conn, check Checker, log zerolog.Logger, opts ...FeedOption) *Feed {
	f := &Feed{x: x, conn: conn, check: check, log: log, ready: make(chan struct{}), pending: map[uint64][]model.Result{}}
	for _, o := range opts {
		o(f)
	}
	return f
}

// FeedOption configures a Feed.
type FeedOption func(*Feed)

// WithCatchUpGCPercent sets the garbage collector's percentage (GOGC)
// while the feed catches up, restoring it once ready: folding a large
// stream builds a large heap, and collecting it less often at the start
// makes a replica ready sooner (400: about a quarter sooner, measured),
// within the memory limit the runtime still honours (GOMEMLIMIT). It is
// process-wide: a service sets it, a library should not.
func WithCatchUpGCPercent(p int) FeedOption {
	return func(f *Feed) { f.gcPercent = p }
}

// WithSnapshots makes the feed start from the snapshot name
// (queue.BucketSnapshots) when there is a usable one, following the
// stream from the sequence it resumes from rather than from the first
// message; and, once ready, store one every interval (0: never), unless
// another replica stored one within it. Without a usable snapshot (none
// yet, damaged, of an older incarnation of the stream) the stream is
// read in full, as without this option: a snapshot only ever saves time.
func WithSnapshots(name string, interval time.Duration) FeedOption {
	return func(f *Feed) { f.snapshot, f.snapshotEvery = name, interval }
}

// Ready is closed once the index holds what the stream held when the
// feed started.
func (f *Feed) Ready() <-chan struct{} { return f.ready }

// Stats is what the feed did so far.
func (f *Feed) Stats() FeedStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.stats
	for _, rs := range f.pending {
		s.Pending += len(rs)
	}
	return s
}

// decodeBatch bounds what one round decodes at once.
const decodeBatch = 1024

// decoded is a batch of messages, decoded.
type decoded struct {
	msgs []decodedMsg
}

// decodedMsg is one message, decoded: its results (one, or a batch's;
// one resource at one version unless it is a verified copy), or why it
// is none.
type decodedMsg struct {
	seq     uint64
	copy    bool
	results []model.Result
	err     error
}

// Run follows the stream until ctx ends (it returns ctx's error) or the
// stream cannot be read. Messages are decoded in batches on every core
// while the batch before is checked and applied.
func (f *Feed) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	retry := &wakeup{t: time.NewTimer(time.Hour)}
	retry.t.Stop()
	defer retry.t.Stop()
	if f.gcPercent > 0 {
		prev := debug.SetGCPercent(f.gcPercent)
		var once sync.Once
		restore := func() { once.Do(func() { debug.SetGCPercent(prev) }) }
		defer restore()
		go func() {
			select {
			case <-f.ready:
			case <-ctx.Done():
			}
			restore()
		}()
	}
	after, err := f.loadSnapshot(ctx, retry)
	if err != nil {
		return err
	}
	in := make(chan queue.ReplayMsg, 4*decodeBatch)
	out := make(chan decoded, 2)
	caughtUp := make(chan uint64, 1)
	followErr := make(chan error, 1)
	go func() {
		err := f.conn.Follow(ctx, bus.StreamResults, func(m queue.ReplayMsg) error {
			select {
			case in <- m:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}, queue.WithFollowAfter(after), queue.WithFollowCaughtUp(func(seq uint64) { caughtUp <- seq }))
		followErr <- err
	}()
	go decodeLoop(ctx, in, out)
	if f.snapshot != "" && f.snapshotEvery > 0 {
		go f.writeSnapshots(ctx)
	}
	var target uint64
	targetKnown := false
	var seen <-chan struct{}
	if sc, ok := f.check.(seer); ok {
		seen = sc.Seen()
	}
	for {
		// Ready once the stream is read up to where it stood at the start
		// and nothing read so far is still unchecked.
		if targetKnown && f.x.Seq() >= target && f.Stats().Pending == 0 {
			f.markReady()
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case err := <-followErr:
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("follow VERDICT_RESULTS: %w", err)
		case seq := <-caughtUp:
			target, targetKnown = seq, true
		case <-retry.t.C:
			retry.due = time.Time{}
			f.recheck(ctx, retry)
		case <-seen:
			// An object arrived: its pending results, if any, are
			// checked after a short pause that gathers a burst of
			// arrivals into one pass.
			if f.Stats().Pending > 0 {
				retry.within(seenPause)
			}
		case d := <-out:
			if err := f.apply(ctx, d, retry); err != nil {
				return err
			}
		}
	}
}

// decodeLoop decodes what arrives on in, a batch at a time (all that is
// waiting, up to decodeBatch), on every core.
func decodeLoop(ctx context.Context, in <-chan queue.ReplayMsg, out chan<- decoded) {
	batch := make([]queue.ReplayMsg, 0, decodeBatch)
	for {
		select {
		case <-ctx.Done():
			return
		case m := <-in:
			batch = append(batch[:0], m)
		}
	drain:
		for len(batch) < decodeBatch {
			select {
			case m := <-in:
				batch = append(batch, m)
			default:
				break drain
			}
		}
		d := decoded{msgs: make([]decodedMsg, len(batch))}
		decode := func(lo, hi int) {
			for i := lo; i < hi; i++ {
				m := batch[i]
				evs, err := bus.DecodeResults(m.Subject, m.Data)
				_, copied := bus.ParseVerifiedCopy(m.Subject)
				rs := make([]model.Result, len(evs))
				for j, ev := range evs {
					rs[j] = model.Result{Sequence: m.Sequence, Event: ev, Stored: m.Published, Copy: copied}
				}
				d.msgs[i] = decodedMsg{seq: m.Sequence, copy: copied, results: rs, err: err}
			}
		}
		if workers := min(runtime.GOMAXPROCS(0), len(batch)/64); workers > 1 {
			var wg sync.WaitGroup
			step := (len(batch) + workers - 1) / workers
			for lo := 0; lo < len(batch); lo += step {
				wg.Go(func() { decode(lo, min(lo+step, len(batch))) })
			}
			wg.Wait()
		} else {
			decode(0, len(batch))
		}
		select {
		case out <- d:
		case <-ctx.Done():
			return
		}
	}
}

// RetractReport deletes the resource's report on every replica: it
// publishes a retraction of each result the report holds (evaluated now,
// so newer than they are; a later evaluation brings the report back),
// then waits, within ctx, until this index has applied them. It returns
// false when the resource has no report.
func (f *Feed) RetractReport(ctx context.Context, uid string) (bool, error) {
	rs := f.x.current(uid)
	if len(rs) == 0 {
		return false, nil
	}
	now := time.Now().UTC()
	var last uint64
	for _, r := range rs {
		ev := bus.ResultEvent{
			Resource: r.Event.Resource, Policy: r.Event.Policy, Timestamp: now,
			Retracted: bus.RetractedReportDeleted, RequestUID: "report-deleted-" + strconv.FormatInt(now.UnixNano(), 10),
		}
		if !now.After(r.Event.Timestamp) {
			ev.Timestamp = r.Event.Timestamp.Add(time.Nanosecond)
		}
		m, err := bus.ResultMessage(ev)
		if err != nil {
			return false, err
		}
		ack, err := f.conn.PublishSync(ctx, m)
		if err != nil {
			return false, fmt.Errorf("retract the report of %s: %w", uid, err)
		}
		last = max(last, ack.Sequence)
	}
	for f.x.Seq() < last {
		select {
		case <-ctx.Done():
			return true, fmt.Errorf("the retraction of %s's report is published but not applied yet: %w", uid, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return true, nil
}

func (f *Feed) markReady() {
	select {
	case <-f.ready:
	default:
		close(f.ready)
		st := f.Stats()
		f.log.Info().Uint64(logkey.StreamSeq, f.x.Seq()).Int(logkey.Resources, f.x.Len()).Uint64(logkey.Applied, st.Applied).
			Uint64(logkey.Rejected, st.Rejected).Uint64(logkey.Undecodable, st.Undecodable).Msg("reportIndexReady")
	}
}

// apply checks and applies a decoded batch, in stream order.
func (f *Feed) apply(ctx context.Context, d decoded, retry *wakeup) error {
	for _, m := range d.msgs {
		f.count(func(s *FeedStats) { s.Read++ })
		if m.err != nil {
			f.count(func(s *FeedStats) { s.Undecodable++ })
			f.log.Warn().Err(m.err).Uint64(logkey.StreamSeq, m.seq).Msg("resultNotDecoded")
			f.x.Advance(m.seq)
			continue
		}
		if m.copy {
			// The reporter's verified copies are for the projector's
			// folds and replays; the index keeps every verified result
			// it applied whatever the stream rotates since.
			f.x.Advance(m.seq)
			continue
		}
		if err := f.checkAndApply(ctx, m.results, retry); err != nil {
			return err
		}
	}
	return nil
}

// checkAndApply applies the results of one message (one resource at one
// version) once their resource is confirmed. An API server that cannot
// answer is retried: the index waits rather than serve an unchecked
// result.
func (f *Feed) checkAndApply(ctx context.Context, rs []model.Result, retry *wakeup) error {
	r := rs[0]
	st, err := f.checkRetrying(ctx, r.Event.Resource, r.Stored, r.Sequence)
	if errors.Is(err, apicheck.ErrForbidden) {
		// The replica may not watch the kind: nothing to confirm the
		// result with until the right is granted. Left out, said so.
		f.mu.Lock()
		f.stats.Unreadable += uint64(len(rs))
		f.mu.Unlock()
		f.x.Advance(r.Sequence)
		f.log.Warn().Err(err).Str(logkey.Kind, r.Event.Resource.APIVersion+"/"+r.Event.Resource.Kind).Uint64(logkey.StreamSeq, r.Sequence).Msg("resultKindUnreadable")
		return nil
	}
	if err != nil {
		return err
	}
	f.settle(rs, st, retry)
	return nil
}

// checkRetrying checks a result's resource, asking again while the
// checker cannot answer, until ctx ends.
func (f *Feed) checkRetrying(ctx context.Context, ref bus.ResourceRef, stored time.Time, seq uint64) (apicheck.Status, error) {
	for attempt := 0; ; attempt++ {
		st, err := f.check.Check(ctx, ref, stored)
		if err == nil {
			return st, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if errors.Is(err, apicheck.ErrForbidden) {
			return "", err // asking again will not help
		}
		if attempt%10 == 0 {
			f.log.Warn().Err(err).Uint64(logkey.StreamSeq, seq).Msg("resultNotChecked")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(min(time.Duration(attempt+1)*200*time.Millisecond, 5*time.Second)):
		}
	}
}

// settle acts on the check of one message's results (rs, one resource):
// apply, wait, or leave out.
func (f *Feed) settle(rs []model.Result, st apicheck.Status, retry *wakeup) {
	r := rs[0]
	switch st {
	case apicheck.Verified:
		for _, r := range rs {
			f.x.Apply(r)
		}
		f.mu.Lock()
		delete(f.pending, r.Sequence)
		f.stats.Applied += uint64(len(rs))
		f.mu.Unlock()
		f.hold()
	case apicheck.Pending:
		f.mu.Lock()
		f.pending[r.Sequence] = rs
		f.mu.Unlock()
		f.hold()
		f.x.Advance(r.Sequence)
		retry.within(f.check.RetryIn(r.Stored))
	default:
		f.mu.Lock()
		delete(f.pending, r.Sequence)
		f.stats.Rejected += uint64(len(rs))
		f.mu.Unlock()
		f.hold()
		f.x.Advance(r.Sequence)
		f.log.Info().Str(logkey.Status, string(st)).Str(logkey.ResourceUID, r.Event.Resource.UID).Uint64(logkey.StreamSeq, r.Sequence).Msg("resultRejected")
	}
}

// hold tells the index the oldest pending sequence (Index.Hold).
func (f *Feed) hold() {
	f.mu.Lock()
	var oldest uint64
	for seq := range f.pending {
		if oldest == 0 || seq < oldest {
			oldest = seq
		}
	}
	f.mu.Unlock()
	f.x.Hold(oldest)
}

// recheck checks the pending results again, oldest first.
func (f *Feed) recheck(ctx context.Context, retry *wakeup) {
	f.mu.Lock()
	msgs := make([][]model.Result, 0, len(f.pending))
	for _, rs := range f.pending {
		msgs = append(msgs, rs)
	}
	f.mu.Unlock()
	slices.SortFunc(msgs, func(a, b []model.Result) int { return cmp.Compare(a[0].Sequence, b[0].Sequence) })
	for _, rs := range msgs {
		r := rs[0]
		st, err := f.check.Check(ctx, r.Event.Resource, r.Stored)
		if err != nil {
			if !errors.Is(err, context.Canceled) {
				retry.within(time.Second)
			}
			return
		}
		f.settle(rs, st, retry)
	}
}

func (f *Feed) count(fn func(*FeedStats)) {
	f.mu.Lock()
	defer f.mu.Unlock()
	fn(&f.stats)
}

// wakeup is when the pending results are checked again: the earliest
// time asked for. Asking for a later one changes nothing, so a steady
// arrival of new pending results cannot put off the check of older ones.
type wakeup struct {
	t   *time.Timer
	due time.Time // zero when not set
}

func (w *wakeup) within(d time.Duration) {
	at := time.Now().Add(d)
	if w.due.IsZero() || at.Before(w.due) {
		w.t.Reset(d)
		w.due = at
	}
}

// seenPause is how long pending results wait after their checker has
// seen new objects before they are checked again.
const seenPause = 5 * time.Millisecond
