package reporter

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// Phases of a rebuild, in order.
const (
	PhaseRead  = "read"  // replaying VERDICT_RESULTS
	PhaseWrite = "write" // writing the reports
	PhasePrune = "prune" // deleting reports without results
	PhaseDone  = "done"
)

// RebuildProgress says how far a rebuild is.
type RebuildProgress struct {
	Phase string
	// Done and Total count results while reading, reports while writing,
	// reports examined while pruning.
	Done, Total int
	Elapsed     time.Duration
}

// RebuildStats is what a rebuild did.
type RebuildStats struct {
	Results     int // result messages read (every message of every subject)
	Copies      int // verified copies read besides (bus.VerifiedCopySubject)
	Undecodable int // of those, left out because they could not be decoded
	Unverified  int // of those, left out because the checker rejected them
	// Unreadable are the results left out because the checker may not
	// read their resource's kind (verify.ErrForbidden): undecided, their
	// folds are partial.
	Unreadable int
	Resources  int // resources with results: reports folded
	// Partial are the resources folded without a result that names an
	// object not found yet (within the checker's grace): their reports
	// replace only older ones (the projector completes them).
	Partial  int
	Outcomes map[WriteOutcome]int
	Failed   int // reports that could not be written
	Pruned   int // reports deleted by the prune (also in Outcomes)
	// LastSequence is the highest stream sequence read.
	LastSequence uint64
	ReadTime     time.Duration
	Elapsed      time.Duration
}

// RebuildOption configures Rebuild.
type RebuildOption func(*rebuildOptions) error

type rebuildOptions struct {
	prune    bool
	workers  int
	every    time.Duration
	progress func(RebuildProgress)
	check    *apicheck.Checker
}

// WithRebuildChecker sets the checker every result is verified with before
// it is folded (required), as in live operation.
func WithRebuildChecker(c *apicheck.Checker) RebuildOption {
	return func(o *rebuildOptions) error {
		if c == nil {
			return fmt.Errorf("%w: nil checker", ErrInvalidOption)
		}
		o.check = c
		return nil
	}
}

// WithPrune also deletes Verdict's reports (LabelManagedBy) of resources
// that have no results in the stream.
func WithPrune(on bool) RebuildOption {
	return func(o *rebuildOptions) error { o.prune = on; return nil }
}

// WithRebuildWorkers sets how many reports are written at once (the
// writer's QPS still bounds them). Default 8.
func WithRebuildWorkers(n int) RebuildOption {
	return func(o *rebuildOptions) error {
		if n < 1 {
			return fmt.Errorf("%w: rebuild workers %d", ErrInvalidOption, n)
		}
		o.workers = n
		return nil
	}
}

// WithRebuildProgress calls fn at most once per interval in each phase,
// and at the end of each.
func WithRebuildProgress(interval time.Duration, fn func(RebuildProgress)) RebuildOption {
	return func(o *rebuildOptions) error {
		if interval <= 0 || fn == nil {
			return fmt.Errorf("%w: rebuild progress needs an interval and a function", ErrInvalidOption)
		}
		o.every, o.progress = interval, fn
		return nil
	}
}

// Rebuild makes every report again from the stream (`reporter replay`):
// it replays all of VERDICT_RESULTS (every message of each subject's short
// history), groups the results by resource, checks them as live operation
// does (WithRebuildChecker: rejected results are left out and counted; a
// result still pending makes its resource's fold partial), folds
// each resource (the newest of each policy) and writes its report through
// w, with the same stale guard as live operation, so it can run beside
// live projectors and gives the same reports. With
// WithPrune it then deletes Verdict's reports whose resource has no
// results, unless they were written after the replay read the stream.
//
// It holds the decoded results in memory while it writes (about the size
// of the stream). A report that cannot be written is counted and logged;
// Rebuild goes on and returns an error naming how many failed.
func Rebuild(ctx context.Context, conn *queue.Conn, w *Writer, opts ...RebuildOption) (RebuildStats, error) {
	o := rebuildOptions{workers: 8}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return RebuildStats{}, err
		}
	}
	if conn == nil || w == nil || o.check == nil {
		return RebuildStats{}, fmt.Errorf("%w: a rebuild needs a connection, a writer and a checker (WithRebuildChecker)", ErrInvalidOption)
	}
	start := time.Now()
	st := RebuildStats{Outcomes: map[WriteOutcome]int{}}
	report := func(phase string, done, total int) {
		if o.progress != nil {
			o.progress(RebuildProgress{Phase: phase, Done: done, Total: total, Elapsed: time.Since(start)})
		}
	}

	// Read.
	var ropts []queue.ReplayOption
	if o.progress != nil {
		ropts = append(ropts, queue.WithReplayProgress(o.every, func(p queue.ReplayProgress) {
			report(PhaseRead, int(p.Done), int(p.Done+p.Remaining))
		}))
	}
	byUID, rst, err := readResults(ctx, conn, w.m, nil, nil, ropts...)
	st.Results, st.Copies, st.Undecodable, st.LastSequence = rst.messages-rst.copies, rst.copies, rst.undecodable, rst.last
	if err != nil {
		return st, err
	}
	st.ReadTime = time.Since(start)
	st.Resources = len(byUID)
	log := logFrom(ctx)
	log.Info().Int(logkey.Results, st.Results).Int(logkey.Resources, st.Resources).Dur(logkey.Elapsed, st.ReadTime).Msg("rebuildRead")

	// Write.
	uids := make([]string, 0, len(byUID))
	for uid := range byUID {
		uids = append(uids, uid)
	}
	slices.Sort(uids)
	var mu sync.Mutex
	var firstErr error
	count := func(out WriteOutcome, err error) {
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			st.Failed++
			if firstErr == nil {
				firstErr = err
			}
			return
		}
		st.Outcomes[out]++
	}
	var done atomic.Int64
	stopProgress := ticker(o, func() { report(PhaseWrite, int(done.Load()), len(uids)) })
	err = parallel(ctx, o.workers, uids, func(uid string) {
		defer done.Add(1)
		c, err := CheckResults(ctx, o.check, byUID[uid])
		if err != nil {
			count("", fmt.Errorf("check the results of %s: %w", uid, err))
			return
		}
		mu.Lock()
		st.Unverified += len(c.rejected)
		st.Unreadable += len(c.Unreadable)
		if c.Undecided() {
			st.Partial++
		}
		mu.Unlock()
		for _, r := range c.rejected {
			w.m.unverified.WithLabelValues(string(r.status)).Inc()
		}
		w.m.unreadable.Add(float64(len(c.Unreadable)))
		// Without verified results the fold names only the uid: the
		// writer finds the report wherever it is, not where a rejected
		// result says.
		rep, err := model.Fold(uid, c.Verified)
		if err != nil {
			count("", err)
			return
		}
		rep.Partial = c.Undecided()
		out, err := w.Write(ctx, rep, Refolder(conn, w.m, o.check, uid, rep.Resource))
		if err != nil {
			log.Warn().Err(err).Str(logkey.ResourceUID, uid).Msg("rebuildWriteFailed")
		}
		count(out, err)
	})
	stopProgress()
	report(PhaseWrite, int(done.Load()), len(uids))
	if err != nil {
		return st, err
	}

	// Prune.
	if o.prune {
		if err := prune(ctx, conn, w, byUID, &st, o, count, report); err != nil {
			return st, err
		}
	}
	st.Elapsed = time.Since(start)
	report(PhaseDone, st.Resources, st.Resources)
	log.Info().Int(logkey.Resources, st.Resources).Int(logkey.Failed, st.Failed).Int(logkey.Pruned, st.Pruned).
		Int(logkey.Unverified, st.Unverified).Int(logkey.Unreadable, st.Unreadable).Int(logkey.Partial, st.Partial).Dur(logkey.Elapsed, st.Elapsed).Msg("rebuildDone")
	if st.Failed > 0 {
		return st, fmt.Errorf("%d of %d reports could not be written; the first: %w", st.Failed, st.Resources, firstErr)
	}
	return st, nil
}

// prune deletes Verdict's reports that have no results in byUID and were
// not written after the replay read the stream.
func prune(ctx context.Context, conn *queue.Conn, w *Writer, byUID map[string][]model.Result, st *RebuildStats, o rebuildOptions,
	count func(WriteOutcome, error), report func(string, int, int)) error {
	var orphans []*unstructured.Unstructured
	examined := 0
	selector := labels.SelectorFromSet(labels.Set{model.LabelManagedBy: model.ManagedByValue}).String()
	for _, gvr := range []schema.GroupVersionResource{model.PolicyReports, model.ClusterPolicyReports} {
		cont := ""
		for {
			list, err := w.dyn.Resource(gvr).List(ctx, metav1.ListOptions{LabelSelector: selector, Limit: 500, Continue: cont})
			if err != nil {
				return fmt.Errorf("list %s: %w", gvr.Resource, err)
			}
			for i := range list.Items {
				examined++
				r := &list.Items[i]
				uid, ours := w.UIDOf(r.GetName())
				if !ours {
					continue // another release's naming: not this replay's
				}
				if _, ok := byUID[uid]; ok || LastSequence(r) > st.LastSequence {
					continue
				}
				orphans = append(orphans, r)
			}
			if cont = list.GetContinue(); cont == "" {
				break
			}
		}
	}
	report(PhasePrune, 0, len(orphans))
	var done atomic.Int64
	var pruned atomic.Int64
	stop := ticker(o, func() { report(PhasePrune, int(done.Load()), len(orphans)) })
	err := parallel(ctx, o.workers, orphans, func(r *unstructured.Unstructured) {
		defer done.Add(1)
		uid, _ := w.UIDOf(r.GetName())
		ref := bus.ResourceRef{UID: uid, Namespace: r.GetNamespace()}
		ref.APIVersion, _, _ = unstructured.NestedString(r.Object, "scope", "apiVersion")
		ref.Kind, _, _ = unstructured.NestedString(r.Object, "scope", "kind")
		ref.Name, _, _ = unstructured.NestedString(r.Object, "scope", "name")
		if ref.Name == "" {
			ref.Name = r.GetName()
		}
		out, err := w.Write(ctx, model.Report{Resource: ref}, Refolder(conn, w.m, o.check, ref.UID, ref))
		if out == OutcomeDeleted {
			pruned.Add(1)
		}
		count(out, err)
	})
	stop()
	st.Pruned = int(pruned.Load())
	report(PhasePrune, int(done.Load()), len(orphans))
	logFrom(ctx).Info().Int(logkey.Examined, examined).Int(logkey.Pruned, st.Pruned).Msg("rebuildPruned")
	return err
}

// parallel runs fn on every item with n workers; it stops handing out
// items when ctx ends and then returns ctx's error.
func parallel[T any](ctx context.Context, n int, items []T, fn func(T)) error {
	work := make(chan T)
	var wg sync.WaitGroup
	for range min(n, max(len(items), 1)) {
		wg.Go(func() {
			for it := range work {
				fn(it)
			}
		})
	}
	var err error
feed:
	for _, it := range items {
		select {
		case work <- it:
		case <-ctx.Done():
			err = ctx.Err()
			break feed
		}
	}
	close(work)
	wg.Wait()
	return err
}

// ticker calls fn every o.every until the returned stop is called (no-op
// without a progress function).
func ticker(o rebuildOptions, fn func()) (stop func()) {
	if o.progress == nil {
		return func() {}
	}
	quit := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(o.every)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				fn()
			}
		}
	})
	return func() { once.Do(func() { close(quit) }); wg.Wait() }
}
