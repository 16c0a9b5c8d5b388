package reporter

import (
	"sync"
	"time"
)

// pendingSet is what one projector holds pending: results whose resource
// is not found yet (a CREATE is evaluated before its object is stored),
// by stream sequence, in two tiers.
//
// Held results keep their message: it is not in the worker slots but
// given back with a delay (nak) and comes back when it is to be checked
// again, so it stays unacknowledged (another replica gets it if this one
// dies) but costs no handler while it waits. It does count against the
// consumer's MaxAckPending, shared with the verified results, so the
// held tier is bounded in count and bytes (WithPendingLimit): a flood of
// forged results naming uids that do not exist can hold at most this
// much of the consumer while every verified result goes on (issue 28,
// finding 9).
//
// A result beyond that bound is not given up: its message is
// acknowledged (it stays in the stream) and its sequence is remembered
// for a recheck (WithPendingRechecks), which costs the consumer nothing
// and this replica a few bytes. Forged and real results look alike until
// the real object is stored, a moment after the webhook answered, so
// each remembered result gets a first recheck about a second later, in
// the order they came (fresh), and, if its object is still missing, a
// last one when the grace period is over (final), which rejects it. The
// list is bounded: when it is full the result waiting longest for its
// final recheck (one already missed its moment) is forgotten first, a
// fresh one only when no other is left; forgotten results are counted.
type pendingSet struct {
	maxCount int
	maxBytes int64
	linger   time.Duration // how long past its delay an entry may stay without coming back

	mu    sync.Mutex
	held  map[uint64]pendingEntry
	bytes int64

	maxRechecks int
	fresh       []recheck   // first rechecks, in the order they were remembered
	head        int         // fresh[head:] are waiting
	final       recheckHeap // later rechecks, by due time
}

type pendingEntry struct {
	size  int64
	until time.Time // when it should have come back (to this replica or another)
}

// recheck is a pending result remembered by its stream sequence: its
// message was acknowledged, and the result is read from the stream again
// when it is due.
type recheck struct {
	seq      uint64
	due      time.Time
	checked  bool // its first recheck is done
	failures int  // rechecks that could not be done, or whose report could not be written
}

func newPendingSet(maxCount int, maxBytes int64, maxRechecks int, linger time.Duration) *pendingSet {
	return &pendingSet{maxCount: maxCount, maxBytes: maxBytes, maxRechecks: maxRechecks, linger: linger, held: map[uint64]pendingEntry{}}
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

// size is what the set holds: held messages, their bytes, and results
// remembered for a recheck.
func (s *pendingSet) size() (count int, bytes int64, rechecks int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.held), s.bytes, s.rechecks()
}

// rechecks is how many results are remembered; s.mu is held.
func (s *pendingSet) rechecks() int { return len(s.fresh) - s.head + len(s.final) }

// remember keeps r for a recheck when it is due: a fresh one (its first
// recheck) goes behind the others. kept is false when rechecks are off
// (a limit of 0). When the list is full, one result is forgotten to make
// room (dropped): the last of the final ones, else the oldest fresh one.
func (s *pendingSet) remember(r recheck) (kept bool, dropped []uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.maxRechecks == 0 {
		return false, nil
	}
	for s.rechecks() >= s.maxRechecks {
		if n := len(s.final); n > 0 {
			// The last element of a heap is a leaf: removing it keeps
			// the order.
			dropped = append(dropped, s.final[n-1].seq)
			s.final = s.final[:n-1]
			continue
		}
		dropped = append(dropped, s.fresh[s.head].seq)
		s.popFresh()
	}
	if r.checked {
		s.final.push(r)
	} else {
		s.fresh = append(s.fresh, r)
	}
	return true, dropped
}

// next returns a remembered result that is due at now (fresh ones
// first), or how long until one is (negative: none is remembered).
func (s *pendingSet) next(now time.Time) (recheck, bool, time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	wait := time.Duration(-1)
	if s.head < len(s.fresh) {
		if r := s.fresh[s.head]; !r.due.After(now) {
			s.popFresh()
			return r, true, 0
		}
		wait = s.fresh[s.head].due.Sub(now)
	}
	if len(s.final) > 0 {
		if !s.final[0].due.After(now) {
			return s.final.pop(), true, 0
		}
		if d := s.final[0].due.Sub(now); wait < 0 || d < wait {
			wait = d
		}
	}
	return recheck{}, false, wait
}

// forget empties the list (shutdown) and says how many it held.
func (s *pendingSet) forget() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := s.rechecks()
	s.fresh, s.head, s.final = nil, 0, nil
	return n
}

// popFresh drops fresh[head]; s.mu is held.
func (s *pendingSet) popFresh() {
	s.fresh[s.head] = recheck{}
	s.head++
	if s.head == len(s.fresh) {
		s.fresh, s.head = s.fresh[:0], 0
	} else if s.head > 1024 && s.head > len(s.fresh)/2 {
		s.fresh, s.head = append(s.fresh[:0], s.fresh[s.head:]...), 0
	}
}

// recheckHeap is a binary min-heap of results by when they are due.
type recheckHeap []recheck

func (h *recheckHeap) push(r recheck) {
	*h = append(*h, r)
	a := *h
	for i := len(a) - 1; i > 0; {
		parent := (i - 1) / 2
		if !a[i].due.Before(a[parent].due) {
			break
		}
		a[i], a[parent] = a[parent], a[i]
		i = parent
	}
}

// pop removes and returns the earliest due; h is not empty.
func (h *recheckHeap) pop() recheck {
	a := *h
	top, n := a[0], len(a)-1
	a[0], a[n] = a[n], recheck{}
	a = a[:n]
	for i := 0; ; {
		least, l, r := i, 2*i+1, 2*i+2
		if l < n && a[l].due.Before(a[least].due) {
			least = l
		}
		if r < n && a[r].due.Before(a[least].due) {
			least = r
		}
		if least == i {
			break
		}
		a[i], a[least] = a[least], a[i]
		i = least
	}
	*h = a
	return top
}
