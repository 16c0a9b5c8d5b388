package queue

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// A topology is checked when the connection is made: prefixes are literal
// subjects ending with a dot, the work and dead-letter streams are named,
// and kinds are plain tokens.
func TestTopologyValidate(t *testing.T) {
	if err := testTopology.Validate(); err != nil {
		t.Fatalf("the tests' topology: %v", err)
	}
	tests := map[string]func(*Topology){
		"no root dot":          func(t *Topology) { t.Root = "app" },
		"wildcard prefix":      func(t *Topology) { t.WorkPrefix = "app.*." },
		"no dead stream":       func(t *Topology) { t.DeadStream = "" },
		"no work stream":       func(t *Topology) { t.WorkStream = "" },
		"no kinds":             func(t *Topology) { t.Kinds = nil },
		"kind with a dot":      func(t *Topology) { t.Kinds = []WorkKind{"a.b"} },
		"empty kind":           func(t *Topology) { t.Kinds = []WorkKind{""} },
		"schedules, no prefix": func(t *Topology) { t.TickPrefix = "" },
	}
	for name, change := range tests {
		t.Run(name, func(t *testing.T) {
			topo := testTopology
			topo.Kinds = append([]WorkKind(nil), testTopology.Kinds...)
			change(&topo)
			if err := topo.Validate(); !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("Validate = %v, want ErrInvalidOption", err)
			}
			if _, err := Connect(context.Background(), WithURL("nats://127.0.0.1:1"), WithTopology(topo)); !errors.Is(err, ErrInvalidOption) {
				t.Fatalf("Connect = %v, want ErrInvalidOption", err)
			}
		})
	}
	noSchedules := testTopology
	noSchedules.ScheduleStream, noSchedules.SchedulePrefix, noSchedules.TickPrefix = "", "", ""
	if err := noSchedules.Validate(); err != nil {
		t.Fatalf("a topology without schedules: %v", err)
	}
}

// The work-queue calls of a connection without a topology (or without a
// schedule stream) fail with ErrNoTopology, before touching the server.
func TestNoTopology(t *testing.T) {
	e := runServer(t)
	ctx := t.Context()
	bare, err := Connect(ctx, WithURL(e.ClientURL()), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(bare.Close)
	handler := func(context.Context, *Msg) Outcome { return Done() }
	calls := map[string]func(*Conn) error{
		"NewRunner": func(c *Conn) error { _, err := c.NewRunner(streamWork, consumerGenerator, handler); return err },
		"ListWork":  func(c *Conn) error { _, _, err := c.ListWork(ctx); return err },
		"ListDead":  func(c *Conn) error { _, _, err := c.ListDead(ctx); return err },
		"Requeue":   func(c *Conn) error { _, err := c.Requeue(ctx, 1); return err },
		"PurgeWork": func(c *Conn) error { _, err := c.PurgeWork(ctx, workScan); return err },
		"Schedules": func(c *Conn) error { _, err := c.Schedules(ctx, workCleanup); return err },
		"PutSchedule": func(c *Conn) error {
			_, err := c.PutSchedule(ctx, Schedule{Kind: workCleanup, Key: "k", Spec: "@every 1m"}, nil)
			return err
		},
	}
	for name, call := range calls {
		if err := call(bare); !errors.Is(err, ErrNoTopology) {
			t.Errorf("%s without a topology: %v, want ErrNoTopology", name, err)
		}
	}
	noSchedules := testTopology
	noSchedules.ScheduleStream, noSchedules.SchedulePrefix, noSchedules.TickPrefix = "", "", ""
	c, err := Connect(ctx, WithURL(e.ClientURL()), WithTopology(noSchedules), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if _, err := c.Schedules(ctx, workCleanup); !errors.Is(err, ErrNoTopology) || !strings.Contains(err.Error(), "schedule stream") {
		t.Errorf("Schedules without a schedule stream: %v", err)
	}
	if _, _, err := c.ListWork(ctx, WithListKind("bogus")); !errors.Is(err, ErrInvalidKind) {
		t.Errorf("ListWork of an unknown kind: %v, want ErrInvalidKind", err)
	}
}
