package reporter

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/verdict-dev/verdict/internal/events"
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

// ReadResults reads the current results of the resources uids from
// VERDICT_RESULTS: one Replay filtered to ResultsOfResource of each, the
// last message per subject. Messages that cannot be decoded are left out
// (and counted). A resource without results has no entry.
func ReadResults(ctx context.Context, conn *queue.Conn, m *Metrics, uids []string) (map[string][]Result, error) {
	if len(uids) == 0 {
		return map[string][]Result{}, nil
	}
	filters := make([]string, len(uids))
	for i, uid := range uids {
		filters[i] = queue.ResultsOfResource(uid)
	}
	out := make(map[string][]Result, len(uids))
	_, err := conn.Replay(ctx, queue.StreamResults, func(msg queue.ReplayMsg) error {
		ev, err := DecodeResult(msg.Subject, msg.Data)
		if err != nil {
			m.undecodable.Inc()
			return nil
		}
		out[ev.Resource.UID] = append(out[ev.Resource.UID], Result{Sequence: msg.Sequence, Event: ev})
		return nil
	}, queue.WithReplayFilter(filters...))
	if err != nil {
		return nil, fmt.Errorf("read results: %w", err)
	}
	return out, nil
}

// refolder reads one resource's results again and folds them: the Refold
// of a write after a conflict. hint locates the report if no result is
// left.
func refolder(conn *queue.Conn, m *Metrics, uid string, hint events.ResourceRef) Refold {
	return func(ctx context.Context) (Report, error) {
		res, err := ReadResults(ctx, conn, m, []string{uid})
		if err != nil {
			return Report{}, err
		}
		rep, err := Fold(uid, res[uid])
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
