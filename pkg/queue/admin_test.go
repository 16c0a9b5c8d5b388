package queue

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/verdict-dev/verdict/internal/testkit"
)

// A poison item dead-lettered by a real runner is listed with its reason,
// origin and attempts; Requeue puts it back under a fresh id (the
// original's is still in the duplicate window), keeps its own headers and
// drops the dead-letter ones; a handler that now succeeds takes it, and
// the dead letter is gone. A second Requeue of the same sequence finds
// nothing.
func TestAdminRequeue(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx := context.Background()

	var fixed atomic.Bool
	var mu sync.Mutex
	var taken []*Msg
	stop := startRunner(t, c, consumerGenerator, func(_ context.Context, m *Msg) Outcome {
		if string(m.Data) == "bad" && !fixed.Load() {
			return Poison("trigger team/a not found")
		}
		mu.Lock()
		taken = append(taken, m)
		mu.Unlock()
		return Done()
	}, WithMaxDeliver(2), WithBacklogInterval(time.Hour))
	defer func() { _ = stop() }()

	bad := workMsg(t, workGenerate, "team/p/rule/uid-bad")
	bad.Data = []byte("bad")
	bad.Header = nats.Header{"Traceparent": []string{"00-abc-def-01"}}
	if _, err := c.PublishSync(ctx, bad); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 10*time.Second, "the dead letter", func() bool { return streamMsgs(t, c, streamDead) == 1 })

	dead, more, err := c.ListDead(ctx)
	if err != nil || more || len(dead) != 1 {
		t.Fatalf("ListDead: %d entries, more %v, %v; want 1", len(dead), more, err)
	}
	d := dead[0]
	if d.Invalid != nil || d.Reason != "poison: trigger team/a not found" || d.Subject != bad.Subject ||
		d.Stream != streamWork || d.Deliveries != 1 || d.Consumer != consumerGenerator || string(d.Data) != "bad" || d.Time.IsZero() {
		t.Fatalf("dead letter %+v", d)
	}
	if d.Kind != workGenerate || d.Key != "team/p/rule/uid-bad" {
		t.Fatalf("work of the dead letter: %q %q", d.Kind, d.Key)
	}
	if none, _, err := c.ListDead(ctx, WithListKind(workScan)); err != nil || len(none) != 0 {
		t.Fatalf("dead scan work: %v, %v; want none", none, err)
	}

	fixed.Store(true)
	res, err := c.Requeue(ctx, d.Sequence)
	if err != nil {
		t.Fatalf("Requeue: %v", err)
	}
	if res.Stream != streamWork || res.Subject != bad.Subject || res.Duplicate || res.DeadSequence != d.Sequence {
		t.Fatalf("requeued %+v", res)
	}
	testkit.EventuallyTrue(t, 10*time.Second, "the re-queued item taken", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(taken) == 1
	})
	m := taken[0]
	if string(m.Data) != "bad" || m.Subject != bad.Subject || m.Header.Get("Traceparent") != "00-abc-def-01" ||
		m.Header.Get(HeaderRequeued) == "" || m.Header.Get(HeaderDeadReason) != "" || m.Header.Get(nats.MsgIdHdr) == bad.ID {
		t.Fatalf("re-queued message %s %q %v", m.Subject, m.Data, m.Header)
	}
	if n := streamMsgs(t, c, streamDead); n != 0 {
		t.Fatalf("%d dead letters after the re-queue, want 0", n)
	}
	if _, err := c.DeadAt(ctx, d.Sequence); !errors.Is(err, ErrNoDeadLetter) {
		t.Fatalf("DeadAt after re-queue: %v, want ErrNoDeadLetter", err)
	}
	if _, err := c.Requeue(ctx, d.Sequence); !errors.Is(err, ErrNoDeadLetter) {
		t.Fatalf("second Requeue: %v, want ErrNoDeadLetter", err)
	}
	if _, err := c.Requeue(ctx, 0); !errors.Is(err, ErrNoDeadLetter) {
		t.Fatalf("Requeue(0): %v, want ErrNoDeadLetter", err)
	}
}

// ListWork shows the pending items oldest first, with their kind, key and
// consumer; an item a handler holds is delivered, one nobody took is not;
// kind and limit filter, and more says the limit cut the list.
func TestAdminListWork(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx := context.Background()

	for _, m := range []Message{
		workMsg(t, workGenerate, "team/p/r/held"),
		workMsg(t, workScan, "policy/a"),
		workMsg(t, workScan, "policy/b"),
		workMsg(t, workCleanup, "ns/c"),
	} {
		if _, err := c.PublishSync(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	stop := startRunner(t, c, consumerGenerator, func(ctx context.Context, m *Msg) Outcome {
		held <- struct{}{}
		select {
		case <-release:
		case <-ctx.Done():
		}
		return Done()
	}, WithBacklogInterval(time.Hour))
	defer func() { close(release); _ = stop() }()
	<-held

	items, more, err := c.ListWork(ctx)
	if err != nil || more {
		t.Fatalf("ListWork: more %v, %v", more, err)
	}
	var got []string
	for _, it := range items {
		got = append(got, string(it.Kind)+" "+it.Key+" "+it.Consumer+" "+map[bool]string{true: "delivered", false: "waiting"}[it.Delivered])
		if it.Published.IsZero() || it.Sequence == 0 {
			t.Errorf("item %+v: no sequence or time", it)
		}
	}
	want := []string{
		"generate team/p/r/held generator delivered",
		"scan policy/a scanner waiting",
		"scan policy/b scanner waiting",
		"cleanup ns/c cleaner waiting",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("ListWork:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	scans, more, err := c.ListWork(ctx, WithListKind(workScan), WithListLimit(1))
	if err != nil || !more || len(scans) != 1 || scans[0].Key != "policy/a" {
		t.Fatalf("one scan item: %+v, more %v, %v; want policy/a and more", scans, more, err)
	}
	if _, _, err := c.ListWork(ctx, WithListKind("sweep")); !errors.Is(err, ErrInvalidKind) {
		t.Fatalf("unknown kind: %v", err)
	}
	if _, _, err := c.ListWork(ctx, WithListLimit(-1)); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("negative limit: %v", err)
	}
}

// PurgeWork removes one kind of pending work and PurgeDead the dead
// letters (of one kind, or all), each saying how many.
func TestAdminPurge(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx := context.Background()
	for _, m := range []Message{workMsg(t, workScan, "a"), workMsg(t, workScan, "b"), workMsg(t, workCleanup, "c")} {
		if _, err := c.PublishSync(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for i, origin := range []string{"app.work.scan.x", "app.work.generate.y", "app.work.generate.z"} {
		h := nats.Header{}
		h.Set(HeaderDeadSubject, origin)
		h.Set(HeaderDeadStream, streamWork)
		if _, err := c.PublishSync(ctx, Message{Subject: testTopology.DeadSubject(origin), ID: MsgID("dead", origin), Header: h, Data: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	if n, err := c.PurgeWork(ctx, workScan); err != nil || n != 2 {
		t.Fatalf("PurgeWork(scan): %d, %v; want 2", n, err)
	}
	if left, _, err := c.ListWork(ctx); err != nil || len(left) != 1 || left[0].Kind != workCleanup {
		t.Fatalf("left: %+v, %v; want the cleanup item", left, err)
	}
	if n, err := c.PurgeDead(ctx, workGenerate); err != nil || n != 2 {
		t.Fatalf("PurgeDead(generate): %d, %v; want 2", n, err)
	}
	if n, err := c.PurgeDead(ctx, ""); err != nil || n != 1 {
		t.Fatalf("PurgeDead(all): %d, %v; want 1", n, err)
	}
	if _, err := c.PurgeWork(ctx, ""); !errors.Is(err, ErrInvalidKind) {
		t.Fatalf("PurgeWork of no kind: %v, want ErrInvalidKind", err)
	}
}

// A message in DEAD without the dead-letter headers is listed as
// invalid, and Requeue refuses it.
func TestAdminInvalidDeadLetter(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx := context.Background()
	ack, err := c.PublishSync(ctx, Message{Subject: "app.dead.by.hand", ID: "x", Data: []byte("?")})
	if err != nil {
		t.Fatal(err)
	}
	dead, _, err := c.ListDead(ctx)
	if err != nil || len(dead) != 1 || dead[0].Invalid == nil {
		t.Fatalf("ListDead: %+v, %v; want one invalid entry", dead, err)
	}
	if _, err := c.Requeue(ctx, ack.Sequence); !errors.Is(err, ErrNoDeadLetter) {
		t.Fatalf("Requeue of a hand-made message: %v, want ErrNoDeadLetter", err)
	}
	if streamMsgs(t, c, streamDead) != 1 {
		t.Fatal("the refused message was deleted")
	}
}

// Without provisioning, the admin calls say which stream is missing.
func TestAdminNoStream(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	ctx := context.Background()
	if _, _, err := c.ListDead(ctx); !errors.Is(err, ErrNoStream) || !strings.Contains(err.Error(), streamDead) {
		t.Fatalf("ListDead: %v, want ErrNoStream naming %s", err, streamDead)
	}
	if _, _, err := c.ListWork(ctx); !errors.Is(err, ErrNoStream) || !strings.Contains(err.Error(), streamWork) {
		t.Fatalf("ListWork: %v, want ErrNoStream naming %s", err, streamWork)
	}
	if _, err := c.Requeue(ctx, 1); !errors.Is(err, ErrNoStream) {
		t.Fatalf("Requeue: %v, want ErrNoStream", err)
	}
	if _, err := c.PurgeDead(ctx, ""); !errors.Is(err, ErrNoStream) {
		t.Fatalf("PurgeDead: %v, want ErrNoStream", err)
	}
}

func TestSubjectMatches(t *testing.T) {
	tests := map[string]struct {
		filter, subject string
		want            bool
	}{
		"literal":             {"a.b", "a.b", true},
		"other literal":       {"a.b", "a.c", false},
		"star":                {"a.*.c", "a.b.c", true},
		"star is one token":   {"a.*", "a.b.c", false},
		"tail":                {"a.>", "a.b.c", true},
		"tail needs a token":  {"a.>", "a", false},
		"longer filter":       {"a.b.c", "a.b", false},
		"longer subject":      {"a.b", "a.b.c", false},
		"work filter":         {testTopology.WorkFilter(workGenerate), "app.work.generate.k", true},
		"other kind":          {testTopology.WorkFilter(workGenerate), "app.work.mutate.k", false},
		"everything":          {">", "app.dead.work.scan.x", true},
		"dead filter of kind": {testTopology.DeadFilter(workScan), testTopology.DeadSubject("app.work.scan.x"), true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := SubjectMatches(tc.filter, tc.subject); got != tc.want {
				t.Fatalf("SubjectMatches(%q, %q) = %v", tc.filter, tc.subject, got)
			}
		})
	}
}
