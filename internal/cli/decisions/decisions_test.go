package decisions

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/golden"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// at is the time of the test's decisions (the table shows it).
var at = time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)

// logged are the decisions of the test's log: a denial with two
// findings, a warning, an admission, a mutation with its patch, a
// cluster-scoped denial by another user, and a dry run.
func logged() []bus.Decision {
	pod := func(ns, name string) bus.DecisionResource {
		return bus.DecisionResource{Version: "v1", Kind: "Pod", Resource: "pods", Namespace: ns, Name: name}
	}
	alice := bus.DecisionUser{Username: "alice", Groups: []string{"devs"}}
	return []bus.Decision{
		{RequestUID: "r1", Webhook: "validate", Operation: "CREATE", Resource: pod("team-a", "web-1"), User: alice, Outcome: bus.DecisionDenied,
			Message: "resource Pod/team-a/web-1 was blocked",
			Findings: []bus.Finding{
				{Policy: "disallow-latest-tag", Rule: "validate-image-tag", Action: bus.ActionDeny, Message: "Using a mutable image tag e.g. 'latest' is not allowed."},
				{Policy: "require-labels", Rule: "check-team", Action: bus.ActionDeny, Message: "label\n'team' is required"},
			}, Time: at},
		{RequestUID: "r2", Webhook: "validate", Operation: "UPDATE", Resource: pod("team-a", "web-2"), User: alice, Outcome: bus.DecisionWarned,
			Findings: []bus.Finding{{Policy: "team-a/audit-probes", Rule: "liveness", Action: bus.ActionWarn, Message: "a liveness probe is recommended"}}, Time: at.Add(time.Second)},
		{RequestUID: "r3", Webhook: "validate", Operation: "CREATE", Resource: pod("team-b", "db-0"), User: bus.DecisionUser{Username: "system:serviceaccount:team-b:deployer"},
			Outcome: bus.DecisionAllowed, Time: at.Add(2 * time.Second)},
		{RequestUID: "r4", Webhook: "mutate", Operation: "CREATE", Resource: pod("team-b", "db-1"), User: alice, Outcome: bus.DecisionPatched,
			Findings: []bus.Finding{{Policy: "add-team-label", Rule: "label", Action: bus.ActionMutate, Message: "mutated resource"}},
			Patch:    []byte(`[{"op":"add","path":"/metadata/labels/team","value":"b"}]`), Time: at.Add(3 * time.Second)},
		{RequestUID: "r5", Webhook: "validate", Operation: "CREATE", Resource: bus.DecisionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding", Resource: "clusterrolebindings", Name: "everyone-admin"},
			User: bus.DecisionUser{Username: "bob"}, Outcome: bus.DecisionDenied,
			Findings: []bus.Finding{{Policy: "ValidatingPolicy:no-wildcard-bindings", Action: bus.ActionDeny, Message: "binding system:authenticated to cluster-admin is not allowed"}},
			Time:     at.Add(4 * time.Second)},
		{RequestUID: "r6", Webhook: "validate", Operation: "DELETE", Resource: pod("team-a", "web-1"), User: alice, DryRun: true, Outcome: bus.DecisionAllowed, Time: at.Add(5 * time.Second)},
	}
}

// logServer runs a nats-server with VERDICT_DECISIONS holding logged()
// and a forged message (a team-b decision put on team-a's subject), and
// returns its URL.
func logServer(t *testing.T) string {
	t.Helper()
	srv := natstest.Server(t)
	ctx := t.Context()
	c, err := bus.Connect(ctx, queue.WithURL(srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := bus.Provision(ctx, c, bus.WithConsumers()); err != nil {
		t.Fatal(err)
	}
	for i, d := range logged() {
		m, err := bus.DecisionMessage(d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.PublishSync(ctx, m); err != nil {
			t.Fatal(err)
		}
		if i == 2 {
			forged := m
			forged.Subject, forged.ID = bus.DecisionSubject("team-a", bus.DecisionAllowed), "forged"
			if _, err := c.PublishSync(ctx, forged); err != nil {
				t.Fatal(err)
			}
		}
	}
	return srv.ClientURL()
}

// run runs `verdict decisions` with args and returns stdout and stderr.
func run(t *testing.T, ctx context.Context, url string, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	cmd := New(ctx, &out, time.Now)
	cmd.SetArgs(append([]string{"--nats-url=" + url}, args...))
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SilenceUsage, cmd.SilenceErrors = true, true
	err := cmd.ExecuteContext(ctx)
	return out.String(), errOut.String(), err
}

// TestDecisionsGolden pins the table and the JSON lines users read and
// parse, with each filter; the forged message is reported on stderr and
// never shown as a decision.
func TestDecisionsGolden(t *testing.T) {
	url := logServer(t)
	for _, tc := range []struct {
		file string
		args []string
		// want is how many decisions the output shows.
		want int
	}{
		{file: "all.txt", want: 6},
		{file: "all.jsonl", args: []string{"-o", "json"}, want: 6},
		{file: "denied.txt", args: []string{"--outcome", "denied"}, want: 2},
		{file: "team-a.txt", args: []string{"-n", "team-a"}, want: 3},
		{file: "cluster-scoped.txt", args: []string{"--cluster-scoped"}, want: 1},
		{file: "policy.txt", args: []string{"--policy", "audit-probes"}, want: 1},
		{file: "user-kind.txt", args: []string{"--user", "alice", "--kind", "pods", "--operation", "create"}, want: 2},
		{file: "limit.txt", args: []string{"--limit", "2"}, want: 2},
	} {
		t.Run(tc.file, func(t *testing.T) {
			out, errOut, err := run(t, t.Context(), url, tc.args...)
			if err != nil {
				t.Fatalf("%v\n%s", err, errOut)
			}
			golden.Assert(t, "testdata/golden/"+tc.file, []byte(out))
			rows := strings.Count(out, "\n")
			if !strings.HasSuffix(tc.file, ".jsonl") {
				rows-- // the header
			}
			if rows != tc.want {
				t.Errorf("%d decisions shown, want %d", rows, tc.want)
			}
			// The forged message sits on team-a's "allowed" subject: every
			// read whose subject filter (namespace, outcome) takes it
			// reports it.
			forged := strings.Contains(errOut, "is not a decision")
			if want := tc.file != "denied.txt" && tc.file != "cluster-scoped.txt"; forged != want {
				t.Errorf("forged message reported %v, want %v: stderr %q", forged, want, errOut)
			}
			if strings.Count(out, "\"requestUid\":\"r3\"") > 1 {
				t.Error("the forged copy of r3 was shown")
			}
			if tc.file == "limit.txt" && !strings.Contains(errOut, "4 older decisions not shown") {
				t.Errorf("stderr %q", errOut)
			}
		})
	}
}

// TestDecisionsFollow: --follow shows the log, then each decision
// stored afterwards, until interrupted (exit 0).
func TestDecisionsFollow(t *testing.T) {
	url := logServer(t)
	ctx, cancel := context.WithCancel(t.Context())
	type result struct {
		out string
		err error
	}
	done := make(chan result, 1)
	var out syncBuffer
	go func() {
		cmd := New(ctx, &out, time.Now)
		cmd.SetArgs([]string{"--nats-url=" + url, "--follow", "-o", "json", "--outcome", "denied"})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SilenceUsage, cmd.SilenceErrors = true, true
		err := cmd.ExecuteContext(ctx)
		done <- result{out.String(), err}
	}()
	waitFor(t, &out, 2)
	c, err := bus.Connect(t.Context(), queue.WithURL(url))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	d := logged()[0]
	d.RequestUID, d.Time = "r7", at.Add(time.Minute)
	m, err := bus.DecisionMessage(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PublishSync(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	waitFor(t, &out, 3)
	cancel()
	r := <-done
	if r.err != nil {
		t.Fatalf("interrupted follow: %v", r.err)
	}
	if !strings.Contains(r.out, `"requestUid":"r7"`) {
		t.Fatalf("the new decision is not shown:\n%s", r.out)
	}
}

// TestDecisionsUsage: bad flags are usage errors; an unreachable NATS is
// a failure that names the server.
func TestDecisionsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--outcome", "maybe"}, {"-o", "yaml"}, {"--since", "-1h"}, {"--limit", "-1"}, {"--cluster-scoped", "-n", "a"},
	} {
		if _, _, err := run(t, t.Context(), "nats://127.0.0.1:1", args...); err == nil || strings.Contains(err.Error(), "reach") {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
	_, _, err := run(t, t.Context(), "nats://127.0.0.1:1", "--timeout", "200ms")
	if err == nil || !strings.Contains(err.Error(), "cannot reach NATS at nats://127.0.0.1:1") {
		t.Fatalf("%v", err)
	}
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader at once.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitFor waits until out has n lines.
func waitFor(t *testing.T, out *syncBuffer, n int) {
	t.Helper()
	testkit.EventuallyTrue(t, 10*time.Second, fmt.Sprintf("%d lines", n), func() bool { return strings.Count(out.String(), "\n") >= n })
}
