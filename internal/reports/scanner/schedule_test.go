package scanner

import (
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/bus"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// The periodic scan keeps one schedule whatever the replicas' intervals
// were: changed, then changed back within JetStream's duplicate window,
// it is the last one asked for (a publish id derived from the interval
// once made the change back a duplicate, and no schedule was left), and
// the schedule of earlier versions is removed.
func TestScanScheduleFollowsTheInterval(t *testing.T) {
	ctx := t.Context()
	srv := natstest.Server(t)
	c, err := bus.Connect(ctx, queue.WithEmbedded(srv), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := bus.Provision(ctx, c); err != nil {
		t.Fatal(err)
	}
	// A schedule as versions before kept it.
	if _, err := c.JetStream().Publish(ctx, legacyScheduleSubject, []byte("{}")); err != nil {
		t.Fatal(err)
	}
	s := &Scanner{conn: c, log: zerolog.Nop()}
	for _, d := range []time.Duration{time.Hour, 2 * time.Hour, time.Hour} {
		s.o.interval = d
		if err := s.ensureSchedule(ctx); err != nil {
			t.Fatalf("interval %s: %v", d, err)
		}
		got, err := c.GetSchedule(ctx, bus.WorkScan, ScheduleKey)
		if err != nil {
			t.Fatalf("interval %s: %v", d, err)
		}
		if want := "@every " + d.String(); got.Spec != want {
			t.Fatalf("schedule %q after asking for %q", got.Spec, want)
		}
	}
	all, err := c.Schedules(ctx, bus.WorkScan)
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Fatalf("%d scan schedules, want 1: %+v", len(all), all)
	}
	if _, err := c.LastMsg(ctx, bus.StreamSchedules, legacyScheduleSubject); err == nil {
		t.Fatal("the schedule of earlier versions is still there")
	}
}
