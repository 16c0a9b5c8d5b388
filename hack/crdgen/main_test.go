package main

import (
	"bytes"
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
		"checked-in files":     {[]string{"--verify", "--out-dir", "../../deploy/crds"}, exitOK},
		"stale (no files)":     {[]string{"--verify", "--out-dir", t.TempDir()}, exitError},
		"unwritable directory": {[]string{"--out-dir", filepath.Join(t.TempDir(), "missing")}, exitError},
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
	dir := t.TempDir()
	for _, args := range [][]string{{"--out-dir", dir}, {"--verify", "--out-dir", dir}} {
		var stderr bytes.Buffer
		if got := run(t.Context(), args, &stderr); got != exitOK {
			t.Fatalf("%v: exit %d; stderr:\n%s", args, got, stderr.String())
		}
	}
}
