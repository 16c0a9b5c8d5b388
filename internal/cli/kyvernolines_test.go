package cli

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/internal/testkit/golden"
)

// A kyvernoLine is one command line of the Kyverno CLI's documentation
// or of Kyverno's own CLI suite, run with verdict as Kyverno's
// pipelines run it: by the name kyverno or kubectl-kyverno, so in the
// Kyverno dialect. The inputs are this package's own, under
// testdata/kyvernodocs and testdata/kyvernosuite, laid out as the lines
// name them ("/path/to/" is dropped).
type kyvernoLine struct {
	// dir is where the line runs, in a copy of the inputs.
	dir string
	// line is as the documentation or the suite writes it, with
	// placeholders (<variable1>=<value1>) filled in. A pipe's left side
	// is `cat <file>` or `echo '<text>'`, or stands for what stdin says.
	line string
	// stdin is the file of dir that stands for a pipe's left side that
	// cannot run here (kustomize build, kubectl get).
	stdin string
	code  int
}

// kyvernoDocs are the command lines of Kyverno 1.19's CLI documentation
// that need no cluster: the examples of `kyverno <command> --help`
// (docs/user/cli/commands in kyverno/kyverno) and of the pages
// kyverno-cli/usage/apply, test and jp (kyverno/website). The lines
// with --cluster run in TestCluster (kyvernoClusterDocs).
var kyvernoDocs = map[string][]kyvernoLine{
	"apply": {
		// kyverno apply --help
		{dir: "apply/reference", line: "kyverno apply /path/to/policy.yaml /path/to/folderOfPolicies --resource=/path/to/resource1 --resource=/path/to/resource2", code: 1},
		{dir: "apply/reference", line: "kyverno apply /path/to/policy.yaml /path/to/folderOfPolicies --resource=/path/to/resources/", code: 1},
		{dir: "apply/reference", line: "kyverno apply https://github.com/kyverno/policies/openshift/ --git-branch main --cluster", code: 1},
		{dir: "apply/reference", line: "kyverno apply /path/to/policy.yaml --resource /path/to/resource.yaml --set registry=docker.io,team=shop", code: 0},
		{dir: "apply/reference", line: "kyverno apply /path/to/policy1.yaml /path/to/policy2.yaml --resource /path/to/resource1.yaml --resource /path/to/resource2.yaml -f /path/to/value.yaml", code: 1},
		// kyverno-cli/usage/apply
		{dir: "apply/usage", line: "kyverno apply /path/to/policy.yaml --resource /path/to/resource.yaml", code: 1},
		{dir: "apply/usage", line: "kustomize build nginx/overlays/envs/prod/ | kyverno apply /path/to/policy.yaml --resource -", stdin: "kustomize-build.yaml", code: 0},
		{dir: "apply/usage", line: "kyverno apply /path/to/policy.yaml --resource /path/to/resource.yaml --exception /path/to/exception.yaml", code: 0},
		{dir: "apply/usage", line: "kyverno apply /path/to/policy1.yaml /path/to/folderFullOfPolicies --resource /path/to/resource1.yaml --resource /path/to/resource2.yaml --exception /path/to/exception1.yaml --exception /path/to/exception2.yaml", code: 0},
		{dir: "apply/usage", line: "kyverno apply /path/to/policy1.yaml /path/to/folderFullOfPolicies --resource /path/to/resource1.yaml --resource /path/to/resource2.yaml --exceptions-with-resources", code: 1},
		{dir: "apply/usage", line: "kyverno apply /path/to/policy.yaml --resource /path/to/resource.yaml -o newresource.yaml", code: 1},
		{dir: "apply/usage", line: "kyverno apply /path/to/policy.yaml --resource /path/to/resource.yaml -o foo/", code: 1},
		{dir: "apply/usage", line: "kyverno apply /path/to/policy.yaml --resource /path/to/resource.yaml  --target-resource /path/to/target1.yaml --target-resource /path/to/target2.yaml", code: 1},
		{dir: "apply/usage", line: "kyverno apply /path/to/policy.yaml --resource /path/to/resource.yaml  --target-resources /path/to/targets/", code: 1},
		{dir: "apply/usage", line: "kyverno apply /path/to/policy.yaml --resource /path/to/resource.yaml --set registry=docker.io,team=shop", code: 1},
		{dir: "apply/usage", line: "kyverno apply /path/to/policy1.yaml /path/to/policy2.yaml --resource /path/to/resource1.yaml --resource /path/to/resource2.yaml -f /path/to/value.yaml --userinfo /path/to/user_info.yaml", code: 1},
		{dir: "apply/generate", line: "kyverno apply /path/to/add_network_policy.yaml --resource /path/to/required_default_network_policy.yaml -s request.object.metadata.name=devtest", code: 0},
		{dir: "apply/generate", line: "kyverno apply /path/to/add_network_policy.yaml --resource /path/to/required_default_network_policy.yaml -f /path/to/value.yaml", code: 0},
		{dir: "apply/global-values", line: "kyverno apply /path/to/add_dev_pod.yaml --resource /path/to/dev_prod_pod.yaml -f /path/to/value.yaml", code: 1},
		{dir: "apply/namespace-selector", line: "kyverno apply /path/to/enforce-pod-name.yaml --resource /path/to/nginx.yaml -f /path/to/value.yaml", code: 0},
		{dir: "apply/configmap", line: "kyverno apply /path/to/policy1.yaml --resource /path/to/resource1.yaml -f /path/to/value.yaml", code: 0},
		{dir: "apply/usage", line: "kyverno apply /path/to/policy.yaml --resource /path/to/resource.yaml --audit-warn", code: 0},
		{dir: "apply/warn", line: "kyverno apply disallow-latest-tag.yaml --resource=echo-test.yaml --audit-warn --warn-exit-code 3", code: 3},
		{dir: "apply/warn", line: "kyverno apply disallow-latest-tag.yaml --resource=empty.yaml --warn-exit-code 3 --warn-no-pass", code: 3},
		{dir: "apply/report", line: "kyverno apply policy.yaml -r resource1.yaml -r resource2.yaml --policy-report", code: 1},
		{dir: "apply/exception", line: "kyverno apply /path/to/policy.yaml --resource /path/to/resource.yaml --exception /path/to/exception.yaml", code: 0},
		{dir: "apply/vap", line: "kyverno apply /path/to/check-deployment-replicas.yaml --resource /path/to/deployment.yaml", code: 0},
	},
	"test": {
		// kyverno test --help
		{dir: "test", line: "kyverno test https://github.com/kyverno/policies/pod-security --git-branch main", code: 1},
		{dir: "test", line: "kyverno test .", code: 0},
		{dir: "test", line: `kyverno test . --test-case-selector "policy=disallow-latest-tag, rule=require-image-tag, resource=test-require-image-tag-pass"`, code: 0},
		// kyverno-cli/usage/test
		{dir: "test", line: "kyverno test /path/to/folderContainingTestYamls", code: 0},
		{dir: "test", line: "kyverno test https://github.com/kyverno/policies/release-1.6", code: 1},
		{dir: "test", line: "kyverno test https://github.com/kyverno/policies/pod-security/restricted -b release-1.6", code: 1},
		{dir: "test", line: `kyverno test . --test-case-selector "policy=add-default-resources, rule=add-default-requests, resource=nginx-demo2"`, code: 0},
	},
	"jp": {
		// kyverno jp query --help, function --help, parse --help
		{dir: "jp", line: "kyverno jp query -i object.yaml 'request.object.metadata.name | truncate(@, `9`)'", code: 0},
		{dir: "jp", line: "kyverno jp query -i object.yaml -q query-file", code: 0},
		{dir: "jp", line: "kyverno jp query -i object.yaml -q query-file-1 -q query-file-2 'request.object.metadata.name | truncate(@, `9`)'", code: 0},
		{dir: "jp", line: "cat query-file | kyverno jp query -i object.yaml", code: 0},
		{dir: "jp", line: "cat object.yaml | kyverno jp query -q query-file", code: 0},
		{dir: "jp", line: "kyverno jp function truncate", code: 0},
		{dir: "jp", line: "kyverno jp parse 'request.object.metadata.name | truncate(@, `9`)'", code: 0},
		{dir: "jp", line: "kyverno jp parse -f my-file", code: 0},
		{dir: "jp", line: "kyverno jp parse -f my-file1 -f my-file-2 'request.object.metadata.name | truncate(@, `9`)'", code: 0},
		{dir: "jp", line: "cat my-file | kyverno jp parse", code: 0},
		// kyverno-cli/usage/jp
		{dir: "jp", line: `echo '{"foo": "BAR"}' | kyverno jp query 'to_lower(foo)'`, code: 0},
		{dir: "jp", line: `kyverno jp query -i foo.json "split(bar, '-')"`, code: 0},
		{dir: "jp", line: `kyverno jp query -i foo.json "split(bar, '-') | length(@)"`, code: 0},
		{dir: "jp", line: "echo {} | kyverno jp query -q add", code: 0},
		{dir: "jp", line: "kyverno jp query -i pod.json 'spec.containers[0].name' -u", code: 0},
	},
	"create": {
		// kyverno create <kind> --help
		{dir: "create", line: "kyverno create test -p policy.yaml -r resource.yaml -f values.yaml --pass policy-name,rule-name,resource-name,resource-namespace,resource-kind", code: 0},
		{dir: "create", line: `kyverno create exception my-exception --namespace my-ns --policy-rules "policy,rule-1,rule-2" --any "kind=Pod,kind=Deployment,name=test-*"`, code: 0},
		{dir: "create", line: "kyverno create values -g request.mode=dev -n prod,env=prod --rule policy,rule,env=demo --resource policy,resource,env=demo", code: 0},
		{dir: "create", line: "kyverno create user-info -u molybdenum@somecorp.com -g basic-user -c admin", code: 0},
		// kyverno version --help
		{dir: "create", line: "kyverno version", code: 0},
	},
}

// kyvernoSuite are the lines Kyverno's own CLI suite runs at v1.19.0:
// its Makefile's test-cli-policies and test-cli-local-* targets
// ($(CLI_BIN) is cmd/cli/kubectl-kyverno/kubectl-kyverno) and the CLI
// workflow's failure checks (.github/workflows/check-cli-tests.yaml),
// each on a folder of this package's own holding a test of that
// folder's kind. The workflow writes `... && exit 1 || exit 0` after
// each failure line (a success fails the job): as there, the first such
// line ends its script, so Kyverno's job checks missing-policy only;
// missing-rule passes in verdict as in the reference CLI (a rule that
// gives no result counts as an exclusion).
var kyvernoSuite = []kyvernoLine{
	{line: "$(CLI_BIN) test https://github.com/kyverno/policies/main", code: 1},
	{line: "$(CLI_BIN) test ./test/cli/test", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-ruleless-policy", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-validating-policy", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-generating-policy", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-context-configmap-gpol", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-context-apicall-gpol", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-mutating-policy", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-context-configmap-mpol", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-context-apicall-mpol", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-image-validating-policy", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-deleting-policy", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-context-configmap-dpol", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-context-apicall-dpol", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-validating-admission-policy", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-mutating-admission-policy", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-mutate", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-generate", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/test-exceptions", code: 0},
	{line: `$(CLI_BIN) test ./test/cli/test --test-case-selector "policy=disallow-latest-tag, rule=require-image-tag, resource=test-require-image-tag-pass"`, code: 0},
	{line: "$(CLI_BIN) test ./test/cli/registry --registry", code: 0},
	{line: "$(CLI_BIN) test ./test/cli/scenarios_to_cli --registry", code: 0},
	{line: "$CLI_PATH test ./test/cli/test-fail/missing-policy && exit 1 || exit 0", code: 1},
	{line: "$CLI_PATH test ./test/cli/test-fail/missing-rule && exit 1 || exit 0", code: 0},
	{line: "$CLI_PATH test ./test/cli/test-fail/missing-resource && exit 1 || exit 0", code: 1},
	// test/conformance/chainsaw/cli/apply/warn-exit-code: the script's
	// error must be "exit status 3".
	{dir: "warn-exit-code", line: "kyverno apply policy.yaml --resource resource.yaml --audit-warn --warn-exit-code 3", code: 3},
}

// TestKyvernoDocs runs the documentation's lines; TestKyvernoSuite the
// suite's. Each group's outputs are one golden file: every line, its
// stdout, its stderr, its exit code, and the files it wrote.
func TestKyvernoDocs(t *testing.T) {
	for _, group := range []string{"apply", "test", "jp", "create"} {
		t.Run(group, func(t *testing.T) {
			runKyvernoLines(t, "testdata/kyvernodocs", kyvernoDocs[group], "kyverno-docs-"+group+".txt")
		})
	}
}

func TestKyvernoSuite(t *testing.T) {
	runKyvernoLines(t, "testdata/kyvernosuite", kyvernoSuite, "kyverno-suite.txt")
}

// runKyvernoLines runs the lines in a copy of inputs and compares what
// they did with the golden file.
func runKyvernoLines(t *testing.T, inputs string, lines []kyvernoLine, goldenName string) {
	t.Helper()
	goldenPath, err := filepath.Abs(filepath.Join("testdata/golden", goldenName))
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	if err := os.CopyFS(root, os.DirFS(inputs)); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, l := range lines {
		fmt.Fprintf(&out, "$ %s\n", l.line)
		dir := filepath.Join(root, l.dir)
		before := snapshot(t, root)
		code, stdout, stderr := runLine(t, dir, l)
		out.WriteString(stdout)
		if stderr != "" {
			fmt.Fprintf(&out, "[stderr]\n%s", stderr)
		}
		for _, f := range changed(t, root, before) {
			fmt.Fprintf(&out, "[wrote %s]\n%s", f.name, f.content)
		}
		fmt.Fprintf(&out, "[exit %d]\n\n", code)
		if code != l.code {
			t.Errorf("%s: exit %d, want %d\nstdout: %s\nstderr: %s", l.line, code, l.code, stdout, stderr)
		}
	}
	golden.Assert(t, goldenPath, mask(out.Bytes()))
}

// runLine runs one line in dir: its pipe's left side gives stdin, its
// program name the dialect.
func runLine(t *testing.T, dir string, l kyvernoLine) (int, string, string) {
	t.Helper()
	words := shellWords(t, strings.ReplaceAll(strings.TrimSuffix(l.line, " && exit 1 || exit 0"), "/path/to/", ""))
	var stdin []byte
	if bar := slices.Index(words, "|"); bar >= 0 {
		left := words[:bar]
		words = words[bar+1:]
		switch {
		case l.stdin != "":
			stdin = readInput(t, dir, l.stdin)
		case left[0] == "cat":
			stdin = readInput(t, dir, left[1])
		case left[0] == "echo":
			stdin = []byte(strings.Join(left[1:], " ") + "\n")
		default:
			t.Fatalf("%s: no input stands for %q", l.line, strings.Join(left, " "))
		}
	}
	d := DialectOf(words[0])
	switch words[0] {
	case "$(CLI_BIN)", "$CLI_PATH":
		d = DialectKyverno // cmd/cli/kubectl-kyverno/kubectl-kyverno
	}
	if d != DialectKyverno {
		t.Fatalf("%s: not a line of the Kyverno CLI", l.line)
	}
	t.Chdir(dir)
	var stdout, stderr bytes.Buffer
	code := MainDialect(context.Background(), d, words[1:], bytes.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func readInput(t *testing.T, dir, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// shellWords splits a command line as a POSIX shell does for the lines
// here: words separated by spaces, '...' and "..." quoting; a pipe is
// the word "|".
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == ' ':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '|' && !inWord:
			words = append(words, "|")
		case c == '\'' || c == '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				t.Fatalf("unbalanced quote in %q", line)
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

type writtenFile struct{ name, content string }

// snapshot reads every file below root.
func snapshot(t *testing.T, root string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(root, p)
		out[filepath.ToSlash(rel)] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// changed lists the files below root that are new or changed since
// before, by name.
func changed(t *testing.T, root string, before map[string]string) []writtenFile {
	t.Helper()
	var out []writtenFile
	for name, content := range snapshot(t, root) {
		if old, ok := before[name]; !ok || old != content {
			out = append(out, writtenFile{name, content})
		}
	}
	slices.SortFunc(out, func(a, b writtenFile) int { return strings.Compare(a.name, b.name) })
	return out
}

// mask replaces what differs from one run to the next: the Go release
// in verdict version, what the API server sets on the objects it stores.
func mask(b []byte) []byte {
	b = regexp.MustCompile(`(?m)^Go: .*$`).ReplaceAll(b, []byte("Go: <go release>"))
	b = regexp.MustCompile(`kube-api-access-[a-z0-9]+`).ReplaceAll(b, []byte("kube-api-access-<random>"))
	return regexp.MustCompile(`(?m)^(\s*(creationTimestamp|resourceVersion|uid|time)): .*$`).ReplaceAll(b, []byte("$1: <set by the API server>"))
}
