package reporter

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// The list of results to recheck: fresh ones are due in the order they
// came and before the final ones; when it is full, a final one (it
// missed its first recheck) is forgotten first, then the oldest fresh.
func TestPendingRechecks(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	cases := map[string]struct {
		max     int
		add     []recheck
		dropped []uint64
		order   []uint64 // what next gives at t0+1h, in turn
	}{
		"off": {max: 0, add: []recheck{{seq: 1, due: at(0)}}, dropped: nil, order: nil},
		"fresh before final, each in its order": {max: 10,
			add: []recheck{
				{seq: 5, due: at(3 * time.Second), checked: true}, {seq: 1, due: at(time.Second)},
				{seq: 6, due: at(2 * time.Second), checked: true}, {seq: 2, due: at(time.Second)},
			},
			order: []uint64{1, 2, 6, 5}},
		"full: the last final one goes first": {max: 3,
			add: []recheck{
				{seq: 5, due: at(30 * time.Second), checked: true}, {seq: 1, due: at(time.Second)},
				{seq: 2, due: at(time.Second)}, {seq: 3, due: at(time.Second)},
			},
			dropped: []uint64{5}, order: []uint64{1, 2, 3}},
		"full of fresh ones: the oldest goes": {max: 2,
			add:     []recheck{{seq: 1, due: at(time.Second)}, {seq: 2, due: at(time.Second)}, {seq: 3, due: at(time.Second)}},
			dropped: []uint64{1}, order: []uint64{2, 3}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := newPendingSet(1, 1<<20, tc.max, time.Minute)
			var dropped []uint64
			for _, r := range tc.add {
				kept, d := s.remember(r)
				if kept != (tc.max > 0) {
					t.Fatalf("remember %d: kept %v with a limit of %d", r.seq, kept, tc.max)
				}
				dropped = append(dropped, d...)
			}
			if !slices.Equal(dropped, tc.dropped) {
				t.Errorf("dropped %v, want %v", dropped, tc.dropped)
			}
			var order []uint64
			for {
				r, ok, _ := s.next(at(time.Hour))
				if !ok {
					break
				}
				order = append(order, r.seq)
			}
			if !slices.Equal(order, tc.order) {
				t.Errorf("order %v, want %v", order, tc.order)
			}
		})
	}
}

// next gives nothing before it is due and says how long to wait; the
// final ones come out by due time whatever order they went in.
func TestPendingRechecksDue(t *testing.T) {
	t0 := time.Unix(1_000_000, 0)
	s := newPendingSet(1, 1<<20, 1000, time.Minute)
	if _, ok, wait := s.next(t0); ok || wait >= 0 {
		t.Fatalf("empty: ok %v wait %v", ok, wait)
	}
	s.remember(recheck{seq: 1, due: t0.Add(time.Second)})
	if _, ok, wait := s.next(t0); ok || wait != time.Second {
		t.Fatalf("before due: ok %v wait %v", ok, wait)
	}
	for _, i := range rand.Perm(500) {
		s.remember(recheck{seq: uint64(100 + i), due: t0.Add(time.Duration(i) * time.Millisecond), checked: true})
	}
	if _, ok, wait := s.next(t0.Add(-time.Second)); ok || wait != time.Second {
		t.Fatalf("before the first final one: ok %v wait %v", ok, wait)
	}
	var last time.Time
	for n := 0; ; n++ {
		r, ok, _ := s.next(t0.Add(500 * time.Millisecond))
		if !ok {
			if n != 500 {
				t.Fatalf("%d due by 500ms, want 500", n)
			}
			break
		}
		if r.due.Before(last) {
			t.Fatalf("%d due %v after one due %v", r.seq, r.due, last)
		}
		last = r.due
	}
	if n := s.forget(); n != 1 {
		t.Fatalf("forget: %d left, want 1", n)
	}
	if _, _, r := s.size(); r != 0 {
		t.Fatalf("%d after forget", r)
	}
}
