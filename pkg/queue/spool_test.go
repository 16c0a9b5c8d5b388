package queue

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
)

func spoolMsg(i int) Message {
	return Message{Subject: fmt.Sprintf("%sns.pod-%d", resultsPrefix, i), ID: fmt.Sprint("m-", i), Data: []byte(fmt.Sprintf(`{"i":%d}`, i))}
}

func spoolFiles(t *testing.T, dir string) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*"+spoolSuffix))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestSpool: messages taken and not acknowledged when a process dies
// (the spool abandoned without Close, its last record cut short) are
// published by the next process's Recover, to a real JetStream, and the
// ones the stream already had are stored once (their ids); what the
// publisher gives up on (NATS away past the deadline) is published by
// Resend once NATS is back; acknowledged segments are deleted; the bound
// holds.
func TestSpool(t *testing.T) {
	srv := runServer(t)
	c := connect(t, srv.ClientURL())
	provision(t, c)
	ctx := t.Context()
	dir := t.TempDir()

	// A first process: 30 messages kept, the first 10 published and
	// acknowledged, then it dies.
	s1, err := OpenSpool(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 30 {
		if err := s1.Append(spoolMsg(i)); err != nil {
			t.Fatal(err)
		}
		if i < 10 {
			if _, err := c.PublishSync(ctx, spoolMsg(i)); err != nil {
				t.Fatal(err)
			}
			s1.Acked(spoolMsg(i).ID)
		}
	}
	if pending, _ := s1.Stats(); pending != 20 {
		t.Fatalf("%d pending, want 20", pending)
	}
	// Killed in the middle of a write: a record cut short.
	f, err := os.OpenFile(s1.cur.path, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	torn := appendSpoolRecord(nil, spoolMsg(99))
	if _, err := f.Write(torn[:len(torn)-3]); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()

	// The next process.
	s2, err := OpenSpool(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.NewAsyncPublisher(WithAckHandler(func(m Message) { s2.Acked(m.ID) }),
		WithDropHandler(func(m Message, _ error) { s2.GivenUp(m.ID) }))
	if err != nil {
		t.Fatal(err)
	}
	n, err := s2.Recover(p.Publish)
	if err != nil || n != 30 {
		t.Fatalf("recovered %d, %v; want the 30 messages of the dead process's segment", n, err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if got := streamMsgs(t, c, streamResults); got != 30 {
		t.Fatalf("RESULTS holds %d messages, want 30 (the 10 published before stored once)", got)
	}
	if st := p.Stats(); st.Duplicates != 10 {
		t.Errorf("stats %+v: want the 10 published before acknowledged as duplicates", st)
	}
	if pending, _ := s2.Stats(); pending != 0 {
		t.Fatalf("%d pending after every acknowledgement", pending)
	}
	_ = s2.Close()
	if n := spoolFiles(t, dir); n != 0 {
		t.Fatalf("%d segment files left with nothing pending", n)
	}

	// NATS away past the messages' deadline: given up, kept, resent.
	s3, err := OpenSpool(dir, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	srv.Shutdown()
	p3, err := c.NewAsyncPublisher(WithMessageDeadline(200*time.Millisecond), WithAckHandler(func(m Message) { s3.Acked(m.ID) }),
		WithDropHandler(func(m Message, _ error) { s3.GivenUp(m.ID) }))
	if err != nil {
		t.Fatal(err)
	}
	for i := 100; i < 110; i++ {
		if err := s3.Append(spoolMsg(i)); err != nil {
			t.Fatal(err)
		}
		if err := p3.Publish(spoolMsg(i)); err != nil {
			t.Fatal(err)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p3.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	if st := p3.Stats(); st.Dropped != 10 {
		t.Fatalf("stats %+v: want the 10 dropped while NATS is away", st)
	}
	time.Sleep(spoolSegmentAge) // the segment is closed at the next append
	if err := s3.Append(spoolMsg(200)); err != nil {
		t.Fatal(err)
	}
	if _, err := natstest.Restart(t, srv); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 10*time.Second, "reconnected", c.Connected)
	p4, err := c.NewAsyncPublisher(WithAckHandler(func(m Message) { s3.Acked(m.ID) }))
	if err != nil {
		t.Fatal(err)
	}
	n, err = s3.Resend(p4.Publish)
	if err != nil || n != 10 {
		t.Fatalf("resent %d, %v; want 10", n, err)
	}
	if err := p4.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if pending, _ := s3.Stats(); pending != 1 {
		t.Fatalf("%d pending, want the one never published", pending)
	}

	// The bound.
	small, err := OpenSpool(t.TempDir(), 100)
	if err != nil {
		t.Fatal(err)
	}
	if err := small.Append(Message{Subject: "app.results.x", ID: "big", Data: make([]byte, 200)}); !errors.Is(err, ErrSpoolFull) {
		t.Fatalf("a record past the bound: %v", err)
	}
}
