package layering

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// verdictNames lists the string literals of src that name one of
// Verdict's streams or subjects (VERDICT_*, verdict.<token>).
func verdictNames(t *testing.T, fset *token.FileSet, name string, src any) []string {
	t.Helper()
	f, err := parser.ParseFile(fset, name, src, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		lit, ok := n.(*ast.BasicLit)
		if !ok || lit.Kind != token.STRING {
			return true
		}
		s, err := strconv.Unquote(lit.Value)
		if err == nil && (strings.Contains(s, "VERDICT_") || strings.HasPrefix(s, "verdict.")) {
			out = append(out, fset.Position(lit.Pos()).String()+": "+s)
		}
		return true
	})
	return out
}

// TestQueueKnowsNoVerdictNames: pkg/queue is a library; Verdict's
// topology (stream, consumer and subject names) lives in internal/bus and
// reaches the queue as values.
func TestQueueKnowsNoVerdictNames(t *testing.T) {
	files, err := filepath.Glob("../../../pkg/queue/*.go")
	if err != nil || len(files) < 10 {
		t.Fatalf("pkg/queue sources: %d files, %v", len(files), err)
	}
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		for _, v := range verdictNames(t, fset, f, nil) {
			t.Errorf("pkg/queue names Verdict's topology: %s", v)
		}
	}
	bad := "package q\nconst s = \"VERDICT_WORK\"\nvar p = \"verdict.work.\" + k\n"
	if got := verdictNames(t, fset, "bad.go", bad); len(got) != 2 {
		t.Fatalf("the check misses names: found %v in %q", got, bad)
	}
}
