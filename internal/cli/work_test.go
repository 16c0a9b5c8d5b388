package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/cli/work"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/queue"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"
)

// natsServer runs an embedded JetStream server; with provision, Verdict's
// streams and consumers exist on it, as after an install.
func natsServer(t *testing.T, provision bool) (*embedded.Server, *queue.Conn) {
	t.Helper()
	srv := natstest.Server(t)
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := bus.Connect(ctx, queue.WithURL(srv.ClientURL()), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if provision {
		if err := bus.Provision(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	return srv, c
}

// terminal is stdin on a terminal, answering with its text.
type terminal struct{ *strings.Reader }

func (terminal) Stat() (os.FileInfo, error) { return ttyInfo{}, nil }

type ttyInfo struct{}

func (ttyInfo) Name() string       { return "tty" }
func (ttyInfo) Size() int64        { return 0 }
func (ttyInfo) Mode() os.FileMode  { return os.ModeDevice | os.ModeCharDevice | 0o620 }
func (ttyInfo) ModTime() time.Time { return time.Time{} }
func (ttyInfo) IsDir() bool        { return false }
func (ttyInfo) Sys() any           { return nil }

func runTerminal(t *testing.T, answer string, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Main(t.Context(), args, terminal{strings.NewReader(answer)}, &out, &errOut)
	return code, out.String(), errOut.String()
}

type listed[T any] struct {
	Stream string `json:"stream"`
	Items  []T    `json:"items"`
	More   bool   `json:"more"`
}

func listJSON[T any](t *testing.T, url string, args ...string) listed[T] {
	t.Helper()
	code, out, errOut := run(t, append([]string{"work", "list", "--nats-url", url, "-o", "json"}, args...)...)
	if code != ExitOK {
		t.Fatalf("work list %v: exit %d: %s", args, code, errOut)
	}
	var l listed[T]
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("work list %v: %v\n%s", args, err, out)
	}
	return l
}

// publishItem publishes a generate work item as the webhook does.
func publishItem(t *testing.T, c *queue.Conn, trigger string) queue.Message {
	t.Helper()
	m, err := bus.WorkMessage(bus.WorkItem{
		Kind: bus.WorkGenerate, Policy: bus.PolicyRef{Key: "team-netpol", UID: "p1", ResourceVersion: "3"}, Rule: "default-deny",
		Trigger:   bus.ResourceRef{APIVersion: "v1", Kind: "Namespace", Name: trigger, UID: "uid-" + trigger},
		Operation: "CREATE", RequestUID: "req-" + trigger, Timestamp: time.Now(),
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.PublishSync(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	return m
}

// The operator's path through a poison item: a real runner dead-letters
// it; `work list --dead` shows it with its reason, origin and attempts;
// `work retry` re-queues it (the original's id is still in the duplicate
// window: the re-queue is not swallowed); a handler that now succeeds
// takes it, and the dead letter is gone.
func TestWorkRetryDeadLetter(t *testing.T) {
	srv, c := natsServer(t, true)
	url := srv.ClientURL()

	var fixed atomic.Bool
	var mu sync.Mutex
	var took []string
	r, err := c.NewRunner(bus.StreamWork, bus.ConsumerGenerator, func(_ context.Context, m *queue.Msg) queue.Outcome {
		var item bus.WorkItem
		if err := json.Unmarshal(m.Data, &item); err != nil {
			return queue.Poison(err.Error())
		}
		if item.Trigger.Name == "team-poison" && !fixed.Load() {
			return queue.Poison("namespaceForbidden: team-netpol may not generate into team-poison")
		}
		mu.Lock()
		took = append(took, item.Trigger.Name)
		mu.Unlock()
		return queue.Done()
	}, queue.WithBacklogInterval(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("runner: %v", err)
		}
	}()

	poison := publishItem(t, c, "team-poison")
	publishItem(t, c, "team-ok")
	testkit.EventuallyTrue(t, 15*time.Second, "the dead letter and the good item", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(took) == 1 && len(listJSON[work.DeadView](t, url, "--dead").Items) == 1
	})

	code, out, errOut := run(t, "work", "list", "--dead", "--nats-url", url)
	if code != ExitOK || !strings.Contains(out, "poison: namespaceForbidden: team-netpol may not generate into team-poison") ||
		!strings.Contains(out, poison.Subject) || errOut != "" {
		t.Fatalf("work list --dead: exit %d\n%s%s", code, out, errOut)
	}
	dead := listJSON[work.DeadView](t, url, "--dead", "--kind", "generate").Items
	if len(dead) != 1 {
		t.Fatalf("dead letters of generate work: %+v", dead)
	}
	d := dead[0]
	if d.Subject != poison.Subject || d.Stream != bus.StreamWork || d.Attempts != 1 || d.Consumer != bus.ConsumerGenerator ||
		d.Policy != "team-netpol" || d.Rule != "default-deny" || d.Trigger != "Namespace/team-poison" || d.Origin != "admission CREATE" ||
		d.Time.IsZero() || d.Kind != "generate" {
		t.Fatalf("dead letter %+v", d)
	}
	if other := listJSON[work.DeadView](t, url, "--dead", "--kind", "scan").Items; len(other) != 0 {
		t.Fatalf("dead scan work: %+v", other)
	}

	fixed.Store(true)
	code, out, errOut = run(t, "work", "retry", strconv.FormatUint(d.Sequence, 10), "--nats-url", url)
	if code != ExitOK || !strings.Contains(out, "re-queued dead letter "+strconv.FormatUint(d.Sequence, 10)+" to "+poison.Subject) ||
		!strings.HasSuffix(out, "1 re-queued\n") {
		t.Fatalf("work retry: exit %d\n%s%s", code, out, errOut)
	}
	testkit.EventuallyTrue(t, 15*time.Second, "the re-queued item taken", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(took) == 2 && took[1] == "team-poison"
	})
	if left := listJSON[work.DeadView](t, url, "--dead").Items; len(left) != 0 {
		t.Fatalf("dead letters after the retry: %+v", left)
	}
	if pending := listJSON[work.PendingView](t, url).Items; len(pending) != 0 {
		t.Fatalf("pending after the retry: %+v", pending)
	}
	// The dead letter is gone: retrying it again is bad input.
	if code, _, errOut := run(t, "work", "retry", strconv.FormatUint(d.Sequence, 10), "--nats-url", url); code != ExitUsage ||
		!strings.Contains(errOut, "no dead letter at sequence") {
		t.Fatalf("second retry: exit %d: %s", code, errOut)
	}
}

// `work retry --all --kind` re-queues every dead letter of that kind and
// leaves the others; sequences that name no dead letter change nothing.
func TestWorkRetryAllAndBadSequences(t *testing.T) {
	srv, c := natsServer(t, true)
	url := srv.ClientURL()
	for _, origin := range []string{"verdict.work.generate.a", "verdict.work.scan.b", "verdict.work.generate.c"} {
		deadLetter(t, c, origin)
	}
	dead := listJSON[work.DeadView](t, url, "--dead").Items
	if len(dead) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dead))
	}

	tests := map[string]struct {
		args []string
		want string
	}{
		"not a number":        {args: []string{"x7"}, want: `bad dead-letter sequence "x7"`},
		"zero and fractions":  {args: []string{"0", "1.5"}, want: `bad dead-letter sequence "0", "1.5"`},
		"no such dead letter": {args: []string{strconv.FormatUint(dead[0].Sequence, 10), "99"}, want: "no dead letter at sequence 99"},
		"nothing to retry":    {want: "give the sequences"},
		"both":                {args: []string{"1", "--all"}, want: "not both"},
		"kind without all":    {args: []string{"1", "--kind", "scan"}, want: "--kind goes with --all"},
		"unknown kind":        {args: []string{"--all", "--kind", "sweep"}, want: `--kind "sweep"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := run(t, append([]string{"work", "retry", "--nats-url", url}, tc.args...)...)
			if code != ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errOut, ExitUsage, tc.want)
			}
		})
	}
	if n := len(listJSON[work.DeadView](t, url, "--dead").Items); n != 3 {
		t.Fatalf("%d dead letters after bad retries, want all 3 kept", n)
	}

	code, out, errOut := run(t, "work", "retry", "--all", "--kind", "generate", "--nats-url", url)
	if code != ExitOK || !strings.HasSuffix(out, "2 re-queued\n") {
		t.Fatalf("retry --all --kind generate: exit %d\n%s%s", code, out, errOut)
	}
	left := listJSON[work.DeadView](t, url, "--dead").Items
	if len(left) != 1 || left[0].Kind != "scan" {
		t.Fatalf("left: %+v, want the scan dead letter", left)
	}
	pending := listJSON[work.PendingView](t, url, "--kind", "generate").Items
	if len(pending) != 2 || pending[0].Key != "a" || pending[1].Key != "c" || pending[0].State != work.StateWaiting ||
		!strings.Contains(pending[0].Origin, "re-queued from dead letter") {
		t.Fatalf("re-queued: %+v", pending)
	}
}

// deadLetter writes a dead letter of origin as a runner does.
func deadLetter(t *testing.T, c *queue.Conn, origin string) {
	t.Helper()
	h := map[string][]string{
		queue.HeaderDeadReason: {"poison: test"}, queue.HeaderDeadSubject: {origin}, queue.HeaderDeadStream: {bus.StreamWork},
		queue.HeaderDeadSequence: {"1"}, queue.HeaderDeadDeliveries: {"3"}, queue.HeaderDeadConsumer: {"test"},
		queue.HeaderDeadTime: {time.Now().UTC().Format(time.RFC3339Nano)},
	}
	if _, err := c.PublishSync(t.Context(), queue.Message{Subject: bus.DeadSubject(origin), ID: queue.MsgID("dead", origin), Data: []byte(origin), Header: h}); err != nil {
		t.Fatal(err)
	}
}

// Purge refuses without --yes when stdin is not a terminal, asks on a
// terminal (no answer, or n, removes nothing), and says how many it
// removed.
func TestWorkPurge(t *testing.T) {
	srv, c := natsServer(t, true)
	url := srv.ClientURL()
	for _, origin := range []string{"verdict.work.generate.a", "verdict.work.scan.b"} {
		deadLetter(t, c, origin)
	}
	publishItem(t, c, "team-a")
	publishItem(t, c, "team-b")
	count := func(args ...string) int { return len(listJSON[work.DeadView](t, url, args...).Items) }

	code, _, errOut := run(t, "work", "purge", "--dead", "--nats-url", url)
	if code != ExitUsage || !strings.Contains(errOut, "refusing to purge every dead letter in VERDICT_DEAD without --yes: stdin is not a terminal") {
		t.Fatalf("purge without --yes off a terminal: exit %d: %s", code, errOut)
	}
	for _, answer := range []string{"", "n\n", "nope\n"} {
		code, _, errOut = runTerminal(t, answer, "work", "purge", "--dead", "--nats-url", url)
		if code != ExitFailed || !strings.Contains(errOut, "Purge every dead letter in VERDICT_DEAD on "+url+"? This cannot be undone. [y/N]") ||
			!strings.Contains(errOut, "nothing purged") {
			t.Fatalf("purge answered %q: exit %d: %s", answer, code, errOut)
		}
	}
	if n := count("--dead"); n != 2 {
		t.Fatalf("%d dead letters after refused purges, want 2", n)
	}

	code, out, errOut := runTerminal(t, "y\n", "work", "purge", "--dead", "--kind", "scan", "--nats-url", url)
	if code != ExitOK || out != "1 purged\n" {
		t.Fatalf("purge of dead scan work, confirmed: exit %d\n%s%s", code, out, errOut)
	}
	if n := count("--dead", "--kind", "generate"); n != 1 {
		t.Fatalf("%d dead generate letters, want 1 kept", n)
	}
	code, out, errOut = run(t, "work", "purge", "--kind", "generate", "--yes", "--nats-url", url)
	if code != ExitOK || out != "2 purged\n" {
		t.Fatalf("purge of pending generate work: exit %d\n%s%s", code, out, errOut)
	}
	if n := len(listJSON[work.PendingView](t, url).Items); n != 0 {
		t.Fatalf("%d pending after the purge", n)
	}
	if code, _, errOut := run(t, "work", "purge", "--yes", "--nats-url", url); code != ExitUsage || !strings.Contains(errOut, "say what to purge") {
		t.Fatalf("purge of nothing named: exit %d: %s", code, errOut)
	}
}

// NATS that does not answer, and a NATS without Verdict's streams, give
// errors that say what is wrong and where.
func TestWorkClearErrors(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "nats://" + l.Addr().String()
	l.Close()
	start := time.Now()
	code, _, errOut := run(t, "work", "list", "--nats-url", closed, "--timeout", "300ms")
	if code != ExitFailed || !strings.Contains(errOut, "cannot reach NATS at "+closed+" within 300ms") ||
		!strings.Contains(errOut, "connection refused") {
		t.Fatalf("unreachable: exit %d: %s", code, errOut)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("unreachable NATS took %s to report", d)
	}
	code, _, errOut = run(t, "work", "list", "--nats-url", "nats://operator:s3cret@"+l.Addr().String(), "--timeout", "100ms")
	if code != ExitFailed || strings.Contains(errOut, "s3cret") {
		t.Fatalf("the password is shown: exit %d: %s", code, errOut)
	}

	srv, _ := natsServer(t, false)
	url := srv.ClientURL()
	tests := map[string]struct {
		args []string
		want string
	}{
		"list dead":  {args: []string{"list", "--dead"}, want: "VERDICT_DEAD does not exist on " + url + ": is Verdict installed against this NATS?"},
		"list":       {args: []string{"list"}, want: "VERDICT_WORK does not exist on " + url + ": is Verdict installed against this NATS?"},
		"retry":      {args: []string{"retry", "1"}, want: "VERDICT_DEAD does not exist on " + url},
		"retry all":  {args: []string{"retry", "--all"}, want: "VERDICT_DEAD does not exist on " + url},
		"purge work": {args: []string{"purge", "--kind", "scan", "--yes"}, want: "VERDICT_WORK does not exist on " + url},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := run(t, append(append([]string{"work"}, tc.args...), "--nats-url", url)...)
			if code != ExitFailed || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errOut, ExitFailed, tc.want)
			}
		})
	}
}

// Bad flags are usage errors, found before NATS is asked anything.
func TestWorkUsage(t *testing.T) {
	tests := map[string]struct {
		args []string
		want string
	}{
		"unknown kind":   {args: []string{"list", "--kind", "sweep"}, want: `--kind "sweep": generate, mutate, cleanup or scan`},
		"output":         {args: []string{"list", "-o", "yaml"}, want: `output "yaml"`},
		"limit":          {args: []string{"list", "--limit", "-1"}, want: "--limit -1"},
		"two auths":      {args: []string{"list", "--nats-credentials", "a", "--nats-nkey-file", "b"}, want: "give one"},
		"timeout":        {args: []string{"list", "--timeout", "0s"}, want: "--timeout 0s"},
		"list arguments": {args: []string{"list", "extra"}, want: "unknown command"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			code, _, errOut := run(t, append([]string{"work", "--nats-url", "nats://127.0.0.1:1"}, tc.args...)...)
			if code != ExitUsage || !strings.Contains(errOut, tc.want) {
				t.Fatalf("exit %d, stderr %q; want %d and %q", code, errOut, ExitUsage, tc.want)
			}
		})
	}
}

// The list's limit cuts the oldest first and says so on stderr.
func TestWorkListLimit(t *testing.T) {
	srv, c := natsServer(t, true)
	url := srv.ClientURL()
	for _, name := range []string{"team-1", "team-2", "team-3"} {
		publishItem(t, c, name)
	}
	code, out, errOut := run(t, "work", "list", "--limit", "2", "--nats-url", url)
	if code != ExitOK || strings.Count(out, "\n") != 3 || !strings.Contains(out, "Namespace/team-1") || strings.Contains(out, "team-3") ||
		errOut != "more than 2: the oldest 2 are shown (--limit 0 lists all)\n" {
		t.Fatalf("list --limit 2: exit %d\n%s%s", code, out, errOut)
	}
	l := listJSON[work.PendingView](t, url, "--limit", "0")
	if len(l.Items) != 3 || l.More || l.Items[0].State != work.StateWaiting || l.Items[0].Consumer != bus.ConsumerGenerator {
		t.Fatalf("list --limit 0: %+v", l)
	}
}
