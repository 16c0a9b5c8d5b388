package manifests

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestExpand: a named file is kept whatever its extension; a folder gives
// its manifest files in name order, from sub-folders too, but not from
// hidden ones; a missing path is an error.
func TestExpand(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"b.yaml", "a.JSON", "c.yml", "notes.txt", "sub/d.yaml", ".hidden/e.yaml", "named.txt"} {
		p := filepath.Join(dir, f)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	got, err := Expand([]string{filepath.Join(dir, "named.txt"), dir})
	if err != nil {
		t.Fatal(err)
	}
	var rel []string
	for _, p := range got {
		r, _ := filepath.Rel(dir, p)
		rel = append(rel, r)
	}
	if want := []string{"named.txt", "a.JSON", "b.yaml", "c.yml", "sub/d.yaml"}; !slices.Equal(rel, want) {
		t.Fatalf("Expand = %v, want %v", rel, want)
	}
	if _, err := Expand([]string{filepath.Join(dir, "missing")}); err == nil {
		t.Fatal("a missing path is not an error")
	}
}
