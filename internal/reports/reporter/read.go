package reporter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// readStats counts what readResults read.
type readStats struct {
	messages    int    // messages read
	copies      int    // of those, verified copies (bus.VerifiedCopySubject)
	undecodable int    // of those, left out
	last        uint64 // the highest stream sequence read
}

// readResults reads every stored result under filters (all the messages
// of their subjects: VERDICT_RESULTS keeps a short history of each, and
// which is newest is for CompareResults to say, not the order of arrival)
// and groups them by resource uid, the results of a batch each on its
// own. keep, when set, says which results to keep. Messages that cannot
// be decoded are left out (and counted).
func readResults(ctx context.Context, conn *queue.Conn, m *Metrics, filters []string, keep func(bus.ResultEvent) bool, opts ...queue.ReplayOption) (map[string][]model.Result, readStats, error) {
	out := map[string][]model.Result{}
	var st readStats
	opts = append([]queue.ReplayOption{queue.WithReplayAll()}, opts...)
	if len(filters) > 0 {
		opts = append(opts, queue.WithReplayFilter(filters...))
	}
	_, err := conn.Replay(ctx, bus.StreamResults, func(msg queue.ReplayMsg) error {
		st.messages++
		st.last = max(st.last, msg.Sequence)
		evs, err := bus.DecodeResults(msg.Subject, msg.Data)
		if err != nil {
			st.undecodable++
			m.undecodable.Inc()
			return nil
		}
		_, copied := bus.ParseVerifiedCopy(msg.Subject)
		if copied {
			st.copies++
		}
		if keep != nil {
			evs = slices.DeleteFunc(evs, func(ev bus.ResultEvent) bool { return !keep(ev) })
		}
		for _, ev := range evs {
			out[ev.Resource.UID] = append(out[ev.Resource.UID], model.Result{Sequence: msg.Sequence, Event: ev, Stored: msg.Published, Copy: copied})
		}
		return nil
	}, opts...)
	if err != nil {
		return nil, st, fmt.Errorf("read results: %w", err)
	}
	return out, st, nil
}

// ReadStored reads every stored result under the subject filters (all of
// VERDICT_RESULTS when there are none), every message of each subject's
// history, the results of a batch each on its own, and groups them by
// resource uid, unchecked: the caller checks them (CheckResults) and
// picks the newest (Newest). Messages that cannot be decoded are left out
// and counted on m.
func ReadStored(ctx context.Context, conn *queue.Conn, m *Metrics, filters []string) (map[string][]model.Result, error) {
	out, _, err := readResults(ctx, conn, m, filters, nil)
	return out, err
}

// ReadPolicy reads every stored result of one policy (its ResultKey),
// every message of each subject's history, its entries in the result
// batches (admissions') and in the verified copies, and groups them by
// resource uid, unchecked: the caller checks them (CheckResults) and
// picks the newest (Newest). Messages that cannot be decoded are left out
// and counted on m. The background scanner reads a policy's results with
// it.
//
// Batches hold every policy's results, so this reads every batch of the
// stream (each resource's last few admissions and its verified copy) and
// keeps the policy's: its cost grows with the resources, not with the
// policy's own results.
func ReadPolicy(ctx context.Context, conn *queue.Conn, m *Metrics, key string) (map[string][]model.Result, error) {
	filters := []string{bus.ResultsOfPolicy(key), bus.VerifiedOfPolicy(key), bus.ResultBatches, bus.VerifiedBatches}
	out, _, err := readResults(ctx, conn, m, filters, func(ev bus.ResultEvent) bool { return ev.Policy.ResultKey() == key })
	return out, err
}

// Checked is one resource's results sorted out by the checker
// (CheckResults).
type Checked struct {
	// Verified are the results whose resource exists as they say: the
	// only ones a report is folded from.
	Verified []model.Result
	// Wait, when positive, says that some result names an object not
	// found yet (within the checker's grace): a fold of the verified ones
	// is partial until it is decided, in Wait at the latest.
	Wait time.Duration
	// Unreadable are the results whose resource's kind the checker may
	// not read (verify.ErrForbidden): undecided, so a fold of the
	// verified ones is partial too, and nothing is purged for them.
	Unreadable []model.Result
	// rejected are the results the checker refused (forged, or of an
	// object that is gone), with why.
	rejected []rejection
}

type rejection struct {
	result model.Result
	status apicheck.Status
}

// Undecided reports whether some result is neither verified nor rejected
// (pending, or of a kind the checker may not read): a fold of the
// verified ones is partial.
func (c Checked) Undecided() bool { return c.Wait > 0 || len(c.Unreadable) > 0 }

// CheckResults checks every result against the API server (the checker
// remembers objects it found, so this costs about one lookup per
// resource, whatever the number of results). Every reader folds or
// compares only the verified ones: the projector, Rebuild and the
// background scanner. A result of a kind the checker may not read is
// Unreadable, not an error.
func CheckResults(ctx context.Context, check *apicheck.Checker, results []model.Result) (Checked, error) {
	var out Checked
	for _, r := range results {
		st, err := check.Check(ctx, r.Event.Resource, r.Stored)
		if errors.Is(err, apicheck.ErrForbidden) {
			out.Unreadable = append(out.Unreadable, r)
			continue
		}
		if err != nil {
			return Checked{}, err
		}
		switch st {
		case apicheck.Verified:
			out.Verified = append(out.Verified, r)
		case apicheck.Pending:
			d := check.RetryIn(r.Stored)
			if out.Wait == 0 || d < out.Wait {
				out.Wait = d
			}
		default:
			out.rejected = append(out.rejected, rejection{result: r, status: st})
		}
	}
	return out, nil
}

// Current is the checked state of some resources in VERDICT_RESULTS.
type Current struct {
	// Verified are the verified results of each resource (all of their
	// history: Fold keeps the newest of each policy). A resource without
	// verified results has no entry.
	Verified map[string][]model.Result
	// Pending are the resources with a result still waiting for its
	// object, or of a kind the checker may not read (their folds are
	// partial), and how long until it is decided (0: not until the
	// checker may read the kind).
	Pending map[string]time.Duration
}

// Fold folds the verified results of uid; the fold is partial when a result
// of uid is pending.
func (c Current) Fold(uid string) (model.Report, error) {
	rep, err := model.Fold(uid, c.Verified[uid])
	if err != nil {
		return model.Report{}, err
	}
	_, rep.Partial = c.Pending[uid]
	return rep, nil
}

// ReadResults reads the results of the resources uids from VERDICT_RESULTS
// (one Replay with a filter per resource, every message of their subjects)
// and checks them with check. Messages that cannot be decoded are left
// out (and counted), so are rejected results (counted where their own
// message is handled).
func ReadResults(ctx context.Context, conn *queue.Conn, m *Metrics, check *apicheck.Checker, uids []string) (Current, error) {
	cur := Current{Verified: map[string][]model.Result{}, Pending: map[string]time.Duration{}}
	if len(uids) == 0 {
		return cur, nil
	}
	filters := make([]string, 0, 2*len(uids))
	for _, uid := range uids {
		filters = append(filters, bus.ResultsOfResource(uid), bus.VerifiedOfResource(uid))
	}
	byUID, _, err := readResults(ctx, conn, m, filters, nil)
	if err != nil {
		return Current{}, err
	}
	for uid, rs := range byUID {
		c, err := CheckResults(ctx, check, rs)
		if err != nil {
			return Current{}, fmt.Errorf("check the results of %s: %w", uid, err)
		}
		if c.Undecided() {
			cur.Pending[uid] = c.Wait
		}
		if len(c.Verified) > 0 {
			cur.Verified[uid] = c.Verified
		}
	}
	return cur, nil
}

// Refolder reads one resource's results again (ReadResults) and folds
// them: the Refold of a write after a conflict. hint locates the report if
// no result is left (Report.WithHint).
func Refolder(conn *queue.Conn, m *Metrics, check *apicheck.Checker, uid string, hint bus.ResourceRef) Refold {
	return func(ctx context.Context) (model.Report, error) {
		cur, err := ReadResults(ctx, conn, m, check, []string{uid})
		if err != nil {
			return model.Report{}, err
		}
		rep, err := cur.Fold(uid)
		if err != nil {
			return model.Report{}, err
		}
		return rep.WithHint(hint), nil
	}
}

// since is time.Since for a timestamp that may be unset.
func since(t time.Time) (time.Duration, bool) {
	if t.IsZero() {
		return 0, false
	}
	return time.Since(t), true
}
