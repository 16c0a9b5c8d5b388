package reporter

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/verdict-dev/verdict/internal/events"
	"github.com/verdict-dev/verdict/internal/verify"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// DecodeResult reads one VERDICT_RESULTS message: its subject names the
// resource UID and policy key, its data is a ResultEvent about the same
// pair. Anything else is an error (the message can never be folded).
func DecodeResult(subject string, data []byte) (events.ResultEvent, error) {
	uid, policy, err := queue.ParseResultSubject(subject)
	if err != nil {
		return events.ResultEvent{}, err
	}
	var ev events.ResultEvent
	if err := json.Unmarshal(data, &ev); err != nil {
		return events.ResultEvent{}, fmt.Errorf("decode result on %s: %w", subject, err)
	}
	if ev.Resource.UID != uid || ev.Policy.Key != policy {
		return events.ResultEvent{}, fmt.Errorf("result on %s is about resource %q and policy %q", subject, ev.Resource.UID, ev.Policy.Key)
	}
	return ev, nil
}

// readStats counts what readResults read.
type readStats struct {
	messages    int    // messages read
	undecodable int    // of those, left out
	last        uint64 // the highest stream sequence read
}

// readResults reads every stored result under filters (all the messages
// of their subjects: VERDICT_RESULTS keeps a short history of each, and
// which is newest is for CompareResults to say, not the order of arrival)
// and groups them by resource uid. Messages that cannot be decoded are
// left out (and counted).
func readResults(ctx context.Context, conn *queue.Conn, m *Metrics, filters []string, opts ...queue.ReplayOption) (map[string][]Result, readStats, error) {
	out := map[string][]Result{}
	var st readStats
	opts = append([]queue.ReplayOption{queue.WithReplayAll()}, opts...)
	if len(filters) > 0 {
		opts = append(opts, queue.WithReplayFilter(filters...))
	}
	_, err := conn.Replay(ctx, queue.StreamResults, func(msg queue.ReplayMsg) error {
		st.messages++
		st.last = max(st.last, msg.Sequence)
		ev, err := DecodeResult(msg.Subject, msg.Data)
		if err != nil {
			st.undecodable++
			m.undecodable.Inc()
			return nil
		}
		out[ev.Resource.UID] = append(out[ev.Resource.UID], Result{Sequence: msg.Sequence, Event: ev, Stored: msg.Published})
		return nil
	}, opts...)
	if err != nil {
		return nil, st, fmt.Errorf("read results: %w", err)
	}
	return out, st, nil
}

// checked is one resource's results sorted out by the checker.
type checked struct {
	// verified are the results whose resource exists as they say: the
	// only ones a report is folded from.
	verified []Result
	// wait, when positive, says that some result names an object not
	// found yet (within the checker's grace): a fold of the verified ones
	// is partial until it is decided, in wait at the latest.
	wait time.Duration
	// rejected are the results the checker refused (forged, or of an
	// object that is gone), with why.
	rejected []rejection
}

type rejection struct {
	result Result
	status verify.Status
}

// checkResults checks every result against the API server (the checker
// remembers objects it found, so this costs about one lookup per
// resource, whatever the number of results).
func checkResults(ctx context.Context, check *verify.Checker, results []Result) (checked, error) {
	var out checked
	for _, r := range results {
		st, err := check.Check(ctx, r.Event.Resource, r.Stored)
		if err != nil {
			return checked{}, err
		}
		switch st {
		case verify.Verified:
			out.verified = append(out.verified, r)
		case verify.Pending:
			d := check.RetryIn(r.Stored)
			if out.wait == 0 || d < out.wait {
				out.wait = d
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
	Verified map[string][]Result
	// Pending are the resources with a result still waiting for its
	// object (their folds are partial), and how long until it is decided.
	Pending map[string]time.Duration
}

// Fold folds the verified results of uid; the fold is partial when a result
// of uid is pending.
func (c Current) Fold(uid string) (Report, error) {
	rep, err := Fold(uid, c.Verified[uid])
	if err != nil {
		return Report{}, err
	}
	_, rep.Partial = c.Pending[uid]
	return rep, nil
}

// ReadResults reads the results of the resources uids from VERDICT_RESULTS
// (one Replay with a filter per resource, every message of their subjects)
// and checks them with check. Messages that cannot be decoded are left
// out (and counted), so are rejected results (counted where their own
// message is handled).
func ReadResults(ctx context.Context, conn *queue.Conn, m *Metrics, check *verify.Checker, uids []string) (Current, error) {
	cur := Current{Verified: map[string][]Result{}, Pending: map[string]time.Duration{}}
	if len(uids) == 0 {
		return cur, nil
	}
	filters := make([]string, len(uids))
	for i, uid := range uids {
		filters[i] = queue.ResultsOfResource(uid)
	}
	byUID, _, err := readResults(ctx, conn, m, filters)
	if err != nil {
		return Current{}, err
	}
	for uid, rs := range byUID {
		c, err := checkResults(ctx, check, rs)
		if err != nil {
			return Current{}, fmt.Errorf("check the results of %s: %w", uid, err)
		}
		if c.wait > 0 {
			cur.Pending[uid] = c.wait
		}
		if len(c.verified) > 0 {
			cur.Verified[uid] = c.verified
		}
	}
	return cur, nil
}

// refolder reads one resource's results again and folds them: the Refold
// of a write after a conflict. hint locates the report if no result is
// left.
func refolder(conn *queue.Conn, m *Metrics, check *verify.Checker, uid string, hint events.ResourceRef) Refold {
	return func(ctx context.Context) (Report, error) {
		cur, err := ReadResults(ctx, conn, m, check, []string{uid})
		if err != nil {
			return Report{}, err
		}
		rep, err := cur.Fold(uid)
		if err != nil {
			return Report{}, err
		}
		return withHint(rep, hint), nil
	}
}

// withHint names the resource of a fold without results after hint.
func withHint(rep Report, hint events.ResourceRef) Report {
	if rep.Resource.Name == "" && hint.UID == rep.Resource.UID {
		rep.Resource = hint
		rep.Resource.ResourceVersion = ""
	}
	return rep
}

// since is time.Since for a timestamp that may be unset.
func since(t time.Time) (time.Duration, bool) {
	if t.IsZero() {
		return 0, false
	}
	return time.Since(t), true
}
