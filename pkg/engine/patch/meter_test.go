package patch

import (
	"errors"
	"reflect"
	"strings"
	"testing"
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
