package patch

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"
)

var errRefused = errors.New("refused")

// countingMeter counts the work charged and refuses past limit.
type countingMeter struct {
	limit, spent int64
}

func (m *countingMeter) ChargeWork(n int64) error {
	m.spent += n
	if m.spent > m.limit {
		return errRefused
	}
	return nil
}

// TestStrategicMergeMetered: the work of an overlay's anchors is charged
// to the meter, a long wildcard against a long value about its cost
// before it runs; a meter that refuses stops the patch with its error;
// one that allows it changes nothing of the result.
func TestStrategicMergeMetered(t *testing.T) {
	long := strings.Repeat("x", 50_000)
	resource := map[string]any{
		"kind":     "ConfigMap",
		"metadata": map[string]any{"name": "c"},
		"data":     map[string]any{"blob": long},
	}
	questions := "*" + strings.Repeat("x?", 200) + "y*"
	tests := map[string]struct {
		overlay  map[string]any
		minWork  int64
		skipped  bool
		maxLimit int64
	}{
		"conditional anchor": {
			overlay: map[string]any{"data": map[string]any{"(blob)": questions, "added": "yes"}},
			// wildcard.Cost: the middle segment's length times the value's.
			minWork: int64(len(questions)-3) * int64(len(long)),
			skipped: true,
		},
		"global anchor on a list": {
			overlay: map[string]any{"spec": map[string]any{"<(items)": []any{map[string]any{"name": "?*"}}}, "metadata": map[string]any{"labels": map[string]any{"a": "b"}}},
			skipped: true,
		},
		"anchors that hold": {
			overlay: map[string]any{"data": map[string]any{"(blob)": "x*", "added": "yes"}},
			minWork: int64(len(long)),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			want, err := StrategicMerge(resource, tc.overlay)
			if err != nil {
				t.Fatal(err)
			}
			if want.Skipped != tc.skipped {
				t.Fatalf("skipped = %v, want %v", want.Skipped, tc.skipped)
			}
			m := &countingMeter{limit: 1 << 62}
			got, err := StrategicMergeMetered(resource, tc.overlay, m)
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("metered = %+v, %v; want %+v", got, err, want)
			}
			if m.spent < tc.minWork {
				t.Errorf("charged %d, want at least %d", m.spent, tc.minWork)
			}
			if tc.minWork > 0 {
				refusing := &countingMeter{limit: tc.minWork / 2}
				if _, err := StrategicMergeMetered(resource, tc.overlay, refusing); !errors.Is(err, errRefused) {
					t.Errorf("refused meter: error %v, want errRefused", err)
				}
			}
		})
	}
}

// within runs f and fails the test when it has not returned after d.
func within(t *testing.T, d time.Duration, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	select {
	case <-done:
	case <-time.After(d):
		t.Fatalf("still running after %s", d)
	}
}

// TestMergeLongLists: the merge walks every associative list of the
// resource, touched by the overlay or not, and paired each element with
// its namesake by scanning the lists: 8,000 containers took 13 s, so any
// patchStrategicMerge (an ordinary "add a label" policy) held a core that
// long for a tenant's Pod. Lists whose elements carry all their merge
// keys, and lists of scalars, are now paired through an index; the other
// lists' pairing is charged to the meter.
func TestMergeLongLists(t *testing.T) {
	const n = 20_000
	containers := make([]any, n)
	env := make([]any, n)
	ports := make([]any, n)
	finalizers := make([]any, n)
	for i := range n {
		containers[i] = map[string]any{"name": fmt.Sprintf("c%d", i), "image": "x"}
		env[i] = map[string]any{"name": fmt.Sprintf("E%d", i), "value": "v"}
		ports[i] = map[string]any{"containerPort": float64(i), "protocol": "TCP"}
		finalizers[i] = fmt.Sprintf("f%d", i)
	}
	partial := append([]any{map[string]any{"containerPort": 1.0}}, ports...)
	pod := func(spec map[string]any) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "finalizers": finalizers}, "spec": spec}
	}
	label := map[string]any{"metadata": map[string]any{"labels": map[string]any{"seen": "yes"}}}
	tests := map[string]struct {
		resource map[string]any
		refused  bool
	}{
		"containers": {resource: pod(map[string]any{"containers": containers})},
		"env":        {resource: pod(map[string]any{"containers": []any{map[string]any{"name": "c", "env": env}}})},
		"ports":      {resource: pod(map[string]any{"containers": []any{map[string]any{"name": "c", "ports": ports}}})},
		"ports, one without a protocol": {
			resource: pod(map[string]any{"containers": []any{map[string]any{"name": "c", "ports": partial}}}),
			refused:  true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			within(t, 20*time.Second, func() {
				m := &countingMeter{limit: 1 << 30}
				res, err := StrategicMergeMetered(tc.resource, label, m)
				switch {
				case tc.refused:
					if !errors.Is(err, errRefused) {
						t.Errorf("error = %v, want the meter's refusal", err)
					}
				case err != nil:
					t.Fatal(err)
				case !res.Changed:
					t.Error("not changed")
				}
			})
		})
	}
}

// FuzzMergeComplete holds the indexed pairing of mergeComplete to the
// general one of mergeJoined: on lists of maps whose elements carry all
// the keys or none (duplicates, numbers, nulls, elements that are no
// maps), both give the same list or the same error.
func FuzzMergeComplete(f *testing.F) {
	f.Add([]byte{1, 2, 3, 1, 0, 9, 2}, []byte{2, 5, 2, 7}, true)
	f.Add([]byte{0, 0, 1, 1}, []byte{1}, false)
	f.Fuzz(func(t *testing.T, baseSpec, patchSpec []byte, twoKeys bool) {
		keys := []string{"name"}
		if twoKeys {
			keys = []string{"port", "protocol"}
		}
		list := func(spec []byte, tag string) []any {
			out := make([]any, 0, len(spec))
			for i, c := range spec {
				item := map[string]any{"field": tag + strconv.Itoa(i)}
				switch {
				case c%11 == 10:
					out = append(out, "scalar")
					continue
				case c%7 == 6:
					// no key: kept at the end (base) or dropped (patch)
				case twoKeys:
					item["port"] = float64(c % 5)
					item["protocol"] = []string{"TCP", "UDP"}[int(c/5)%2]
				default:
					item["name"] = string(rune('a' + c%5))
				}
				if c%13 == 12 {
					item["field"] = nil
				}
				out = append(out, item)
			}
			return out
		}
		base, patch := list(baseSpec, "b"), list(patchSpec, "p")
		got, gotOK, gotErr := (&merger{}).mergeComplete(base, patch, keys, nil)
		if !gotOK {
			t.Fatalf("mergeComplete refused complete lists")
		}
		want, _, wantErr := (&merger{}).mergeJoined(base, patch, keys, nil)
		if (gotErr == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
			t.Fatalf("indexed %v, %v\njoined  %v, %v", got, gotErr, want, wantErr)
		}
	})
}
