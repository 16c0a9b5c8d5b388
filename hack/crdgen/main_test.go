package main

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

func TestRun(t *testing.T) {
	tests := map[string]struct {
		args []string
		want int
	}{
		"help":                 {[]string{"--help"}, exitOK},
		"unknown flag":         {[]string{"--no-such-flag"}, exitUsage},
		"argument":             {[]string{"deploy"}, exitUsage},
		"checked-in files":     {[]string{"--verify", "--out-dir", "../../deploy/crds", "--kyverno-dir", "../../deploy/helm/verdict/kyverno-crds"}, exitOK},
		"stale (no files)":     {[]string{"--verify", "--out-dir", t.TempDir(), "--kyverno-dir", t.TempDir()}, exitError},
		"unwritable directory": {[]string{"--out-dir", filepath.Join(t.TempDir(), "missing"), "--kyverno-dir", t.TempDir()}, exitError},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stderr bytes.Buffer
			if got := run(t.Context(), tc.args, &stderr); got != tc.want {
				t.Errorf("exit %d, want %d; stderr:\n%s", got, tc.want, stderr.String())
			}
		})
	}
}

// What it writes, it then verifies.
func TestWriteThenVerify(t *testing.T) {
	dir, kyverno := t.TempDir(), t.TempDir()
	// The hand-written CRDs, which Kyverno's groups get too.
	for _, name := range []string{"cleanuppolicies.yaml", "clustercleanuppolicies.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "deploy", "crds", name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"--out-dir", dir, "--kyverno-dir", kyverno}, {"--verify", "--out-dir", dir, "--kyverno-dir", kyverno}} {
		var stderr bytes.Buffer
		if got := run(t.Context(), args, &stderr); got != exitOK {
			t.Fatalf("%v: exit %d; stderr:\n%s", args, got, stderr.String())
		}
	}
}
