package queue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"

	"github.com/nats-io/nats.go/jetstream"
)

// idempotentSink applies each key once, however often it is delivered,
// like a server-side apply with a deterministic name.
type idempotentSink struct {
	mu          sync.Mutex
	applied     map[string]int // key -> times its effect happened (must be 1)
	deliveries  int
	redelivered int // deliveries of keys already applied
}

func (s *idempotentSink) handle(_ context.Context, m *Msg) Outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliveries++
	// Applying is idempotent: the effect happens on the first delivery of
	// a key; a redelivery is recognised and changes nothing.
	k := string(m.Data)
	if _, done := s.applied[k]; done {
		s.redelivered++
		return Done()
	}
	s.applied[k]++
	return Done()
}

func (s *idempotentSink) has(keys []string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if s.applied[k] != 1 {
			return false
		}
	}
	return true
}

func streamLeader(ctx context.Context, js jetstream.JetStream, stream string) string {
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return ""
	}
	info, err := s.Info(ctx)
	if err != nil || info.Cluster == nil {
		return ""
	}
	return info.Cluster.Leader
}

// Three embedded servers on loopback, streams at R3: the stream leader is
// stopped while publishing and consuming. Every message acknowledged to the
// publisher is consumed exactly once by the idempotent sink, and the
// survivors elect a new leader and go on.
func TestClusterLeaderFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	servers := natstest.Cluster(t, 3)
	urls := natstest.URLs(servers)
	pub := connect(t, urls...)
	provision(t, pub, withReplicas(3))

	sink := &idempotentSink{applied: map[string]int{}}
	for range 2 { // two consumer instances on their own connections
		c := connect(t, urls...)
		startRunner(t, c, consumerGenerator, sink.handle, WithConcurrency(4), WithIdleHeartbeat(500*time.Millisecond))
	}

	// The publisher keeps publishing; a message counts as acknowledged when
	// PublishSync returned its ack (retrying with the same id otherwise).
	var (
		mu        sync.Mutex
		acked     []string
		failures  atomic.Int64
		afterStop atomic.Int64
		stopped   atomic.Bool
	)
	pubCtx, stopPub := context.WithCancel(ctx)
	pubDone := make(chan struct{})
	go func() {
		defer close(pubDone)
		for i := 0; pubCtx.Err() == nil; i++ {
			m := workMsg(t, workGenerate, fmt.Sprintf("res-%05d", i))
			for pubCtx.Err() == nil {
				pctx, cancel := context.WithTimeout(pubCtx, 3*time.Second)
				_, err := pub.PublishSync(pctx, m)
				cancel()
				if err == nil {
					mu.Lock()
					acked = append(acked, string(m.Data))
					mu.Unlock()
					if stopped.Load() {
						afterStop.Add(1)
					}
					break
				}
				failures.Add(1)
			}
		}
	}()
	ackedCount := func() int { mu.Lock(); defer mu.Unlock(); return len(acked) }

	testkit.EventuallyTrue(t, 20*time.Second, "200 messages before the fault", func() bool { return ackedCount() >= 200 })
	leader := streamLeader(ctx, pub.JetStream(), streamWork)
	if leader == "" {
		t.Fatal("no stream leader")
	}
	for _, s := range servers {
		if s.Name() == leader {
			t.Logf("stopping stream leader %s after %d acked messages", leader, ackedCount())
			s.Shutdown()
		}
	}
	stopped.Store(true)
	stopAt := ackedCount()
	testkit.EventuallyTrue(t, 30*time.Second, "200 more messages after the fault", func() bool { return ackedCount() >= stopAt+200 })
	stopPub()
	<-pubDone

	newLeader := streamLeader(ctx, pub.JetStream(), streamWork)
	if newLeader == "" || newLeader == leader {
		t.Fatalf("stream leader after the fault = %q (was %q)", newLeader, leader)
	}
	mu.Lock()
	all := append([]string(nil), acked...)
	mu.Unlock()
	deadline := time.Now().Add(30 * time.Second)
	for !sink.has(all) {
		if time.Now().After(deadline) {
			sink.mu.Lock()
			missing := 0
			for _, k := range all {
				if sink.applied[k] != 1 {
					missing++
				}
			}
			sink.mu.Unlock()
			cons, err := pub.JetStream().Consumer(ctx, streamWork, consumerGenerator)
			if err == nil {
				ci := cons.CachedInfo()
				t.Logf("consumer: pending %d ack-pending %d redelivered %d waiting %d leader %v", ci.NumPending, ci.NumAckPending, ci.NumRedelivered, ci.NumWaiting, ci.Cluster)
			}
			t.Fatalf("%d of %d acknowledged messages not consumed; work stream holds %d", missing, len(all), streamMsgs(t, pub, streamWork))
		}
		time.Sleep(50 * time.Millisecond)
	}
	testkit.EventuallyTrue(t, 15*time.Second, "work queue empty", func() bool { return streamMsgs(t, pub, streamWork) == 0 })

	sink.mu.Lock()
	defer sink.mu.Unlock()
	for k, n := range sink.applied {
		if n != 1 {
			t.Errorf("%s applied %d times", k, n)
		}
	}
	// Published but not acknowledged (the publisher was stopped mid-retry)
	// may be applied too, but nothing else.
	if len(sink.applied) < len(all) || len(sink.applied) > len(all)+1 {
		t.Errorf("sink applied %d keys, %d were acknowledged", len(sink.applied), len(all))
	}
	if afterStop.Load() == 0 {
		t.Error("nothing was published after the leader stopped")
	}
	t.Logf("acked %d (%d after the fault), %d publish attempts failed and were retried, %d deliveries for %d keys (%d redeliveries absorbed), new leader %s",
		len(all), afterStop.Load(), failures.Load(), sink.deliveries, len(sink.applied), sink.redelivered, newLeader)
}

// Three servers, RESULTS at R3, results published through an
// AsyncPublisher while the stream leader stops: every message is stored
// once (retried under its id across the election and, for a client on
// the stopped server, the reconnect), none is dropped, and the
// publisher's counts add up.
func TestClusterAsyncPublisherFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	servers := natstest.Cluster(t, 3)
	urls := natstest.URLs(servers)
	c := connect(t, urls...)
	provision(t, c, withReplicas(3))
	var dropped atomic.Int64
	p, err := c.NewAsyncPublisher(WithMessageDeadline(60*time.Second), WithAckTimeout(time.Second),
		WithRetryBackoff(20*time.Millisecond, 500*time.Millisecond),
		WithDropHandler(func(m Message, err error) { dropped.Add(1); t.Logf("dropped %s: %v", m.Subject, err) }))
	if err != nil {
		t.Fatal(err)
	}
	const total = 3000
	publish := func(from, to int) {
		for i := from; i < to; i++ {
			m := Message{Subject: resultSubject(fmt.Sprintf("uid-%05d", i), "policy"), ID: MsgID("r", fmt.Sprint(i)), Data: []byte(fmt.Sprint(i))}
			if err := p.Publish(m); err != nil {
				t.Fatal(err)
			}
			if i%100 == 0 {
				time.Sleep(5 * time.Millisecond) // a steady flow, not one burst
			}
		}
	}
	publish(0, total/2)
	leader := streamLeader(ctx, c.JetStream(), streamResults)
	if leader == "" {
		t.Fatal("no stream leader")
	}
	for _, s := range servers {
		if s.Name() == leader {
			t.Logf("stopping stream leader %s (client on %s), %d pending", leader, c.NATS().ConnectedUrl(), p.Stats().Pending)
			s.Shutdown()
		}
	}
	publish(total/2, total)
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	st := p.Stats()
	t.Logf("stats %+v, client now on %s", st, c.NATS().ConnectedUrl())
	if st.Dropped != 0 || dropped.Load() != 0 || st.Published+st.Duplicates != total {
		t.Fatalf("stats %+v: want all %d published or recognised as duplicates, none dropped", st, total)
	}
	testkit.EventuallyTrue(t, 30*time.Second, "every result stored once", func() bool {
		s, err := c.JetStream().Stream(ctx, streamResults)
		if err != nil {
			return false
		}
		info, err := s.Info(ctx)
		return err == nil && info.State.Msgs == total && info.State.NumSubjects == total
	})
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
