package helm_test

import (
	"context"
	"errors"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/testkit/helmbin"
)

// TestArgsParse runs each service's binary with exactly the arguments the
// chart renders (the default and the HA values, and the replay Job's):
// every flag exists and the configuration validates, so the process gets
// as far as looking for its in-cluster Kubernetes configuration, which a
// test process has none of, and exits 1, not 2 (a bad flag or
// configuration, service.ExitUsage).
func TestArgsParse(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the four services; skipped under -short")
	}
	root, err := helmbin.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	build := exec.CommandContext(t.Context(), "go", "build", "-o", bin+string(filepath.Separator),
		"./cmd/webhook", "./cmd/reporter", "./cmd/generator", "./cmd/cleaner")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	type run struct {
		args []string
		want int
	}
	cases := map[string]run{}
	all := maps.Clone(renders)
	all["kyverno-adopt"] = []string{"--set", "kyverno.mode=adopt"}
	all["monitoring"] = monitoringArgs // --kyverno-metrics
	for name, args := range all {
		m := parse(t, render(t, args...))
		for _, svc := range services {
			d, ok := m.deployments[svc]
			if !ok {
				continue // not deployed with these values (a shadow's generator and cleaner)
			}
			cases[name+"/"+svc] = run{args: d.Spec.Template.Spec.Containers[0].Args, want: platform.ExitFailed}
		}
	}
	for _, u := range decode(t, render(t, "--set", "reporter.replay.enabled=true", "--show-only", "templates/reporter/replay-job.yaml")) {
		cases["replay/reporter"] = run{args: containerArgs(t, u), want: platform.ExitFailed}
	}
	// The test tells a bad flag apart.
	bad := parse(t, render(t, "--set", "generator.extraArgs[0]=--no-such-flag"))
	cases["bad flag/generator"] = run{args: bad.deployments["generator"].Spec.Template.Spec.Containers[0].Args, want: platform.ExitUsage}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			svc := name[strings.LastIndex(name, "/")+1:]
			expanded := make([]string, len(tc.args))
			for i, a := range tc.args {
				expanded[i] = strings.ReplaceAll(a, "$(POD_NAME)", "verdict-"+svc+"-0")
			}
			ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, svc), expanded...)
			cmd.Dir = t.TempDir()
			cmd.Env = withoutCluster(os.Environ())
			out, err := cmd.CombinedOutput()
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != tc.want {
				t.Errorf("%s %s: %v, want exit %d\n%s", svc, strings.Join(expanded, " "), err, tc.want, out)
			}
			if tc.want != platform.ExitUsage && strings.Contains(string(out), "flag provided but not defined") {
				t.Errorf("unknown flag:\n%s", out)
			}
		})
	}
}

// withoutCluster drops what would let a process find a cluster.
func withoutCluster(env []string) []string {
	var out []string
	for _, e := range env {
		if strings.HasPrefix(e, "KUBERNETES_SERVICE_") || strings.HasPrefix(e, "KUBECONFIG=") {
			continue
		}
		out = append(out, e)
	}
	return out
}

// containerArgs returns the first container's args of a Job.
func containerArgs(t *testing.T, u *unstructured.Unstructured) []string {
	t.Helper()
	cs, _, err := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
	if err != nil || len(cs) == 0 {
		t.Fatalf("%s %s: no containers (%v)", u.GetKind(), u.GetName(), err)
	}
	c, _ := cs[0].(map[string]any)
	args, _, err := unstructured.NestedStringSlice(c, "args")
	if err != nil {
		t.Fatal(err)
	}
	return args
}
