package queue

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/internal/testkit"
)

// sink records what handlers saw.
type sink struct {
	mu     sync.Mutex
	seen   map[string][]delivery // key -> deliveries in order
	done   map[string]int        // key -> times acknowledged as done
	ackSeq map[string]uint64
}

type delivery struct {
	n    uint64
	at   time.Time
	last bool // Msg.LastAttempt
}

func newSink() *sink {
	return &sink{seen: map[string][]delivery{}, done: map[string]int{}, ackSeq: map[string]uint64{}}
}

func (s *sink) saw(m *Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := string(m.Data)
	s.seen[k] = append(s.seen[k], delivery{n: m.Delivery, at: time.Now(), last: m.LastAttempt()})
}

func (s *sink) finished(m *Msg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.done[string(m.Data)]++
}

func (s *sink) deliveries(k string) []delivery {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]delivery(nil), s.seen[k]...)
}

func (s *sink) doneCount() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.done)
}

func (s *sink) doneKeys() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.done))
	for k, v := range s.done {
		out[k] = v
	}
	return out
}

// startRunner runs a runner in the background; the returned stop cancels
// it and waits for Run to return.
func startRunner(t *testing.T, c *Conn, durable string, h Handler, opts ...RunnerOption) (stop func() error) {
	t.Helper()
	r, err := c.NewRunner(streamWork, durable, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- r.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case runErr = <-errc:
			case <-time.After(30 * time.Second):
				runErr = errors.New("runner did not stop")
			}
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

func publishWork(t *testing.T, c *Conn, kind WorkKind, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, err := c.PublishSync(context.Background(), workMsg(t, kind, k)); err != nil {
			t.Fatalf("publish %s: %v", k, err)
		}
	}
}

func keys(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// A handler whose goroutine stops mid-work without answering: its message
// comes back after AckWait to another consumer instance; nothing
// acknowledged is delivered again and nothing is lost.
func TestRunnerKilledHandlerRedelivered(t *testing.T) {
	const ackWait = time.Second
	e := runServer(t)
	pub := connect(t, e.ClientURL())
	provision(t, pub)
	all := keys("job", 30)
	publishWork(t, pub, workScan, all...)

	a, b := newSink(), newSink()
	victimSeen := make(chan time.Time, 1)
	connA := connect(t, e.ClientURL())
	stopA := startRunner(t, connA, consumerScanner, func(ctx context.Context, m *Msg) Outcome {
		a.saw(m)
		if string(m.Data) == "job-007" {
			select {
			case victimSeen <- time.Now():
			default:
			}
			runtime.Goexit() // the handler dies: no answer, no ack
		}
		a.finished(m)
		return Done()
	}, WithConcurrency(2), WithAckSync(true))

	var killedAt time.Time
	select {
	case killedAt = <-victimSeen:
	case <-time.After(10 * time.Second):
		t.Fatal("victim never delivered")
	}
	// Instance A stops taking work before the victim's AckWait is over
	// (it drains: what its live handler slot had buffered goes back at
	// once; the victim, and whatever the dead slot had buffered, is
	// nobody's and waits out its AckWait).
	if err := stopA(); err != nil {
		t.Fatalf("runner A: %v", err)
	}

	connB := connect(t, e.ClientURL())
	startRunner(t, connB, consumerScanner, func(ctx context.Context, m *Msg) Outcome {
		b.saw(m)
		b.finished(m)
		return Done()
	}, WithConcurrency(2))
	testkit.EventuallyTrue(t, 10*time.Second, "every job done", func() bool { return a.doneCount()+b.doneCount() == len(all) })

	v := b.deliveries("job-007")
	if len(v) != 1 || v[0].n != 2 {
		t.Fatalf("victim deliveries to B = %+v, want one, the second delivery", v)
	}
	if gap := v[0].at.Sub(killedAt); gap < ackWait-50*time.Millisecond {
		t.Fatalf("victim came back after %s, before AckWait %s", gap, ackWait)
	}
	aDone, bDone := a.doneKeys(), b.doneKeys()
	for k := range aDone {
		if _, again := bDone[k]; again {
			t.Errorf("%s was acknowledged by A and delivered again to B", k)
		}
	}
	for _, k := range all {
		if aDone[k]+bDone[k] != 1 {
			t.Errorf("%s done %d times by A and %d by B, want exactly once", k, aDone[k], bDone[k])
		}
	}
	testkit.EventuallyTrue(t, 5*time.Second, "work queue empty", func() bool { return streamMsgs(t, pub, streamWork) == 0 })
	t.Logf("A did %d, B did %d; victim back after %s", len(aDone), len(bDone), v[0].at.Sub(killedAt).Round(time.Millisecond))
}

// The consumer's process exits (its connection drops) with handlers in
// flight and messages buffered: all of them come back after AckWait to
// another instance, and nothing A acknowledged comes back.
func TestRunnerProcessExitRedelivered(t *testing.T) {
	e := runServer(t)
	pub := connect(t, e.ClientURL())
	provision(t, pub)
	all := keys("item", 60)
	publishWork(t, pub, workGenerate, all...)

	a, b := newSink(), newSink()
	release := make(chan struct{})
	connA := connect(t, e.ClientURL())
	var mu sync.Mutex
	handledA := 0
	stopA := startRunner(t, connA, consumerGenerator, func(ctx context.Context, m *Msg) Outcome {
		a.saw(m)
		mu.Lock()
		handledA++
		n := handledA
		mu.Unlock()
		if n > 10 {
			<-release // stuck in flight when the process dies
			return Retry()
		}
		a.finished(m)
		return Done()
	}, WithConcurrency(4), WithPrefetch(8), WithAckSync(true), WithDrainTimeout(time.Second))
	testkit.EventuallyTrue(t, 10*time.Second, "A to have 4 handlers stuck", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return handledA >= 14
	})
	killed := time.Now()
	connA.Close() // the process is gone: no acks, no naks
	close(release)
	_ = stopA()

	connB := connect(t, e.ClientURL())
	startRunner(t, connB, consumerGenerator, func(ctx context.Context, m *Msg) Outcome {
		b.saw(m)
		b.finished(m)
		return Done()
	}, WithConcurrency(4))
	testkit.EventuallyTrue(t, 15*time.Second, "every item done", func() bool { return a.doneCount()+b.doneCount() == len(all) })

	aDone, bDone := a.doneKeys(), b.doneKeys()
	if len(aDone) != 10 {
		t.Fatalf("A acknowledged %d, want 10", len(aDone))
	}
	redelivered := 0
	for k := range bDone {
		if _, again := aDone[k]; again {
			t.Errorf("%s acknowledged by A and delivered again", k)
		}
		d := b.deliveries(k)
		if len(a.deliveries(k)) > 0 {
			redelivered++
			if d[0].n < 2 {
				t.Errorf("%s: held by A but delivery %d at B", k, d[0].n)
			}
			if gap := d[0].at.Sub(killed); gap < 900*time.Millisecond {
				t.Errorf("%s back after %s, before AckWait", k, gap)
			}
		}
	}
	if redelivered < 4 {
		t.Fatalf("only %d messages held by A came back", redelivered)
	}
	for _, k := range all {
		if aDone[k]+bDone[k] != 1 {
			t.Errorf("%s done %d+%d times, want once", k, aDone[k], bDone[k])
		}
	}
	testkit.EventuallyTrue(t, 5*time.Second, "work queue empty", func() bool { return streamMsgs(t, pub, streamWork) == 0 })
	t.Logf("A acked %d, %d held by A came back to B after the exit, B did %d", len(aDone), redelivered, len(bDone))
}

// A poison message reaches DEAD with its reason after one
// attempt; a message that keeps failing reaches it after MaxDeliver
// attempts; neither is delivered again, and both leave the work queue.
// A retry-after handler sees its delays between deliveries.
func TestRunnerPoisonAndRetries(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	// A long AckWait: a redelivery well before it can only be the nak delay.
	const ackWait = 5 * time.Second
	provision(t, c, withConsumers(ConsumerSpec{Stream: streamWork, Durable: consumerCleaner,
		FilterSubjects: []string{testTopology.WorkFilter(workCleanup)}, AckWait: ackWait}))
	publishWork(t, c, workCleanup, "poison", "flaky", "slow-ok", "panics")

	s := newSink()
	const delay = 300 * time.Millisecond
	startRunner(t, c, consumerCleaner, func(ctx context.Context, m *Msg) Outcome {
		s.saw(m)
		switch string(m.Data) {
		case "poison":
			return Poison("cannot parse policy")
		case "flaky":
			return RetryAfter(delay).Because(errors.New("apiserver unavailable"))
		case "slow-ok":
			if m.Delivery < 3 {
				return RetryAfter(delay)
			}
		case "panics":
			if m.Delivery == 1 {
				panic("boom")
			}
		}
		s.finished(m)
		return Done()
	}, WithMaxDeliver(3), WithRetryDelays(100*time.Millisecond, time.Second))

	testkit.EventuallyTrue(t, 10*time.Second, "two dead letters", func() bool { return streamMsgs(t, c, streamDead) == 2 })
	testkit.EventuallyTrue(t, 10*time.Second, "the rest done", func() bool { return s.doneCount() == 2 })
	time.Sleep(time.Second) // nothing more comes back (nothing is left unanswered)

	if d := s.deliveries("poison"); len(d) != 1 {
		t.Fatalf("poison delivered %d times, want 1", len(d))
	}
	flaky := s.deliveries("flaky")
	if len(flaky) != 3 {
		t.Fatalf("flaky delivered %d times, want MaxDeliver=3", len(flaky))
	}
	for i, d := range flaky {
		if d.last != (i == 2) {
			t.Errorf("delivery %d of 3: LastAttempt %v", d.n, d.last)
		}
	}
	for _, d := range [][]delivery{flaky, s.deliveries("slow-ok")} {
		for i := 1; i < len(d); i++ {
			gap := d[i].at.Sub(d[i-1].at)
			if d[i].n != uint64(i+1) || gap < delay-20*time.Millisecond || gap >= ackWait/2 {
				t.Errorf("delivery %d after %s: want the %s retry delay (not AckWait)", d[i].n, gap, delay)
			}
		}
	}
	if p := s.deliveries("panics"); len(p) != 2 || p[1].n != 2 {
		t.Errorf("panicking handler deliveries = %+v, want a retry", p)
	}

	dead := map[string]DeadLetter{}
	for _, d := range deadLetters(t, c) {
		dead[string(d.Data)] = d
	}
	p, f := dead["poison"], dead["flaky"]
	poisonSubj, _ := workSubject(workCleanup, "poison")
	if p.Subject != poisonSubj || p.Stream != streamWork || p.Sequence != 1 || p.Deliveries != 1 ||
		!strings.Contains(p.Reason, "cannot parse policy") || p.Consumer != consumerCleaner {
		t.Errorf("poison dead letter = %+v", p)
	}
	if f.Sequence != 2 || f.Deliveries != 3 || !strings.Contains(f.Reason, "apiserver unavailable") {
		t.Errorf("flaky dead letter = %+v", f)
	}
	if n := streamMsgs(t, c, streamWork); n != 0 {
		t.Errorf("WORK still holds %d messages", n)
	}
}

// Deliveries that never got an answer (killed handlers) count towards
// MaxDeliver: the next delivery dead-letters the message without running
// the handler, so it never loops.
func TestRunnerLostDeliveriesDeadLetter(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	publishWork(t, c, workMutate, "doomed")
	s := newSink()
	startRunner(t, c, consumerGenerator, func(ctx context.Context, m *Msg) Outcome {
		s.saw(m)
		runtime.Goexit()
		return Done()
	}, WithMaxDeliver(2))
	testkit.EventuallyTrue(t, 10*time.Second, "dead letter", func() bool { return streamMsgs(t, c, streamDead) == 1 })
	if d := s.deliveries("doomed"); len(d) != 2 {
		t.Fatalf("handler ran %d times, want 2", len(d))
	}
	dl := deadLetters(t, c)
	if len(dl) != 1 || dl[0].Deliveries != 3 || !strings.Contains(dl[0].Reason, "more than max deliver 2") {
		t.Fatalf("dead letters = %+v", dl)
	}
	testkit.EventuallyTrue(t, 5*time.Second, "work queue empty", func() bool { return streamMsgs(t, c, streamWork) == 0 })
}

// On shutdown a runner finishes what is in flight and gives back (naks)
// what it had buffered, so another instance takes it at once instead of
// after AckWait.
func TestRunnerDrain(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c, withConsumers(ConsumerSpec{Stream: streamWork, Durable: "drain", FilterSubjects: []string{testTopology.WorkFilter(workScan)}, AckWait: 20 * time.Second}))
	all := keys("d", 20)
	publishWork(t, c, workScan, all...)
	a := newSink()
	started := make(chan struct{}, len(all))
	stopA := startRunner(t, c, "drain", func(ctx context.Context, m *Msg) Outcome {
		a.saw(m)
		started <- struct{}{}
		time.Sleep(300 * time.Millisecond)
		a.finished(m)
		return Done()
	}, WithConcurrency(2), WithPrefetch(10))
	<-started
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	inFlight := a.doneCount()
	if inFlight < 1 || inFlight > 4 {
		t.Fatalf("A finished %d messages in flight, want 1 to 4", inFlight)
	}
	b := newSink()
	start := time.Now()
	startRunner(t, c, "drain", func(ctx context.Context, m *Msg) Outcome {
		b.saw(m)
		b.finished(m)
		return Done()
	}, WithConcurrency(4))
	testkit.EventuallyTrue(t, 10*time.Second, "all done", func() bool { return a.doneCount()+b.doneCount() == len(all) })
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("B needed %s: A's buffered messages were not given back", took)
	}
	for k := range a.doneKeys() {
		if len(b.deliveries(k)) > 0 {
			t.Errorf("%s finished by A during drain and delivered again", k)
		}
	}
}

func TestRunnerOptions(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	h := func(context.Context, *Msg) Outcome { return Done() }
	for name, opt := range map[string]RunnerOption{
		"concurrency": WithConcurrency(0), "max deliver": WithMaxDeliver(0), "retry": WithRetryDelays(time.Second, time.Millisecond),
		"work": WithMaxWorkTime(0), "drain": WithDrainTimeout(-1), "prefetch": WithPrefetch(0), "progress": WithProgressInterval(0),
	} {
		if _, err := c.NewRunner(streamWork, "x", h, opt); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
	if _, err := c.NewRunner(streamWork, "", h); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("no durable: %v", err)
	}
	if Done().String() != "done" || Poison("x").String() != "poison: x" || (Outcome{}).String() != "unset" {
		t.Error("outcome strings")
	}
}

// Work that takes longer than AckWait is kept alive with in-progress acks:
// it is not delivered to anyone else meanwhile.
func TestRunnerLongWorkInProgress(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	publishWork(t, c, workScan, "long")
	s := newSink()
	h := func(ctx context.Context, m *Msg) Outcome {
		s.saw(m)
		select {
		case <-time.After(2500 * time.Millisecond): // 2.5 × AckWait
		case <-ctx.Done():
			return Retry()
		}
		s.finished(m)
		return Done()
	}
	startRunner(t, c, consumerScanner, h)
	other := connect(t, e.ClientURL())
	startRunner(t, other, consumerScanner, h)
	testkit.EventuallyTrue(t, 10*time.Second, "long work done", func() bool { return s.doneCount() == 1 })
	time.Sleep(200 * time.Millisecond)
	if d := s.deliveries("long"); len(d) != 1 {
		t.Fatalf("long work delivered %d times, want 1", len(d))
	}
}

// A runner whose consumer is deleted waits for it to be provisioned again
// and goes on.
func TestRunnerConsumerRecreated(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	s := newSink()
	startRunner(t, c, consumerScanner, func(ctx context.Context, m *Msg) Outcome {
		s.saw(m)
		s.finished(m)
		return Done()
	}, WithIdleHeartbeat(500*time.Millisecond))
	publishWork(t, c, workScan, "first")
	testkit.EventuallyTrue(t, 5*time.Second, "first done", func() bool { return s.doneCount() == 1 })
	if err := c.JetStream().DeleteConsumer(context.Background(), streamWork, consumerScanner); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	provision(t, c)
	publishWork(t, c, workScan, "second")
	testkit.EventuallyTrue(t, 15*time.Second, "second done after the consumer came back", func() bool { return s.doneCount() == 2 })
}

// A handler's context ends at MaxWorkTime, and when a drain runs out of
// time; the handler's answer still counts.
func TestRunnerHandlerContext(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	publishWork(t, c, workScan, "slow")
	errs := make(chan error, 2)
	stop := startRunner(t, c, consumerScanner, func(ctx context.Context, m *Msg) Outcome {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("handler context has no deadline")
		}
		<-ctx.Done()
		errs <- ctx.Err()
		return RetryAfter(50 * time.Millisecond)
	}, WithMaxWorkTime(300*time.Millisecond), WithDrainTimeout(200*time.Millisecond))
	select {
	case err := <-errs:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("first attempt ended with %v, want DeadlineExceeded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("MaxWorkTime did not end the handler's context")
	}
	// The retry is running now (or soon); stopping gives it 200ms.
	time.Sleep(150 * time.Millisecond)
	start := time.Now()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("stop took %s", took)
	}
	select {
	case err := <-errs:
		if err == nil {
			t.Fatal("nil context error")
		}
	default:
		t.Fatal("second attempt's context was not ended by the drain timeout")
	}
}

// backlogMetric reads a gauge of the consumer "backlog" (0 before the
// first read sets it).
func backlogMetric(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	v, _ := metricValue(t, reg, name, map[string]string{labelConsumer: "backlog"})
	return v
}

// TestRunnerBacklog: a runner reports its consumer's backlog (waiting and
// in flight) and the age of the oldest message not yet done, and both go
// to zero once the work is done. Other work kinds on the stream (outside
// the consumer's filter) are not counted.
func TestRunnerBacklog(t *testing.T) {
	e := runServer(t)
	metrics, reg := promMetrics(t)
	c, err := Connect(t.Context(), WithURL(e.ClientURL()), WithTopology(testTopology), WithMetrics(metrics), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	provision(t, c, withConsumers(ConsumerSpec{Stream: streamWork, Durable: "backlog", FilterSubjects: []string{testTopology.WorkFilter(workScan)}, AckWait: 20 * time.Second}))
	publishWork(t, c, workGenerate, keys("other", 3)...)
	publishWork(t, c, workScan, keys("b", 6)...)
	time.Sleep(1100 * time.Millisecond) // the oldest is over a second old
	release := make(chan struct{})
	r, err := c.NewRunner(streamWork, "backlog", func(ctx context.Context, m *Msg) Outcome {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return Done()
	}, WithConcurrency(2), WithBacklogInterval(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("runner: %v", err)
		}
	}()
	testkit.EventuallyTrue(t, 5*time.Second, "backlog of 6, oldest over a second", func() bool {
		return backlogMetric(t, reg, "verdict_queue_backlog") == 6 && backlogMetric(t, reg, "verdict_queue_oldest_pending_age_seconds") >= 1
	})
	close(release)
	testkit.EventuallyTrue(t, 5*time.Second, "backlog drained", func() bool {
		return backlogMetric(t, reg, "verdict_queue_backlog") == 0 && backlogMetric(t, reg, "verdict_queue_oldest_pending_age_seconds") == 0
	})
	if err := WithBacklogInterval(0)(&runnerOptions{}); !errors.Is(err, ErrInvalidOption) {
		t.Fatalf("interval 0: %v", err)
	}
}

// TestRunnerCountsOutcomes: the runner counts every message by consumer,
// work kind, outcome and the reason its handler named
// (work_items_total), so a worker keeps no bookkeeping of its own; a
// retry on the last attempt counts as dead-lettered, and a poison
// message's dead letter carries its reason and detail.
func TestRunnerCountsOutcomes(t *testing.T) {
	e := runServer(t)
	c, reg := connectWithMetrics(t, e.ClientURL(), t.Name())
	provision(t, c)
	outcomes := map[string]Outcome{
		"applied": Done().For("applied"),
		"gone":    Skip("policyGone", "the policy was deleted"),
		"bad":     Poison("no rule x").For("invalidItem"),
		"flaky":   Retry().For("apiError").Because(errors.New("connection refused")),
	}
	for k := range outcomes {
		publishWork(t, c, workGenerate, k)
	}
	startRunner(t, c, consumerGenerator, func(_ context.Context, m *Msg) Outcome {
		return outcomes[string(m.Data)]
	}, WithMaxDeliver(2), WithRetryDelays(10*time.Millisecond, 10*time.Millisecond))

	want := map[[2]string]float64{
		{ResultProcessed, "applied"}:        1,
		{ResultSkipped, "policyGone"}:       1,
		{ResultDeadLettered, "invalidItem"}: 1,
		{ResultRetried, "apiError"}:         1, // the first attempt
		{ResultDeadLettered, "apiError"}:    1, // the second and last
	}
	testkit.Eventually(t, 10*time.Second, "every outcome counted", func() error {
		for k, n := range want {
			labels := map[string]string{labelConsumer: consumerGenerator, labelKind: string(workGenerate), labelOutcome: k[0], labelReason: k[1]}
			if got, _ := metricValue(t, reg, metricPrefix+"work_items_total", labels); got != n {
				return fmt.Errorf("%v: %v, want %v", k, got, n)
			}
		}
		return nil
	})
	reasons := map[string]bool{}
	testkit.Eventually(t, 10*time.Second, "two dead letters", func() error {
		reasons = map[string]bool{}
		for _, d := range deadLetters(t, c) {
			reasons[d.Reason] = true
		}
		if len(reasons) != 2 {
			return fmt.Errorf("dead letters %v", reasons)
		}
		return nil
	})
	for _, r := range []string{"poison: invalidItem: no rule x", "after 2 deliveries: connection refused"} {
		if !reasons[r] {
			t.Errorf("no dead letter %q in %v", r, reasons)
		}
	}
}
