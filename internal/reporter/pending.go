package reporter

import (
	"sync"
	"time"
)

// pendingSet is what one projector holds pending: results whose resource
// is not found yet (a CREATE is evaluated before its object is stored),
// by stream sequence. Their messages are not in the worker slots: each is
// given back with a delay (nak) and comes back when it is to be checked
// again, so it stays unacknowledged (another replica gets it if this one
// dies) but costs no handler while it waits. It does count against the
// consumer's MaxAckPending, shared with the verified results, so the set
// is bounded in count and bytes: beyond that a pending result is given up
// (acknowledged, left in the stream, counted with its reason), and a
// flood of forged results naming uids that do not exist can hold at most
// this much of the consumer while every verified result goes on (issue
// 28, finding 9).
type pendingSet struct {
	maxCount int
	maxBytes int64
	linger   time.Duration // how long past its delay an entry may stay without coming back

	mu    sync.Mutex
	held  map[uint64]pendingEntry
	bytes int64
}

type pendingEntry struct {
	size  int64
	until time.Time // when it should have come back (to this replica or another)
}

func newPendingSet(maxCount int, maxBytes int64, linger time.Duration) *pendingSet {
	return &pendingSet{maxCount: maxCount, maxBytes: maxBytes, linger: linger, held: map[uint64]pendingEntry{}}
}

// hold keeps the message of seq pending for delay; false when the set is
// full. A message held already (delivered again) keeps its place.
func (s *pendingSet) hold(seq uint64, size int64, delay time.Duration, now time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	until := now.Add(delay + s.linger)
	if e, ok := s.held[seq]; ok {
		e.until = until
		s.held[seq] = e
		return true
	}
	if len(s.held) >= s.maxCount || s.bytes+size > s.maxBytes {
		s.expire(now)
	}
	if len(s.held) >= s.maxCount || s.bytes+size > s.maxBytes {
		return false
	}
	s.held[seq] = pendingEntry{size: size, until: until}
	s.bytes += size
	return true
}

// release forgets seq: its message was decided (verified or rejected).
func (s *pendingSet) release(seq uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if e, ok := s.held[seq]; ok {
		delete(s.held, seq)
		s.bytes -= e.size
	}
}

// expire forgets the entries that should have come back long ago: they
// went to another replica (or the nak was lost and AckWait gave them to
// one); s.mu is held.
func (s *pendingSet) expire(now time.Time) {
	for seq, e := range s.held {
		if now.After(e.until) {
			delete(s.held, seq)
			s.bytes -= e.size
		}
	}
}

// size is what the set holds.
func (s *pendingSet) size() (count int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held), s.bytes
}
