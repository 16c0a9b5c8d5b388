// Package docs_test checks that the commands of the pages under docs/
// work: a page a user follows step by step must not break on its first
// command.
package docs_test

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/internal/cli"
	"github.com/verdict-dev/verdict/internal/testkit/helmbin"
)

// commands are the shell commands of a page's ```sh blocks, a line
// ending in a backslash joined with the next.
func commands(t *testing.T, page string) []string {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	in := false
	var cur strings.Builder
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case !in && strings.TrimSpace(line) == "```sh":
			in = true
			continue
		case in && strings.TrimSpace(line) == "```":
			in = false
			continue
		case !in:
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cur.WriteString(strings.TrimSuffix(line, `\`) + " ")
			continue
		}
		cur.WriteString(line)
		if c := strings.TrimSpace(cur.String()); c != "" && !strings.HasPrefix(c, "#") {
			out = append(out, c)
		}
		cur.Reset()
	}
	return out
}

// The chart as the pages name it, from the repository's root.
const pageChart = "deploy/helm/verdict"

// needsCluster are the commands that only a cluster can answer; the
// end-to-end tests cover what they do (TestE2EKyvernoShadowThenAdopt).
var needsCluster = regexp.MustCompile(`^(kubectl |verdict compare\b)`)

// TestMigratingFromKyverno runs docs/migrating-from-kyverno.md's
// commands: verdict's on the example of testdata/migrating (a Kyverno
// user's policies, resources and test suite), each helm install and
// upgrade rendered with helm template, the values of an upgrade with
// --reuse-values added to those of the install before it.
func TestMigratingFromKyverno(t *testing.T) {
	cmds := commands(t, "migrating-from-kyverno.md")
	if len(cmds) < 5 {
		t.Fatalf("%d commands found: the page's ```sh blocks moved?", len(cmds))
	}
	root, err := helmbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	example, err := filepath.Abs(filepath.Join("testdata", "migrating"))
	if err != nil {
		t.Fatal(err)
	}
	var installed []string // the values of the last helm install
	ran := 0
	for _, c := range cmds {
		if strings.ContainsAny(c, `"'$|;&<>`+"`") {
			t.Fatalf("%s: quotes, variables and pipes are more shell than this test reads: keep the page's commands plain", c)
		}
		args := strings.Fields(c)
		switch {
		case needsCluster.MatchString(c):
			t.Logf("needs a cluster, not run: %s", c)
			continue
		case args[0] == "verdict":
			t.Chdir(example)
			var stdout, stderr bytes.Buffer
			if code := cli.Main(t.Context(), args[1:], strings.NewReader(""), &stdout, &stderr); code != 0 {
				t.Errorf("%s: exit %d\n%s%s", c, code, stdout.String(), stderr.String())
			}
		case args[0] == "helm" && (args[1] == "install" || args[1] == "upgrade"):
			values, chart := helmValues(t, c, args[2:])
			if chart != pageChart {
				t.Errorf("%s: the chart is %s, want %s", c, chart, pageChart)
			}
			if args[1] == "install" {
				installed = values
			} else if has(args, "--reuse-values") {
				values = append(append([]string(nil), installed...), values...)
			}
			helm, err := helmbin.Path(t.Context(), helmbin.V4)
			if err != nil {
				t.Fatal(err)
			}
			r := helmbin.Run(t.Context(), helm, t.TempDir(), append([]string{"template", "verdict", filepath.Join(root, pageChart), "--namespace", "verdict"}, values...)...)
			if r.Err != nil {
				t.Errorf("%s: helm template: %v\n%s", c, r.Err, r.Stderr)
			}
		default:
			t.Errorf("a command this test does not know how to check: %s", c)
			continue
		}
		ran++
	}
	if ran < 4 {
		t.Errorf("only %d commands ran", ran)
	}
}

// helmValues are the --set and -f arguments of a helm install or upgrade
// (after its verb), and its chart (the second positional argument).
func helmValues(t *testing.T, c string, args []string) (values []string, chart string) {
	t.Helper()
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--set" || a == "-f" || a == "--values" || a == "--set-string":
			if i+1 >= len(args) {
				t.Fatalf("%s: %s without a value", c, a)
			}
			values = append(values, a, args[i+1])
			i++
		case a == "--namespace" || a == "-n":
			i++
		case strings.HasPrefix(a, "-"):
			// --create-namespace, --reuse-values, --wait: nothing to render.
		default:
			positional = append(positional, a)
		}
	}
	if len(positional) != 2 {
		t.Fatalf("%s: want a release and a chart, got %v", c, positional)
	}
	return values, positional[1]
}

func has(args []string, flag string) bool {
	for _, a := range args {
		if a == flag {
			return true
		}
	}
	return false
}
