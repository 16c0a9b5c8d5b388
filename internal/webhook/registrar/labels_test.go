package registrar

import (
	"maps"
	"testing"
)

// The registrar adds its labels when missing and keeps a value someone
// else set (helm's managed-by on the chart's configurations): an upgrade
// and the registrar never fight over a label.
func TestLabels(t *testing.T) {
	want := managedLabels()
	tests := map[string]struct {
		have   map[string]string
		hold   bool
		merged map[string]string
	}{
		"none":            {have: nil, hold: false, merged: map[string]string{"app.kubernetes.io/managed-by": "verdict"}},
		"the registrar's": {have: map[string]string{"app.kubernetes.io/managed-by": "verdict"}, hold: true, merged: map[string]string{"app.kubernetes.io/managed-by": "verdict"}},
		"helm's kept":     {have: map[string]string{"app.kubernetes.io/managed-by": "Helm", "x": "y"}, hold: true, merged: map[string]string{"app.kubernetes.io/managed-by": "Helm", "x": "y"}},
		"others kept too": {have: map[string]string{"team": "a"}, hold: false, merged: map[string]string{"app.kubernetes.io/managed-by": "verdict", "team": "a"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := labelsHold(tc.have, want); got != tc.hold {
				t.Errorf("labelsHold %v", got)
			}
			if got := mergeLabels(tc.have, want); !maps.Equal(got, tc.merged) {
				t.Errorf("mergeLabels %v, want %v", got, tc.merged)
			}
		})
	}
}
