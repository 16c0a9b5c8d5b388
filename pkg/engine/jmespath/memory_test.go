package jmespath

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
)

// bomb is finding 5 of issue 28: forty strings of 16 MB, each within
// MaxStringLength, 1.34 GB of webhook memory for one review.
const bomb = "split(pad_left('', `40`, ','), ',')[*].pad_left('a', `16000000`, 'x')"

// allocated runs f and returns the bytes the process allocated meanwhile.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

func TestMemoryLimit(t *testing.T) {
	doc := map[string]any{"s": strings.Repeat("x", 1<<20)}
	tests := map[string]struct {
		expr    string
		opts    []Option
		wantErr error
		// maxAlloc bounds what the search may allocate.
		maxAlloc uint64
	}{
		"the bomb": {expr: bomb, wantErr: ErrMemoryLimit, maxAlloc: 2 * DefaultMemoryLimit},
		"the bomb under a smaller limit": {
			expr: bomb, opts: []Option{WithMemoryLimit(1 << 20)}, wantErr: ErrMemoryLimit, maxAlloc: 4 << 20,
		},
		"pad_left growth outside a loop": {
			expr: "[" + strings.Repeat("pad_left('a', `16000000`, 'x'),", 39) + "'a']", wantErr: ErrMemoryLimit, maxAlloc: 2 * DefaultMemoryLimit,
		},
		"replace growth": {
			expr: "[" + strings.Repeat("replace_all(s, 'x', 'xxxxxxxxxxxxxxx'),", 39) + "'a']", wantErr: ErrMemoryLimit, maxAlloc: 2 * DefaultMemoryLimit,
		},
		"join growth": {
			expr: "[" + strings.Repeat("join('', [s, s, s, s, s, s, s, s, s, s, s, s, s, s, s]),", 39) + "'a']", wantErr: ErrMemoryLimit, maxAlloc: 2 * DefaultMemoryLimit,
		},
		"within the limit": {expr: "length(split(pad_left('', `40`, ','), ',')[*].pad_left('a', `100000`, 'x'))", maxAlloc: 32 << 20},
		"a wildcard with a ? between two stars": {
			expr: "pattern_match(join('', ['*', pad_left('', `20000`, '?'), 'y*']), s)", wantErr: ErrStepLimit, maxAlloc: 4 << 20,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			i := newTestInterpreter(t, tc.opts...)
			q, err := i.Compile(tc.expr)
			if err != nil {
				t.Fatal(err)
			}
			var got error
			alloc := allocated(func() { _, got = q.Search(doc) })
			t.Logf("allocated %d MiB", alloc>>20)
			if alloc > tc.maxAlloc {
				t.Errorf("allocated %d bytes, want at most %d", alloc, tc.maxAlloc)
			}
			if tc.wantErr == nil {
				if got != nil {
					t.Fatal(got)
				}
				return
			}
			if !errors.Is(got, tc.wantErr) || !errors.Is(got, ErrEvaluation) {
				t.Fatalf("error = %v, want one wrapping %v and ErrEvaluation", got, tc.wantErr)
			}
		})
	}
}

// TestBudgetAcrossSearches passes one Budget to several searches, as the
// engine does for the expressions of one rule.
func TestBudgetAcrossSearches(t *testing.T) {
	i := newTestInterpreter(t)
	q, err := i.Compile("pad_left('a', `10000000`, 'x')")
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewBudget(50 << 20)
	if err != nil {
		t.Fatal(err)
	}
	for n := range 2 {
		if _, err := q.SearchBudget(context.Background(), nil, b); err != nil {
			t.Fatalf("search %d: %v", n, err)
		}
	}
	if _, err := q.SearchBudget(context.Background(), nil, b); !errors.Is(err, ErrMemoryLimit) {
		t.Fatalf("third search: error = %v, want one wrapping ErrMemoryLimit", err)
	}
	if got := b.Used(); got != 40_000_000 {
		t.Errorf("Used = %d, want 40000000", got)
	}
	b.Reset()
	if _, err := q.SearchBudget(context.Background(), nil, b); err != nil {
		t.Fatalf("after Reset: %v", err)
	}
	if _, err := NewBudget(0); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("NewBudget(0): error = %v, want ErrInvalidOption", err)
	}
	if _, err := New(WithMemoryLimit(-1)); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("WithMemoryLimit(-1): error = %v, want ErrInvalidOption", err)
	}
}

// TestSizeAndCharge: Size counts a document whole (strings, slots,
// entries and keys); Charge counts data brought in from outside a
// search against the same budget the searches charge, and refuses what
// would exceed it, counting nothing.
func TestSizeAndCharge(t *testing.T) {
	sizes := map[string]struct {
		v    any
		want int64
	}{
		"string":  {"abc", 3},
		"number":  {1.5, 0},
		"list":    {[]any{"ab", 1.0, nil}, 3*SlotBytes + 2},
		"object":  {map[string]any{"k": "vv", "list": []any{"x"}}, 2*EntryBytes + 1 + 2 + 4 + SlotBytes + 1},
		"nothing": {nil, 0},
	}
	for name, tc := range sizes {
		if got := Size(tc.v); got != tc.want {
			t.Errorf("Size(%s) = %d, want %d", name, got, tc.want)
		}
	}
	b, err := NewBudget(100)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Charge("answer", 60); err != nil {
		t.Fatal(err)
	}
	if err := b.Charge("answer", 60); !errors.Is(err, ErrMemoryLimit) || !strings.Contains(err.Error(), "answer would allocate 60 bytes, 40 of the budget of 100 are left") {
		t.Errorf("second charge: error = %v, want ErrMemoryLimit with what and how much", err)
	}
	if got := b.Used(); got != 60 {
		t.Errorf("Used = %d, want 60 (a refused charge counts nothing)", got)
	}
}
