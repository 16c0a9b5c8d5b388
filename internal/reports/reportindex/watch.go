package reportindex

import (
	"errors"
	"fmt"
	"time"
)

// ErrGone is returned for a watch from a sequence older than the changes
// the index still holds: the watcher must list again (the API's 410 Gone,
// "too old resource version").
var ErrGone = errors.New("too old resource version")

// subscriptionBuffer is how many changes a subscriber may fall behind by
// before it is dropped (and must resume from its last sequence).
const subscriptionBuffer = 4096

// Subscription delivers the changes after a sequence, in order. C is
// closed when the subscription ends: Close was called, or the subscriber
// fell more than its buffer behind (Err then says so; resume from the last
// change received).
type Subscription struct {
	C     <-chan Change
	c     chan Change
	x     *Index
	since uint64
	err   error
}

// Err says why C was closed (nil after Close).
func (s *Subscription) Err() error {
	s.x.mu.RLock()
	defer s.x.mu.RUnlock()
	return s.err
}

// Close ends the subscription.
func (s *Subscription) Close() {
	s.x.mu.Lock()
	defer s.x.mu.Unlock()
	s.x.unsubscribe(s, nil)
}

// versionShift leaves room for 255 changes after each stream sequence.
const versionShift = 8

// localWindow is how long local changes (Change.Local) are given again
// to a watch resuming from a later version: longer than a result waits
// for its resource (the feed's grace), so that a change another replica
// made after the watch's version, or not yet, is not missed here.
const localWindow = 2 * time.Minute

// Subscribe delivers every change after version since (0: only changes
// to come), first those the log holds, then new ones. The version may
// come from another replica (versions follow the stream), so local
// changes of the last localWindow come first, whatever their version,
// and changes this replica has yet to reach are skipped up to since. A
// since older than what the log keeps is ErrGone.
func (x *Index) Subscribe(since uint64) (*Subscription, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	var backlog []Change
	if since > 0 {
		cutoff := time.Now().Add(-localWindow)
		for _, l := range x.local {
			if l.at.After(cutoff) && l.Version <= since {
				backlog = append(backlog, l.Change)
			}
		}
	}
	if since > 0 && since < x.version {
		if since < x.trimmed {
			return nil, fmt.Errorf("%w: %d (changes up to %d are no longer kept)", ErrGone, since, x.trimmed)
		}
		for i, c := range x.log {
			if c.Version > since {
				backlog = append(backlog, x.log[i:]...)
				break
			}
		}
	}
	if len(backlog) > subscriptionBuffer {
		return nil, fmt.Errorf("%w: %d changes since %d, more than a watch takes at once", ErrGone, len(backlog), since)
	}
	c := make(chan Change, subscriptionBuffer)
	for _, ch := range backlog {
		c <- ch
	}
	s := &Subscription{C: c, c: c, x: x, since: since}
	x.subs[s] = struct{}{}
	return s, nil
}

// record numbers a change, logs it and hands it to the subscribers.
// Called with mu held.
func (x *Index) record(ch Change) Change {
	ch.Version = max(x.version+1, ch.Seq<<versionShift)
	x.version = ch.Version
	if len(x.log) >= x.logSize {
		// Drop the older half at once: trimming is then rare.
		n := len(x.log) - x.logSize/2
		x.trimmed = x.log[n-1].Version
		x.log = append(x.log[:0], x.log[n:]...)
	}
	x.log = append(x.log, ch)
	if ch.Local {
		now := time.Now()
		i := 0
		for i < len(x.local) && now.Sub(x.local[i].at) > localWindow {
			i++
		}
		x.local = append(x.local[i:], localChange{Change: ch, at: now})
	}
	for s := range x.subs {
		if !ch.Local && ch.Version <= s.since {
			continue // reached already, on the replica the watch came from
		}
		select {
		case s.c <- ch:
		default:
			x.unsubscribe(s, fmt.Errorf("%w: the watcher fell %d changes behind", ErrGone, subscriptionBuffer))
		}
	}
	return ch
}

// localChange is a local change and when it was made.
type localChange struct {
	Change
	at time.Time
}

func (x *Index) unsubscribe(s *Subscription, err error) {
	if _, ok := x.subs[s]; !ok {
		return
	}
	delete(x.subs, s)
	s.err = err
	close(s.c)
}
