// Package golden compares the output of a test with a golden file, the
// reviewed copy of that output committed under the package's testdata/.
//
// A golden file is rewritten only when the environment variable
// VERDICT_UPDATE_GOLDEN is set to a true value, for every package or for
// one test:
//
//	VERDICT_UPDATE_GOLDEN=1 go test -short ./...
//	VERDICT_UPDATE_GOLDEN=1 go test ./internal/cli -run '^TestOutputGolden$'
//
// then `git diff` shows what changed, for review with the code that
// changed it: the golden files are the specification of the output.
// Otherwise a golden file that differs from the output fails the test
// with the first differing lines and the command that rewrites it.
//
// The file holds the exact bytes: trailing spaces and a missing final
// newline are part of the output (an editor that trims them breaks the
// test, and the difference is shown quoted).
package golden

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// UpdateEnv is the environment variable that rewrites golden files.
const UpdateEnv = "VERDICT_UPDATE_GOLDEN"

// Limits of the difference shown on a mismatch.
const (
	contextLines = 3
	shownLines   = 20
)

// Assert compares got with the golden file at path (relative to the
// package's directory, under testdata/). When UpdateEnv is set it writes
// got to the file instead and logs that it did.
func Assert(t testing.TB, path string, got []byte) {
	t.Helper()
	update, err := updating()
	if err != nil {
		t.Fatal(err)
	}
	if update {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatalf("golden: %v", err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatalf("golden: %v", err)
		}
		t.Logf("golden: wrote %s", path)
		return
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		t.Errorf("golden file %s does not exist; create it with\n\t%s", path, updateCommand(t))
		return
	}
	if err != nil {
		t.Fatalf("golden: %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from golden file %s (-want +got):\n%s\nIf the new output is right, rewrite the file with\n\t%s\nand review it with git diff.",
			path, Diff(string(want), string(got)), updateCommand(t))
	}
}

// updating reports whether UpdateEnv asks for golden files to be written.
func updating() (bool, error) {
	v, ok := os.LookupEnv(UpdateEnv)
	if !ok || v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("golden: %s=%q: want 1 or 0", UpdateEnv, v)
	}
	return b, nil
}

// Diff shows the lines between the first and the last difference of want
// and got, as a unified diff would, with a few lines of context and at
// most shownLines lines of each side. It is "" when they are equal.
func Diff(want, got string) string {
	if want == got {
		return ""
	}
	w, g := lines(want), lines(got)
	start := 0
	for start < len(w) && start < len(g) && w[start] == g[start] {
		start++
	}
	endW, endG := len(w), len(g)
	for endW > start && endG > start && w[endW-1] == g[endG-1] {
		endW--
		endG--
	}
	from := max(0, start-contextLines)
	after := min(len(w)-endW, contextLines)
	var b strings.Builder
	fmt.Fprintf(&b, "@@ -%d,%d +%d,%d @@\n", from+1, endW+after-from, from+1, endG+after-from)
	for _, l := range w[from:start] {
		writeLine(&b, ' ', l)
	}
	writeSide(&b, '-', w[start:endW])
	writeSide(&b, '+', g[start:endG])
	for _, l := range w[endW : endW+after] {
		writeLine(&b, ' ', l)
	}
	return b.String()
}

// lines splits s after each newline; a final newline does not start an
// empty line.
func lines(s string) []string {
	l := strings.SplitAfter(s, "\n")
	if l[len(l)-1] == "" {
		l = l[:len(l)-1]
	}
	return l
}

func writeSide(b *strings.Builder, sign byte, ls []string) {
	for i, l := range ls {
		if i == shownLines {
			fmt.Fprintf(b, "%c... %d more lines\n", sign, len(ls)-i)
			return
		}
		writeLine(b, sign, l)
	}
}

// writeLine writes one line of the diff; a line without a final newline,
// or with characters that do not show, is quoted.
func writeLine(b *strings.Builder, sign byte, l string) {
	body, nl := strings.CutSuffix(l, "\n")
	if !nl || strings.ContainsAny(body, "\r\t") || strings.TrimRight(body, " ") != body {
		body = strconv.Quote(l)
	}
	b.WriteByte(sign)
	b.WriteString(body)
	b.WriteByte('\n')
}

// updateCommand is the command that rewrites the golden files of the
// running test: its package relative to the module's root, and its name.
func updateCommand(t testing.TB) string {
	pkg := "."
	if dir, err := os.Getwd(); err == nil {
		if root := moduleRoot(dir); root != "" {
			if rel, err := filepath.Rel(root, dir); err == nil {
				pkg = "./" + filepath.ToSlash(rel)
			}
		}
	}
	parts := strings.Split(t.Name(), "/")
	for i, p := range parts {
		parts[i] = "^" + regexp.QuoteMeta(p) + "$"
	}
	short := ""
	if testing.Short() {
		short = " -short"
	}
	return fmt.Sprintf("%s=1 go test%s %s -run '%s'", UpdateEnv, short, pkg, strings.Join(parts, "/"))
}

func moduleRoot(dir string) string {
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
