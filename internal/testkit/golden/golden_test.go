package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	errors []string
	fatal  bool
}

func (r *recorder) Helper()             {}
func (r *recorder) Logf(string, ...any) {}
func (r *recorder) Errorf(format string, a ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, a...))
}
func (r *recorder) Fatal(a ...any) {
	r.fatal = true
	r.errors = append(r.errors, fmt.Sprint(a...))
	runtime.Goexit()
}
func (r *recorder) Fatalf(format string, a ...any) {
	r.fatal = true
	r.errors = append(r.errors, fmt.Sprintf(format, a...))
	runtime.Goexit()
}

// assert runs Assert with a recorder, on a goroutine of its own as Fatal
// ends it.
func assert(t *testing.T, path string, got []byte) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Assert(r, path, got)
	}()
	<-done
	return r
}

func TestAssert(t *testing.T) {
	goTest := "VERDICT_UPDATE_GOLDEN=1 go test "
	if testing.Short() {
		goTest += "-short "
	}
	tests := map[string]struct {
		env      string // UpdateEnv's value; "" unsets it
		existing string // the golden file's content; "-" for no file
		got      string
		// wantErr is in the failure; "" expects none.
		wantErr  string
		wantFile string
	}{
		"equal":            {existing: "a\nb\n", got: "a\nb\n", wantFile: "a\nb\n"},
		"different":        {existing: "a\nb\nc\n", got: "a\nB\nc\n", wantErr: "@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n", wantFile: "a\nb\nc\n"},
		"update command":   {existing: "a\n", got: "b\n", wantErr: goTest + "./internal/testkit/golden -run '^TestAssert$/^update_command$'", wantFile: "a\n"},
		"missing file":     {existing: "-", got: "a\n", wantErr: "does not exist; create it with", wantFile: "-"},
		"update writes":    {env: "1", existing: "old\n", got: "new\n", wantFile: "new\n"},
		"update creates":   {env: "true", existing: "-", got: "new\n", wantFile: "new\n"},
		"update off":       {env: "0", existing: "old\n", got: "new\n", wantErr: "-old\n+new\n", wantFile: "old\n"},
		"bad update value": {env: "yes", existing: "old\n", got: "new\n", wantErr: `VERDICT_UPDATE_GOLDEN="yes": want 1 or 0`, wantFile: "old\n"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			t.Setenv(UpdateEnv, tc.env)
			if tc.env == "" {
				os.Unsetenv(UpdateEnv) //nolint:errcheck // t.Setenv restores it
			}
			path := filepath.Join(t.TempDir(), "testdata", "out.golden")
			if tc.existing != "-" {
				if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, []byte(tc.existing), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			r := assert(t, path, []byte(tc.got))
			msg := strings.Join(r.errors, "\n")
			switch {
			case tc.wantErr == "" && msg != "":
				t.Errorf("unexpected failure: %s", msg)
			case tc.wantErr != "" && !strings.Contains(msg, tc.wantErr):
				t.Errorf("failure %q does not contain %q", msg, tc.wantErr)
			}
			b, err := os.ReadFile(path)
			file := string(b)
			if err != nil {
				file = "-"
			}
			if file != tc.wantFile {
				t.Errorf("golden file holds %q, want %q", file, tc.wantFile)
			}
		})
	}
}

func TestDiff(t *testing.T) {
	many := func(prefix string, n int) string {
		var b strings.Builder
		for i := range n {
			fmt.Fprintf(&b, "%s%d\n", prefix, i)
		}
		return b.String()
	}
	tests := map[string]struct {
		want, got string
		diff      string
	}{
		"equal": {want: "a\n", got: "a\n", diff: ""},
		"a changed line in the middle, three lines of context": {
			want: "1\n2\n3\n4\n5\n6\n7\n8\n9\n",
			got:  "1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			diff: "@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n",
		},
		"a line added at the end": {
			want: "a\nb\n",
			got:  "a\nb\nc\n",
			diff: "@@ -1,2 +1,3 @@\n a\n b\n+c\n",
		},
		"a missing final newline is quoted": {
			want: "a\nb\n",
			got:  "a\nb",
			diff: "@@ -1,2 +1,2 @@\n a\n-b\n+\"b\"\n",
		},
		"trailing spaces are quoted": {
			want: "a\n",
			got:  "a \n",
			diff: "@@ -1,1 +1,1 @@\n-a\n+\"a \\n\"\n",
		},
		"long differences are cut": {
			want: many("w", 30),
			got:  many("g", 30),
			diff: "@@ -1,30 +1,30 @@\n" + strings.ReplaceAll(many("w", 20), "w", "-w") + "-... 10 more lines\n" +
				strings.ReplaceAll(many("g", 20), "g", "+g") + "+... 10 more lines\n",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Diff(tc.want, tc.got); got != tc.diff {
				t.Errorf("diff\n%s\nwant\n%s", got, tc.diff)
			}
		})
	}
}
