package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/internal/testkit/golden"
)

// What `verdict create` writes is read back by verdict itself: a
// PolicyException exempts what its filter names, a values file and a
// user info file give apply its variables and requester, and a test file
// runs with verdict test and passes. Each file's form is pinned by a
// golden file; a malformed item is an error naming it.
func TestCreateRoundTrip(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"policy.yaml", "values-policy.yaml", "pods.yaml"} {
		b, err := os.ReadFile(filepath.Join("testdata/kyverno", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	in := func(name string) string { return filepath.Join(dir, name) }
	for _, c := range []struct {
		args   []string
		file   string
		golden string
	}{
		{[]string{"create", "exception", "exempt-batch", "--namespace", "jobs", "--policy-rules", "require-team,check-team", "--any", "kind=Pod,name=batch,namespace=jobs"}, "exception.yaml", "create-exception.yaml"},
		{[]string{"create", "values", "-g", "approved=redis", "--resource", "approved-images,batch,tier=batch", "--rule", "approved-images,image,owner=ops", "-n", "jobs,team=batch"}, "values.yaml", "create-values.yaml"},
		{[]string{"create", "user-info", "-u", "alice", "-g", "dev", "-c", "view"}, "user.yaml", "create-user-info.yaml"},
		{[]string{
			"create", "test", "-n", "generated", "-p", "values-policy.yaml", "-r", "pods.yaml", "-f", "values.yaml",
			"--fail", "approved-images,image,api,shop,Pod", "--fail", "approved-images,image,batch,jobs,Pod",
		}, "kyverno-test.yaml", "create-test.yaml"},
	} {
		if code, _, errOut := run(t, append(c.args, "-o", in(c.file))...); code != ExitOK {
			t.Fatalf("%v: exit %d: %s", c.args, code, errOut)
		}
		b, err := os.ReadFile(in(c.file))
		if err != nil {
			t.Fatal(err)
		}
		golden.Assert(t, "testdata/golden/"+c.golden, b)
	}

	code, out, _ := run(t, "apply", in("policy.yaml"), "-r", in("pods.yaml"), "-e", in("exception.yaml"), "--detailed")
	if code != ExitOK || !strings.Contains(out, "Pod/jobs/batch  skip    rule is skipped due to policy exception jobs/exempt-batch") {
		t.Fatalf("the created exception: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, "apply", in("values-policy.yaml"), "-r", in("pods.yaml"), "-f", in("values.yaml"), "-u", in("user.yaml"))
	if code != ExitFailed || !strings.Contains(out, "alice may run only redis, not nginx (batch)") {
		t.Fatalf("the created values and user info: exit %d\n%s", code, out)
	}
	code, out, _ = run(t, "test", dir)
	if code != ExitOK || !strings.Contains(out, "2 passed, 0 failed") {
		t.Fatalf("the created test: exit %d\n%s", code, out)
	}

	for _, bad := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "test", "--pass", "p,r,web"}, "give policy,rule,resource,namespace,kind"},
		{[]string{"create", "exception", "x", "--policy-rules", "p", "--any", "kind=Pod"}, "give policy,rule[,rule...]"},
		{[]string{"create", "exception", "x", "--policy-rules", "p,r", "--any", "color=red"}, "the keys are kind, name, namespace and operation"},
		{[]string{"create", "exception", "x", "--policy-rules", "p,r"}, "names its rules (--policy-rules) and the resources"},
		{[]string{"create", "values", "--rule", "p,r,novalue"}, `"novalue" is not name=value`},
		{[]string{"create", "user-info"}, "names its user (--username)"},
	} {
		if code, _, errOut := run(t, bad.args...); code != ExitUsage || !strings.Contains(errOut, bad.want) {
			t.Errorf("%v: exit %d, %q; want %q", bad.args, code, errOut, bad.want)
		}
	}
}
