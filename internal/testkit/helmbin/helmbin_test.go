package helmbin

import (
	"os"
	"path/filepath"
	"testing"
)

func TestIsModule(t *testing.T) {
	tests := map[string]struct {
		gomod string
		want  bool
	}{
		"this module":      {gomod: "// c\nmodule github.com/verdict-dev/verdict\n\ngo 1.26\n", want: true},
		"a tools module":   {gomod: "module github.com/verdict-dev/verdict/hack/tools/helm\n", want: false},
		"another module":   {gomod: "module example.com/x\n", want: false},
		"no module clause": {gomod: "go 1.26\n", want: false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := isModule([]byte(tc.gomod)); got != tc.want {
				t.Errorf("isModule = %v", got)
			}
		})
	}
}

func TestCachedFromEnv(t *testing.T) {
	for _, m := range []Major{V4, V3} {
		t.Run(m.Env(), func(t *testing.T) {
			dir := t.TempDir()
			exe := filepath.Join(dir, "helm")
			if err := os.WriteFile(exe, []byte("#!/bin/sh\n"), 0o755); err != nil {
				t.Fatal(err)
			}
			t.Setenv(m.Env(), exe)
			if p, ok := Cached(m); !ok || p != exe {
				t.Errorf("Cached(%d) = %q, %v", m, p, ok)
			}
			t.Setenv(m.Env(), filepath.Join(dir, "missing"))
			if _, ok := Cached(m); ok {
				t.Errorf("a missing $%s is cached", m.Env())
			}
			if _, err := Path(t.Context(), m); err == nil {
				t.Errorf("Path accepted a missing $%s", m.Env())
			}
		})
	}
}
