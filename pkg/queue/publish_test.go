package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"weak"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"
)

// A publish retried with the same id is stored once: synchronously,
// asynchronously, and across the two.
func TestPublishDeduplicates(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx := context.Background()

	m := workMsg(t, workGenerate, "default/cm.one")
	first, err := c.PublishSync(ctx, m)
	if err != nil {
		t.Fatalf("PublishSync: %v", err)
	}
	if first.Duplicate || first.Stream != streamWork {
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
	other := workMsg(t, workGenerate, "default/cm.two")
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
	if n := streamMsgs(t, c, streamWork); n != 2 {
		t.Fatalf("WORK holds %d messages, want 2", n)
	}
}

func TestPublishValidates(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx := context.Background()
	if _, err := c.PublishSync(ctx, Message{Subject: "app.work.scan.x"}); !errors.Is(err, ErrMissingID) {
		t.Fatalf("no id: %v", err)
	}
	if _, err := c.PublishSync(ctx, Message{Subject: "app.work.*.x", ID: "1"}); !errors.Is(err, ErrInvalidSubject) {
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
	if _, err := c.PublishSync(ctx, Message{Subject: "app.work.scan.big", ID: "big", Data: big}); !errors.Is(err, ErrPublishRejected) {
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
		if err := p.Publish(workMsg(t, workScan, fmt.Sprintf("before-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	if err := p.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	cancel()

	e.Shutdown()
	testkit.EventuallyTrue(t, 5*time.Second, "client to notice the server is gone", func() bool { return !c.NATS().IsConnected() })

	var accepted, full int
	start := time.Now()
	for i := range total {
		err := p.Publish(workMsg(t, workScan, fmt.Sprintf("during-%d", i)))
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
	if _, err := natstest.Restart(t, e); err != nil {
		t.Fatalf("restart: %v", err)
	}

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
	if n := streamMsgs(t, c, streamWork); n != 50+buffer {
		t.Fatalf("WORK holds %d messages, want %d", n, 50+buffer)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("retried %d attempts while the server was down", st.Retried)
}

// PublishAll takes a batch as Publish takes each message: what fits in
// the buffer is taken and the rest counted as dropped, a malformed message
// refuses the whole batch, and every message taken is stored once.
func TestAsyncPublishAll(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx := context.Background()
	var dropHandler atomic.Int64
	p, err := c.NewAsyncPublisher(WithBufferSize(10), WithAckTimeout(time.Second),
		WithRetryBackoff(20*time.Millisecond, 200*time.Millisecond),
		WithDropHandler(func(Message, error) { dropHandler.Add(1) }))
	if err != nil {
		t.Fatal(err)
	}
	batch := func(prefix string, n int) []Message {
		ms := make([]Message, n)
		for i := range ms {
			ms[i] = workMsg(t, workScan, fmt.Sprintf("%s-%d", prefix, i))
		}
		return ms
	}
	// While the server is up: a batch larger than anything in flight.
	if err := p.PublishAll(batch("up", 10)); err != nil {
		t.Fatal(err)
	}
	if err := p.PublishAll(nil); err != nil {
		t.Fatalf("empty batch: %v", err)
	}
	fctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatal(err)
	}

	e.Shutdown()
	testkit.EventuallyTrue(t, 5*time.Second, "client to notice the server is gone", func() bool { return !c.NATS().IsConnected() })
	if err := p.PublishAll(batch("a", 4)); err != nil {
		t.Fatal(err)
	}
	err = p.PublishAll(batch("b", 8))
	if !errors.Is(err, ErrBufferFull) || !strings.Contains(err.Error(), "2 of 8 messages dropped") {
		t.Fatalf("batch over the buffer: %v", err)
	}
	if err := p.PublishAll(batch("c", 1)); !errors.Is(err, ErrBufferFull) {
		t.Fatalf("batch into a full buffer: %v", err)
	}
	bad := batch("d", 3)
	bad[1].Subject = "app.work.*.x"
	if err := p.PublishAll(bad); !errors.Is(err, ErrInvalidSubject) {
		t.Fatalf("malformed batch: %v", err)
	}
	if st := p.Stats(); st.Pending != 10 || st.Dropped != 3 {
		t.Fatalf("stats while down = %+v, want 10 pending, 3 dropped", st)
	}

	if _, err := natstest.Restart(t, e); err != nil {
		t.Fatalf("restart: %v", err)
	}
	if err := p.Flush(fctx); err != nil {
		t.Fatalf("flush after restart: %v (stats %+v)", err, p.Stats())
	}
	if st := p.Stats(); st.Published+st.Duplicates != 20 || st.Dropped != 3 || dropHandler.Load() != 0 {
		t.Fatalf("stats after restart = %+v, drop handler %d; want 20 published, 3 dropped", st, dropHandler.Load())
	}
	if n := streamMsgs(t, c, streamWork); n != 20 {
		t.Fatalf("WORK holds %d messages, want 20", n)
	}
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.PublishAll(batch("late", 2)); !errors.Is(err, ErrPublisherClosed) {
		t.Fatalf("batch after close: %v", err)
	}
	if st := p.Stats(); st.Dropped != 5 {
		t.Fatalf("dropped %d after a batch of 2 past Close, want 5", st.Dropped)
	}
}

// A message of a batch that must be retried holds only its own bytes:
// once the rest of its batch is stored, the batch's shared payload buffer
// can be collected while the retries go on.
func TestAsyncPublishAllRetryLetsGoOfTheBatch(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	p, err := c.NewAsyncPublisher(WithMessageDeadline(time.Minute), WithAckTimeout(time.Second),
		WithRetryBackoff(20*time.Millisecond, 100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		_ = p.Close(ctx)
	})
	shared := make([]byte, 1<<20)
	held := weak.Make(&shared[0])
	ms := []Message{
		workMsg(t, workScan, "stored-1"),
		{Subject: "nowhere.x", ID: "no-stream", Data: shared[2:3:3]}, // retried until its deadline
		workMsg(t, workScan, "stored-2"),
	}
	ms[0].Data, ms[2].Data = shared[0:1:1], shared[1:2:2]
	if err := p.PublishAll(ms); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 10*time.Second, "the stored messages and a retry", func() bool {
		st := p.Stats()
		return st.Published == 2 && st.Retried >= 2
	})
	testkit.EventuallyTrue(t, 10*time.Second, "the batch's buffer to be collected", func() bool {
		runtime.GC()
		return held.Value() == nil
	})
	if st := p.Stats(); st.Pending != 1 || st.Dropped != 0 {
		t.Fatalf("stats %+v, want the unstored message still pending", st)
	}
}

// Messages whose deadline passes while the server is down are dropped and
// counted, never left pending.
func TestAsyncPublisherDeadline(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	e.Shutdown()
	testkit.EventuallyTrue(t, 5*time.Second, "disconnect", func() bool { return !c.NATS().IsConnected() })
	p, err := c.NewAsyncPublisher(WithMessageDeadline(300 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		if err := p.Publish(workMsg(t, workScan, fmt.Sprint(i))); err != nil {
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
	if err := p.Publish(workMsg(t, workScan, "late")); !errors.Is(err, ErrPublisherClosed) {
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
	restarted := make(chan *embedded.Server, 1)
	for i := range total {
		if i == total/3 {
			go func() {
				e.Shutdown()
				time.Sleep(300 * time.Millisecond)
				e2, err := natstest.Restart(t, e)
				if err != nil {
					t.Errorf("restart: %v", err)
				}
				restarted <- e2
			}()
		}
		if err := p.Publish(workMsg(t, workScan, fmt.Sprintf("m-%04d", i))); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
	e2 := <-restarted
	if e2 == nil {
		t.FailNow()
	}
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.Flush(fctx); err != nil {
		t.Fatalf("flush: %v (%+v)", err, p.Stats())
	}
	st := p.Stats()
	if st.Dropped != 0 || st.Published+st.Duplicates != total {
		t.Fatalf("stats %+v, want %d acknowledged and none dropped", st, total)
	}
	if n := streamMsgs(t, c, streamWork); n != total {
		t.Fatalf("WORK holds %d messages, want %d", n, total)
	}
	t.Logf("stats %+v", st)
}

// The publisher reads the server's answers itself: each kind of answer has
// its outcome, on a real server.
func TestAsyncPublisherAnswers(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var mu sync.Mutex
	var drops []error
	onDrop := WithDropHandler(func(_ Message, err error) {
		mu.Lock()
		drops = append(drops, err)
		mu.Unlock()
	})
	takeDrops := func() []error {
		mu.Lock()
		defer mu.Unlock()
		d := drops
		drops = nil
		return d
	}

	t.Run("no stream yet, then one", func(t *testing.T) {
		// No responders until the streams exist: tried again, then stored.
		p, err := c.NewAsyncPublisher(onDrop, WithMessageDeadline(20*time.Second), WithRetryBackoff(20*time.Millisecond, 100*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close(ctx) //nolint:errcheck // checked below
		m := workMsg(t, workScan, "early")
		if err := p.Publish(m); err != nil {
			t.Fatal(err)
		}
		testkit.EventuallyTrue(t, 5*time.Second, "a retry", func() bool { return p.Stats().Retried > 0 })
		if err := c.Provision(ctx, testPlan(withConsumers(testConsumers(time.Second)...))); err != nil {
			t.Fatal(err)
		}
		if err := p.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		if st := p.Stats(); st.Published != 1 || st.Dropped != 0 {
			t.Fatalf("stats %+v, want 1 published after retries", st)
		}
		s, err := c.JetStream().Stream(ctx, streamWork)
		if err != nil {
			t.Fatal(err)
		}
		if info, err := s.Info(ctx); err != nil || info.State.Msgs != 1 {
			t.Fatalf("stream info %+v, %v: want 1 message stored", info, err)
		}
	})

	t.Run("rejected", func(t *testing.T) {
		// An expectation the stream does not meet is a 400: dropped at
		// once, not retried.
		p, err := c.NewAsyncPublisher(onDrop)
		if err != nil {
			t.Fatal(err)
		}
		m := workMsg(t, workScan, "rejected")
		m.Header = nats.Header{jetstream.ExpectedStreamHeader: []string{"ANOTHER_STREAM"}}
		if err := p.Publish(m); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		d := takeDrops()
		if st := p.Stats(); st.Dropped != 1 || st.Retried != 0 || len(d) != 1 || !errors.Is(d[0], ErrPublishRejected) {
			t.Fatalf("stats %+v, drops %v: want one rejection", st, d)
		}
	})

	t.Run("duplicate", func(t *testing.T) {
		p, err := c.NewAsyncPublisher(onDrop)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			if err := p.Publish(workMsg(t, workScan, "twice")); err != nil {
				t.Fatal(err)
			}
			if err := p.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if st := p.Stats(); st.Published != 1 || st.Duplicates != 1 {
			t.Fatalf("stats %+v, want 1 published and 1 duplicate", st)
		}
	})

	t.Run("no answer", func(t *testing.T) {
		// Something other than JetStream takes the subject and never
		// answers: each attempt times out and is tried again until the
		// deadline.
		sub, err := c.NATS().SubscribeSync("app.silent.>")
		if err != nil {
			t.Fatal(err)
		}
		defer sub.Unsubscribe() //nolint:errcheck // test cleanup
		p, err := c.NewAsyncPublisher(onDrop, WithAckTimeout(50*time.Millisecond), WithMessageDeadline(time.Second),
			WithRetryBackoff(10*time.Millisecond, 50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Publish(Message{Subject: "app.silent.x", ID: "silent", Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		d := takeDrops()
		if st := p.Stats(); st.Dropped != 1 || st.Retried < 2 || len(d) != 1 || !errors.Is(d[0], ErrPublishTimeout) {
			t.Fatalf("stats %+v, drops %v: want retries, then a timeout", st, d)
		}
		if n, _, _ := sub.Pending(); n < 3 {
			t.Fatalf("%d attempts reached the subscriber, want at least 3", n)
		}
	})

	t.Run("replies that answer nothing", func(t *testing.T) {
		p, err := c.NewAsyncPublisher(onDrop, WithMaxInFlight(1))
		if err != nil {
			t.Fatal(err)
		}
		// Forged or late replies: unknown attempts, not numbers, errors.
		for _, subj := range []string{p.replyPrefix + "zz", p.replyPrefix + "not-a-number", p.replyPrefix + "1"} {
			if err := c.NATS().Publish(subj, []byte(`{"stream":"X","seq":1}`)); err != nil {
				t.Fatal(err)
			}
		}
		// One in flight at a time: every one still goes through.
		for i := range 50 {
			if err := p.Publish(workMsg(t, workScan, fmt.Sprint("one-at-a-time-", i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := p.Close(ctx); err != nil {
			t.Fatal(err)
		}
		if st := p.Stats(); st.Published != 50 || st.Dropped != 0 || st.Duplicates != 0 {
			t.Fatalf("stats %+v, want 50 published", st)
		}
	})
}

// FuzzDecodePubAck: the direct reading of an acknowledgement gives what
// encoding/json gives.
func FuzzDecodePubAck(f *testing.F) {
	for _, s := range []string{
		`{"stream":"RESULTS","seq":12}`, `{"stream":"S","seq":3,"duplicate":true}`,
		`{"stream":"S","domain":"hub","seq":18446744073709551615}`,
		`{"error":{"code":400,"err_code":10060,"description":"expected stream does not match"},"stream":"S","seq":0}`,
		`{"stream":"S","seq":1,"seq":2}`, `{"Stream":"S","seq":1}`, `{"stream":"S","seq":-1}`, ``, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var fast pubAckReply
		if !fastPubAck(data, &fast) {
			return
		}
		var want pubAckReply
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("%q: taken as %+v, encoding/json refuses it: %v", data, fast, err)
		}
		if !reflect.DeepEqual(fast, want) {
			t.Fatalf("%q:\ngot  %+v\nwant %+v", data, fast, want)
		}
		got, err := decodePubAck(data)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: decodePubAck gave %+v, %v", data, got, err)
		}
	})
}

func TestDecodePubAck(t *testing.T) {
	for in, want := range map[string]pubAckReply{
		`{"stream":"RESULTS","seq":12}`:           {Stream: "RESULTS", Sequence: 12},
		`{"stream":"S","seq":3,"duplicate":true}`: {Stream: "S", Sequence: 3, Duplicate: true},
		`{"stream":"S","domain":"hub","seq":7}`:   {Stream: "S", Sequence: 7},
		`{"error":{"code":503,"err_code":10077,"description":"maximum messages exceeded"},"stream":"S","seq":0}`: {
			Stream: "S", Error: &jetstream.APIError{Code: 503, ErrorCode: 10077, Description: "maximum messages exceeded"},
		},
	} {
		got, err := decodePubAck([]byte(in))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: got %+v, %v; want %+v", in, got, err, want)
		}
	}
	if _, err := decodePubAck([]byte(`{"stream":`)); err == nil {
		t.Error("a cut acknowledgement: no error")
	}
	// The server's usual answers take the direct path.
	for _, in := range []string{`{"stream":"RESULTS","seq":12}`, `{"stream":"S","seq":3,"duplicate":true}`, `{"stream":"S", "domain":"hub", "seq":7}`} {
		var a pubAckReply
		if !fastPubAck([]byte(in), &a) {
			t.Errorf("%s: not on the direct path", in)
		}
	}
}

// TestAsyncPublisherLinger: with a linger the pump holds a message for
// the linger before sending it with what came meanwhile, and every
// message published from many goroutines is still stored once; Flush and
// Close wait for them.
func TestAsyncPublisherLinger(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Provision(ctx, testPlan()); err != nil {
		t.Fatal(err)
	}
	if _, err := c.NewAsyncPublisher(WithLinger(2 * time.Second)); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("a linger of 2s: %v", err)
	}
	p, err := c.NewAsyncPublisher(WithLinger(300 * time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	stored := func() uint64 {
		s, err := c.JetStream().Stream(ctx, streamWork)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.Msgs
	}
	if err := p.Publish(workMsg(t, workScan, "first")); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond)
	if n := stored(); n != 0 {
		t.Fatalf("%d messages stored 50ms into a linger of 300ms", n)
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 250 {
				if err := p.Publish(workMsg(t, workScan, fmt.Sprintf("m-%d-%d", g, i))); err != nil {
					t.Error(err)
				}
				if i%50 == 0 {
					time.Sleep(time.Millisecond)
				}
			}
		})
	}
	wg.Wait()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Published != 1001 || st.Dropped != 0 || st.Duplicates != 0 {
		t.Fatalf("stats %+v, want 1001 published", st)
	}
	if n := stored(); n != 1001 {
		t.Fatalf("%d stored, want 1001", n)
	}
}
