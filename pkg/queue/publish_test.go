package queue

import (
	"context"
	"errors"
	"fmt"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"
	"testing"
	"time"
)

// A publish retried with the same id is stored once: synchronously,
// asynchronously, and across the two.
func TestPublishDeduplicates(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx := context.Background()

	m := workMsg(t, WorkGenerate, "default/cm.one")
	first, err := c.PublishSync(ctx, m)
	if err != nil {
		t.Fatalf("PublishSync: %v", err)
	}
	if first.Duplicate || first.Stream != StreamWork {
		t.Fatalf("first ack = %+v", first)
	}
	for i := range 3 {
		again, err := c.PublishSync(ctx, m)
		if err != nil {
			t.Fatalf("retry %d: %v", i, err)
		}
		if !again.Duplicate || again.Sequence != first.Sequence {
			t.Fatalf("retry %d ack = %+v, want duplicate of seq %d", i, again, first.Sequence)
		}
	}

	p, err := c.NewAsyncPublisher()
	if err != nil {
		t.Fatal(err)
	}
	other := workMsg(t, WorkGenerate, "default/cm.two")
	for range 5 {
		if err := p.Publish(m); err != nil {
			t.Fatal(err)
		}
		if err := p.Publish(other); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	st := p.Stats()
	if st.Published != 1 || st.Duplicates != 9 || st.Dropped != 0 || st.Pending != 0 {
		t.Fatalf("stats = %+v, want 1 published, 9 duplicates", st)
	}
	if n := streamMsgs(t, c, StreamWork); n != 2 {
		t.Fatalf("VERDICT_WORK holds %d messages, want 2", n)
	}
}

func TestPublishValidates(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx := context.Background()
	if _, err := c.PublishSync(ctx, Message{Subject: "verdict.work.scan.x"}); !errors.Is(err, ErrMissingID) {
		t.Fatalf("no id: %v", err)
	}
	if _, err := c.PublishSync(ctx, Message{Subject: "verdict.work.*.x", ID: "1"}); !errors.Is(err, ErrInvalidSubject) {
		t.Fatalf("wildcard: %v", err)
	}
	if _, err := c.NewAsyncPublisher(WithBufferSize(0)); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("buffer 0: %v", err)
	}
	// No stream takes this subject: retried until the deadline, then a timeout.
	sctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := c.PublishSync(sctx, Message{Subject: "nowhere.x", ID: "1"}); !errors.Is(err, ErrPublishTimeout) {
		t.Fatalf("no stream: %v", err)
	}
	// Too large for the server: rejected at once.
	big := make([]byte, c.NATS().MaxPayload()+1)
	if _, err := c.PublishSync(ctx, Message{Subject: "verdict.work.scan.big", ID: "big", Data: big}); !errors.Is(err, ErrPublishRejected) {
		t.Fatalf("too big: %v", err)
	}
}

// An asynchronous publisher facing a stopped server keeps its buffer
// bound, counts what it dropped, and delivers the rest when the server
// returns.
func TestAsyncPublisherSurvivesServerRestart(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx := context.Background()

	const buffer, total = 200, 500
	var dropHandler int
	p, err := c.NewAsyncPublisher(WithBufferSize(buffer), WithMessageDeadline(30*time.Second),
		WithAckTimeout(time.Second), WithRetryBackoff(20*time.Millisecond, 200*time.Millisecond),
		WithDropHandler(func(Message, error) { dropHandler++ }))
	if err != nil {
		t.Fatal(err)
	}
	// Some traffic while the server is up.
	for i := range 50 {
		if err := p.Publish(workMsg(t, WorkScan, fmt.Sprintf("before-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := p.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	cancel()

	cfg := e.Config()
	e.Shutdown()
	waitFor(t, 5*time.Second, "client to notice the server is gone", func() bool { return !c.NATS().IsConnected() })

	var accepted, full int
	start := time.Now()
	for i := range total {
		err := p.Publish(workMsg(t, WorkScan, fmt.Sprintf("during-%d", i)))
		switch {
		case err == nil:
			accepted++
		case errors.Is(err, ErrBufferFull):
			full++
		default:
			t.Fatalf("publish %d: %v", i, err)
		}
		if st := p.Stats(); st.Pending > buffer {
			t.Fatalf("pending %d exceeds the buffer %d", st.Pending, buffer)
		}
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("publishing %d messages to a stopped server took %s: Publish blocked", total, took)
	}
	if accepted != buffer || full != total-buffer {
		t.Fatalf("accepted %d, refused %d; want %d and %d", accepted, full, buffer, total-buffer)
	}
	if st := p.Stats(); st.Dropped != uint64(full) || st.Pending != buffer {
		t.Fatalf("stats while down = %+v, want %d dropped, %d pending", st, full, buffer)
	}

	time.Sleep(500 * time.Millisecond) // let retries spin against the closed port
	e2, err := embedded.Run(ctx, cfg)
	if err != nil {
		t.Fatalf("restart: %v", err)
	}
	t.Cleanup(e2.Shutdown)

	fctx, cancel = context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatalf("flush after restart: %v (stats %+v)", err, p.Stats())
	}
	st := p.Stats()
	// A publish that reached the server just before it stopped is stored
	// but its ack is lost: its retry comes back as a duplicate. Either way
	// every accepted message is acknowledged, and stored once (below).
	if st.Published+st.Duplicates != 50+buffer || st.Dropped != uint64(full) || st.Pending != 0 || dropHandler != 0 {
		t.Fatalf("stats after restart = %+v, drop handler %d; want %d published or duplicate, %d dropped", st, dropHandler, 50+buffer, full)
	}
	if n := streamMsgs(t, c, StreamWork); n != 50+buffer {
		t.Fatalf("VERDICT_WORK holds %d messages, want %d", n, 50+buffer)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("retried %d attempts while the server was down", st.Retried)
}

// Messages whose deadline passes while the server is down are dropped and
// counted, never left pending.
func TestAsyncPublisherDeadline(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	e.Shutdown()
	waitFor(t, 5*time.Second, "disconnect", func() bool { return !c.NATS().IsConnected() })
	p, err := c.NewAsyncPublisher(WithMessageDeadline(300 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := p.Publish(workMsg(t, WorkScan, fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Dropped != 10 || st.Pending != 0 {
		t.Fatalf("stats = %+v, want 10 dropped", st)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(workMsg(t, WorkScan, "late")); !errors.Is(err, ErrPublisherClosed) {
		t.Fatalf("publish after close: %v", err)
	}
}

// Messages in flight when the server goes down are retried under the same
// id after it comes back: each is stored exactly once, none is lost.
func TestAsyncPublisherInFlightAtCrash(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx := context.Background()
	const total = 3000
	p, err := c.NewAsyncPublisher(WithBufferSize(total), WithAckTimeout(time.Second),
		WithRetryBackoff(20*time.Millisecond, 200*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.Config()
	restarted := make(chan *embedded.Server, 1)
	for i := range total {
		if i == total/3 {
			go func() {
				e.Shutdown()
				time.Sleep(300 * time.Millisecond)
				e2, err := embedded.Run(ctx, cfg)
				if err != nil {
					t.Errorf("restart: %v", err)
				}
				restarted <- e2
			}()
		}
		if err := p.Publish(workMsg(t, WorkScan, fmt.Sprintf("m-%04d", i))); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	e2 := <-restarted
	if e2 == nil {
		t.FailNow()
	}
	t.Cleanup(e2.Shutdown)
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatalf("flush: %v (%+v)", err, p.Stats())
	}
	st := p.Stats()
	if st.Dropped != 0 || st.Published+st.Duplicates != total {
		t.Fatalf("stats %+v, want %d acknowledged and none dropped", st, total)
	}
	if n := streamMsgs(t, c, StreamWork); n != total {
		t.Fatalf("VERDICT_WORK holds %d messages, want %d", n, total)
	}
	t.Logf("stats %+v", st)
}
