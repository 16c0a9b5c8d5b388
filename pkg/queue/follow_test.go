package queue

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
)

// follower records what Follow hands it.
type follower struct {
	mu       sync.Mutex
	seqs     []uint64
	subjects []string
	caughtUp uint64
	caught   chan struct{}
}

func newFollower() *follower { return &follower{caught: make(chan struct{})} }

func (f *follower) msg(m ReplayMsg) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.seqs = append(f.seqs, m.Sequence)
	f.subjects = append(f.subjects, m.Subject)
	return nil
}

func (f *follower) caughtUpAt(seq uint64) {
	f.caughtUp = seq
	close(f.caught)
}

func (f *follower) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.seqs)
}

func publishN(t *testing.T, c *Conn, from, n int) {
	t.Helper()
	for i := from; i < from+n; i++ {
		uid := fmt.Sprintf("uid-%05d", i)
		if _, err := c.PublishSync(t.Context(), Message{Subject: resultSubject(uid, "p"), ID: MsgID(uid, "p"), Data: []byte("r")}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestFollow: a follower gets every stored message in stream order, is
// told when it has caught up with what was stored at its start, then gets
// what is stored later; two followers see the same sequence; one started
// after a sequence gets only the messages after it.
func TestFollow(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	publishN(t, c, 0, 500)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	a, b := newFollower(), newFollower()
	errs := make(chan error, 3)
	for _, f := range []*follower{a, b} {
		go func() {
			errs <- c.Follow(ctx, streamResults, f.msg, WithFollowCaughtUp(f.caughtUpAt), WithFollowBatch(64))
		}()
	}
	for _, f := range []*follower{a, b} {
		select {
		case <-f.caught:
		case err := <-errs:
			t.Fatalf("follow ended: %v", err)
		case <-time.After(30 * time.Second):
			t.Fatal("not caught up")
		}
		if f.caughtUp != 500 || f.count() < 500 {
			t.Fatalf("caught up at %d with %d messages, want 500", f.caughtUp, f.count())
		}
	}
	publishN(t, c, 500, 100)
	testkit.EventuallyTrue(t, 30*time.Second, "the later messages", func() bool { return a.count() == 600 && b.count() == 600 })
	a.mu.Lock()
	for i, s := range a.seqs {
		if s != uint64(i+1) || s != b.seqs[i] {
			t.Fatalf("message %d: sequence %d (other follower %d)", i, s, b.seqs[i])
		}
	}
	a.mu.Unlock()

	late := newFollower()
	go func() {
		errs <- c.Follow(ctx, streamResults, late.msg, WithFollowAfter(590), WithFollowCaughtUp(late.caughtUpAt))
	}()
	<-late.caught
	if late.caughtUp != 600 || late.count() != 10 || late.seqs[0] != 591 {
		t.Fatalf("after 590: caught up at %d with %d messages from %v", late.caughtUp, late.count(), late.seqs[:1])
	}
	cancel()
	for range 3 {
		if err := <-errs; !errors.Is(err, context.Canceled) {
			t.Fatalf("follow ended with %v, want the context's error", err)
		}
	}
}

// TestFollowEmptyStream: a follower of an empty stream is caught up at
// once, and then gets the first message stored.
func TestFollowEmptyStream(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	f := newFollower()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = c.Follow(ctx, streamResults, f.msg, WithFollowCaughtUp(f.caughtUpAt)) }()
	select {
	case <-f.caught:
	case <-time.After(10 * time.Second):
		t.Fatal("an empty stream's follower is not caught up")
	}
	publishN(t, c, 0, 1)
	testkit.EventuallyTrue(t, 10*time.Second, "the first message", func() bool { return f.count() == 1 })
}

// TestFollowServerRestart: the server restarts mid-follow (same store);
// the follower resumes without losing or repeating a message.
func TestFollowServerRestart(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	publishN(t, c, 0, 200)
	f := newFollower()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go func() { _ = c.Follow(ctx, streamResults, f.msg, WithFollowCaughtUp(f.caughtUpAt)) }()
	<-f.caught
	if _, err := natstest.Restart(t, e); err != nil {
		t.Fatalf("restart: %v", err)
	}
	testkit.EventuallyTrue(t, 30*time.Second, "reconnection", c.Connected)
	publishN(t, c, 200, 50)
	testkit.EventuallyTrue(t, 60*time.Second, "the messages after the restart", func() bool { return f.count() >= 250 })
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, s := range f.seqs {
		if s != uint64(i+1) {
			t.Fatalf("message %d has sequence %d: lost or repeated", i, s)
		}
	}
}
