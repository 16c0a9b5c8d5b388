package queue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdict-dev/verdict/internal/testkit"
)

// ticks counts the ticks of kind on key that WORK holds, and
// returns the last one's body.
func ticks(t *testing.T, c *Conn, kind WorkKind, key string) (uint64, string) {
	t.Helper()
	ctx := context.Background()
	subject, err := workSubject(kind, key)
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.JetStream().Stream(ctx, streamWork)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		t.Fatal(err)
	}
	n := info.State.Subjects[subject]
	if n == 0 {
		return 0, ""
	}
	m, err := c.LastMsg(ctx, streamWork, subject)
	if err != nil {
		t.Fatal(err)
	}
	return n, string(m.Data)
}

// TestSchedules: a schedule put with PutSchedule fires ticks that
// WORK takes as work of its kind and key; putting the same
// schedule again writes nothing; changing it replaces it (the ticks carry
// the new body); writers racing end with one schedule; a guard keeps a
// schedule; deleting it stops the ticks.
func TestSchedules(t *testing.T) {
	srv := runServer(t)
	c := connect(t, srv.ClientURL())
	provision(t, c)
	ctx := t.Context()

	s := Schedule{Kind: workCleanup, Key: "team/old.pods", Spec: "@every 1s", Data: []byte("v1")}
	if ch, err := c.PutSchedule(ctx, s, nil); err != nil || ch != ScheduleCreated {
		t.Fatalf("put: %s, %v", ch, err)
	}
	got, err := c.GetSchedule(ctx, workCleanup, "team/old.pods")
	if err != nil || got.Spec != "@every 1s" || string(got.Data) != "v1" || got.Sequence == 0 {
		t.Fatalf("get: %+v, %v", got, err)
	}
	testkit.EventuallyTrue(t, 5*time.Second, "a tick", func() bool { n, body := ticks(t, c, workCleanup, "team/old.pods"); return n >= 1 && body == "v1" })

	if ch, err := c.PutSchedule(ctx, s, nil); err != nil || ch != ScheduleUnchanged {
		t.Fatalf("same put: %s, %v", ch, err)
	}
	if again, _ := c.GetSchedule(ctx, workCleanup, "team/old.pods"); again.Sequence != got.Sequence {
		t.Fatalf("an unchanged schedule was written again: sequence %d, was %d", again.Sequence, got.Sequence)
	}

	// A six-field cron spec (every second), another body: replaced.
	s2 := s
	s2.Spec, s2.Data = "* * * * * *", []byte("v2")
	if ch, err := c.PutSchedule(ctx, s2, nil); err != nil || ch != ScheduleReplaced {
		t.Fatalf("replace: %s, %v", ch, err)
	}
	testkit.EventuallyTrue(t, 5*time.Second, "a tick of the new schedule", func() bool { _, body := ticks(t, c, workCleanup, "team/old.pods"); return body == "v2" })
	list, err := c.Schedules(ctx, workCleanup)
	if err != nil || len(list) != 1 || list[0].Spec != s2.Spec || string(list[0].Data) != "v2" {
		t.Fatalf("schedules: %+v, %v", list, err)
	}

	// The guard keeps the current schedule.
	s3 := s
	s3.Data = []byte("v3")
	if ch, err := c.PutSchedule(ctx, s3, func(cur Schedule) bool { return string(cur.Data) == "v2" }); err != nil || ch != ScheduleKept {
		t.Fatalf("guarded put: %s, %v", ch, err)
	}

	// Writers racing: each ends without an error, one schedule remains,
	// and it is one of theirs.
	var wg sync.WaitGroup
	changes := make(chan ScheduleChange, 8)
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ch, err := c.PutSchedule(ctx, Schedule{Kind: workCleanup, Key: "race", Spec: "@every 1h", Data: []byte("same")}, nil)
			if err != nil {
				t.Errorf("racing put: %v", err)
			}
			changes <- ch
		}()
	}
	wg.Wait()
	close(changes)
	created := 0
	for ch := range changes {
		if ch == ScheduleCreated {
			created++
		} else if ch != ScheduleUnchanged {
			t.Errorf("racing put: %s", ch)
		}
	}
	if created != 1 {
		t.Errorf("%d writers created the schedule, want 1", created)
	}

	// Deleting: a guard that does not match leaves it; then it goes, and
	// the ticks stop.
	if ok, err := c.DeleteSchedule(ctx, workCleanup, "team/old.pods", func(cur Schedule) bool { return string(cur.Data) == "v1" }); err != nil || ok {
		t.Fatalf("guarded delete: %v, %v", ok, err)
	}
	if ok, err := c.DeleteSchedule(ctx, workCleanup, "team/old.pods", nil); err != nil || !ok {
		t.Fatalf("delete: %v, %v", ok, err)
	}
	if _, err := c.GetSchedule(ctx, workCleanup, "team/old.pods"); !errors.Is(err, ErrNoSchedule) {
		t.Fatalf("get after delete: %v", err)
	}
	time.Sleep(1500 * time.Millisecond) // a tick already on its way may land
	before, _ := ticks(t, c, workCleanup, "team/old.pods")
	time.Sleep(2500 * time.Millisecond)
	if after, _ := ticks(t, c, workCleanup, "team/old.pods"); after != before {
		t.Fatalf("ticks went on after the delete: %d, then %d", before, after)
	}
	if ok, err := c.DeleteSchedule(ctx, workCleanup, "team/old.pods", nil); err != nil || ok {
		t.Fatalf("deleting nothing: %v, %v", ok, err)
	}
}

// The server refuses a spec it cannot read; nothing is stored.
func TestScheduleRejected(t *testing.T) {
	srv := runServer(t)
	c := connect(t, srv.ClientURL())
	provision(t, c)
	ctx := t.Context()
	for _, s := range []Schedule{
		{Kind: workCleanup, Key: "five-fields", Spec: "* * * * *"},
		{Kind: workCleanup, Key: "never", Spec: "0 0 0 30 2 *"},
		{Kind: workCleanup, Key: "zone", Spec: "0 0 3 * * *", TimeZone: "Mars/Olympus"},
	} {
		if _, err := c.PutSchedule(ctx, s, nil); !errors.Is(err, ErrPublishRejected) {
			t.Errorf("%s: %v, want ErrPublishRejected", s.Key, err)
		}
		if _, err := c.GetSchedule(ctx, s.Kind, s.Key); !errors.Is(err, ErrNoSchedule) {
			t.Errorf("%s stored: %v", s.Key, err)
		}
	}
	if _, err := c.PutSchedule(ctx, Schedule{Kind: "bogus", Key: "k", Spec: "@hourly"}, nil); !errors.Is(err, ErrInvalidKind) {
		t.Errorf("bogus kind: %v", err)
	}
	if s, err := testTopology.ScheduleSubject(workCleanup, "ns/a.b"); err != nil || s != "app.schedule.cleanup.ns%2Fa~b" {
		t.Errorf("testTopology.ScheduleSubject = %q, %v", s, err)
	}
}
