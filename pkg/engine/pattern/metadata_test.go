package pattern

import (
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// TestExpandMetadataWildcardsCost: the cost of expanding a pattern's
// metadata wildcards is that of matching each wildcard key against each
// key of the resource's labels or annotations (wildcard.Cost), whatever
// the anchors around them; plain keys and patterns without metadata cost
// nothing.
func TestExpandMetadataWildcardsCost(t *testing.T) {
	res := map[string]any{"metadata": map[string]any{
		"labels":      map[string]any{"app": "web", "app.kubernetes.io/name": "web"},
		"annotations": map[string]any{"team": "a"},
	}}
	sum := func(p string, keys ...string) int64 {
		var c int64
		for _, k := range keys {
			c += wildcard.Cost(p, len(k))
		}
		return c
	}
	tests := map[string]struct {
		pat  map[string]any
		want int64
	}{
		"no metadata": {pat: map[string]any{"spec": map[string]any{"a": "b"}}},
		"plain keys":  {pat: map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "?*"}}}},
		"a wildcard key": {
			pat:  map[string]any{"metadata": map[string]any{"labels": map[string]any{"app*": "?*"}}},
			want: sum("app*", "app", "app.kubernetes.io/name"),
		},
		"anchored, both fields": {
			pat: map[string]any{"(metadata)": map[string]any{
				"=(labels)":   map[string]any{"*a?p*": "?*"},
				"annotations": map[string]any{"(t*)": "a"},
			}},
			want: sum("*a?p*", "app", "app.kubernetes.io/name") + sum("t*", "team"),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ExpandMetadataWildcardsCost(tc.pat, res); got != tc.want {
				t.Errorf("cost = %d, want %d", got, tc.want)
			}
		})
	}
}
