package queue

import (
	"context"
	"errors"
	"testing"
)

// Purge removes exactly the subjects its filter selects; LastMsg reads
// the last message of one subject and says when there is none.
func TestPurgeAndLastMsg(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx := context.Background()
	pub := func(uid, policy, data string) {
		t.Helper()
		if _, err := c.PublishSync(ctx, Message{Subject: resultSubject(uid, policy), ID: MsgID(uid, policy, data), Data: []byte(data)}); err != nil {
			t.Fatal(err)
		}
	}
	pub("uid-a", "p1", "a1")
	pub("uid-a", "ns/p2", "a2")
	pub("uid-b", "p1", "b1")
	pub("uid-a", "p1", "a1'")

	m, err := c.LastMsg(ctx, streamResults, resultSubject("uid-a", "p1"))
	if err != nil || string(m.Data) != "a1'" || m.Sequence != 4 {
		t.Fatalf("last of uid-a/p1: %q seq %d, %v; want a1' at 4", m.Data, m.Sequence, err)
	}
	n, err := c.Purge(ctx, streamResults, resultsOfResource("uid-a"))
	if err != nil || n != 3 {
		t.Fatalf("purge uid-a: %d, %v; want 3 (two subjects, one with a history of two)", n, err)
	}
	if _, err := c.LastMsg(ctx, streamResults, resultSubject("uid-a", "p1")); !errors.Is(err, ErrNoMessage) {
		t.Fatalf("after purge: %v, want ErrNoMessage", err)
	}
	if m, err := c.LastMsg(ctx, streamResults, resultSubject("uid-b", "p1")); err != nil || string(m.Data) != "b1" {
		t.Fatalf("uid-b kept: %q, %v", m.Data, err)
	}
	if n, err := c.Purge(ctx, streamResults, resultsOfResource("nobody")); err != nil || n != 0 {
		t.Fatalf("purge of nothing: %d, %v", n, err)
	}
	if _, err := c.Purge(ctx, streamResults, ""); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("empty filter: %v", err)
	}
}

// MsgAt reads a message by its sequence, and says when it is gone.
func TestMsgAt(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx := context.Background()
	ack, err := c.PublishSync(ctx, Message{Subject: resultSubject("uid-a", "p1"), ID: "a1", Data: []byte("a1")})
	if err != nil {
		t.Fatal(err)
	}
	m, err := c.MsgAt(ctx, streamResults, ack.Sequence)
	if err != nil || string(m.Data) != "a1" || m.Subject != resultSubject("uid-a", "p1") || m.Published.IsZero() {
		t.Fatalf("message %d: %+v, %v", ack.Sequence, m, err)
	}
	if err := c.DeleteMsg(ctx, streamResults, ack.Sequence); err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{ack.Sequence, ack.Sequence + 100} {
		if _, err := c.MsgAt(ctx, streamResults, seq); !errors.Is(err, ErrNoMessage) {
			t.Errorf("message %d: %v, want ErrNoMessage", seq, err)
		}
	}
}
