package bus

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/queue"

	"github.com/nats-io/nats.go/jetstream"
)

// Provisioning is idempotent and safe from several replicas at once.
func TestProvisionIdempotentConcurrent(t *testing.T) {
	e := runServer(t)
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 4 {
		c := connect(t, e.ClientURL())
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			errs <- Provision(ctx, c)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("concurrent Provision: %v", err)
		}
	}
	c := connect(t, e.ClientURL())
	provision(t, c, WithDuplicateWindow(time.Minute)) // an update
	ctx := context.Background()
	for _, name := range []string{StreamResults, StreamSchedules, StreamWork, StreamDead} {
		s, err := c.JetStream().Stream(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		cfg := s.CachedInfo().Config
		if cfg.Duplicates != time.Minute || cfg.Replicas != 1 || cfg.Storage != jetstream.FileStorage {
			t.Errorf("%s config = duplicates %s replicas %d storage %s", name, cfg.Duplicates, cfg.Replicas, cfg.Storage)
		}
		switch name {
		case StreamResults:
			if cfg.MaxMsgsPerSubject != DefaultResultHistory || cfg.Retention != jetstream.LimitsPolicy ||
				cfg.MaxBytes != DefaultResultsMaxBytes || cfg.Discard != jetstream.DiscardNew {
				t.Errorf("results: %+v", cfg)
			}
		case StreamWork:
			if cfg.Retention != jetstream.WorkQueuePolicy || cfg.AllowMsgSchedules || cfg.Discard != jetstream.DiscardNew ||
				cfg.MaxMsgs != DefaultWorkMaxMsgs || cfg.MaxBytes != DefaultWorkMaxBytes ||
				len(cfg.Sources) != 1 || cfg.Sources[0].Name != StreamSchedules {
				t.Errorf("work: %+v", cfg)
			}
		case StreamSchedules:
			if !cfg.AllowMsgSchedules || cfg.MaxMsgsPerSubject != 1 {
				t.Errorf("schedules: %+v", cfg)
			}
		}
	}
	// What the server holds is what Provision asks for: replicas starting
	// later change nothing.
	want, err := StreamConfigs(WithDuplicateWindow(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		s, err := c.JetStream().Stream(ctx, w.Name)
		if err != nil {
			t.Fatal(err)
		}
		if !queue.SameStreamConfig(s.CachedInfo().Config, w) {
			t.Errorf("%s: the server's config differs from Provision's: it would be updated at every start:\n%+v\n%+v", w.Name, s.CachedInfo().Config, w)
		}
	}
	for _, spec := range DefaultConsumers() {
		cons, err := c.JetStream().Consumer(ctx, spec.Stream, spec.Durable)
		if err != nil {
			t.Fatalf("consumer %s: %v", spec.Durable, err)
		}
		if cfg := cons.CachedInfo().Config; cfg.AckPolicy != jetstream.AckExplicitPolicy || cfg.MaxDeliver != -1 {
			t.Errorf("consumer %s: %+v", spec.Durable, cfg)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for name, opt := range map[string]ProvisionOption{
		"replicas 0":          WithReplicas(0),
		"history 0":           WithResultHistory(0),
		"history 65":          WithResultHistory(MaxResultHistory + 1),
		"results max bytes 0": WithResultsMaxBytes(0),
		"work max msgs 0":     WithWorkMaxMsgs(0),
		"work max bytes -1":   WithWorkMaxBytes(-1),
	} {
		if err := Provision(ctx, c, opt); !errors.Is(err, queue.ErrInvalidOption) {
			t.Errorf("%s: %v", name, err)
		}
	}
	if err := Provision(ctx, c, WithMsgSchedules(false)); !errors.Is(err, queue.ErrProvision) {
		t.Errorf("turning schedules off was not refused: %v", err)
	}
}

// Message schedules live in VERDICT_SCHEDULES: a schedule stored under
// ScheduleSubject fires ticks on its ScheduleTarget, which VERDICT_WORK
// sources as cleanup work that the cleaner consumer receives; the schedule
// itself is not taken as work.
func TestWorkStreamMessageSchedules(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	target, _ := WorkSubject(WorkCleanup, "ns/cleanup.policy")
	tick, _ := ScheduleTarget(WorkCleanup, "ns/cleanup.policy")
	subject, _ := topology.ScheduleSubject(WorkCleanup, "ns/cleanup.policy")
	_, err := c.JetStream().PublishMsg(context.Background(), workMsgNats(subject, "tick"),
		jetstream.WithScheduleEvery(time.Second), jetstream.WithScheduleTarget(tick), jetstream.WithMsgID("sched-1"))
	if err != nil {
		t.Fatalf("publish schedule: %v", err)
	}
	subjects := make(chan string, 10)
	startRunner(t, c, ConsumerCleaner, func(ctx context.Context, m *queue.Msg) queue.Outcome {
		subjects <- m.Subject
		return queue.Done()
	})
	select {
	case subj := <-subjects:
		if subj != target {
			t.Fatalf("cleaner got %s, want %s", subj, target)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no scheduled cleanup work within 5s")
	}
}

// A stream at its limits refuses what does not fit, with an error that
// wraps queue.ErrStreamFull (and queue.ErrPublishRejected), counted by the publisher
// as dropped for the reason streamFull; what it stored stays. VERDICT_WORK
// is bounded by messages and bytes; VERDICT_RESULTS by bytes, and keeps a
// history of WithResultHistory messages per subject, still replacing the
// oldest of a full subject when the stream is full.

func TestStreamLimits(t *testing.T) {
	e := runServer(t)
	metrics, reg := promMetrics(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Connect(ctx, queue.WithURL(e.ClientURL()), queue.WithMetrics(metrics), queue.WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const resultsBytes = 2048
	provision(t, c, WithWorkMaxMsgs(3), WithResultsMaxBytes(resultsBytes), WithResultHistory(2))

	// VERDICT_WORK: three items fit, the fourth is refused at once.
	for i := range 3 {
		if _, err := c.PublishSync(ctx, workMsg(t, WorkGenerate, fmt.Sprint("item-", i))); err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
	}
	begin := time.Now()
	_, err = c.PublishSync(ctx, workMsg(t, WorkGenerate, "item-3"))
	if !errors.Is(err, queue.ErrStreamFull) || !errors.Is(err, queue.ErrPublishRejected) {
		t.Fatalf("publish to a full work queue: %v, want queue.ErrStreamFull", err)
	}
	if took := time.Since(begin); took > time.Second {
		t.Errorf("a full stream's refusal took %v: it was retried", took)
	}
	if n := streamMsgs(t, c, StreamWork); n != 3 {
		t.Errorf("work queue holds %d messages, want the 3 it took", n)
	}
	if got, _ := testkit.MetricValue(t, reg, "verdict_queue_publish_dropped_total", map[string]string{"publisher": "sync", "reason": "streamFull"}); got != 1 {
		t.Errorf("sync drops for streamFull = %v, want 1", got)
	}

	// The asynchronous publisher drops it at once too, counted and
	// reported to the drop handler.
	var dropped []error
	var mu sync.Mutex
	p, err := c.NewAsyncPublisher(queue.WithPublisherName("results"), queue.WithDropHandler(func(_ queue.Message, err error) {
		mu.Lock()
		dropped = append(dropped, err)
		mu.Unlock()
	}))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Publish(workMsg(t, WorkGenerate, "item-4")); err != nil {
		t.Fatal(err)
	}
	if err := p.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(dropped) != 1 || !errors.Is(dropped[0], queue.ErrStreamFull) {
		t.Errorf("drop handler saw %v, want one queue.ErrStreamFull", dropped)
	}
	mu.Unlock()
	if st := p.Stats(); st.Dropped != 1 || st.Published != 0 {
		t.Errorf("async stats %+v, want one drop", st)
	}
	if got, _ := testkit.MetricValue(t, reg, "verdict_queue_publish_dropped_total", map[string]string{"publisher": "results", "reason": "streamFull"}); got != 1 {
		t.Errorf("async drops for streamFull = %v, want 1", got)
	}

	// VERDICT_RESULTS: a history of two per subject.
	result := func(uid, policy string, i int) queue.Message {
		data := fmt.Sprintf("%s %s %03d %s", uid, policy, i, strings.Repeat("x", 100))
		return queue.Message{Subject: ResultSubject(uid, policy), ID: queue.MsgID(uid, policy, fmt.Sprint(i)), Data: []byte(data)}
	}
	for i := range 3 {
		if _, err := c.PublishSync(ctx, result("uid-a", "p", i)); err != nil {
			t.Fatal(err)
		}
	}
	var kept []string
	if _, err := c.Replay(ctx, StreamResults, func(m queue.ReplayMsg) error {
		kept = append(kept, string(m.Data[:13]))
		return nil
	}, queue.WithReplayAll(), queue.WithReplayFilter(ResultSubject("uid-a", "p"))); err != nil {
		t.Fatal(err)
	}
	if strings.Join(kept, ",") != "uid-a p 001 x,uid-a p 002 x" {
		t.Errorf("history of uid-a/p = %q, want the last two", kept)
	}
	// Fill it with new subjects until one is refused.
	full := -1
	for i := range resultsBytes / 100 {
		_, err := c.PublishSync(ctx, result(fmt.Sprint("uid-", i), "p", 0))
		if errors.Is(err, queue.ErrStreamFull) {
			full = i
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if full < 0 {
		t.Fatalf("VERDICT_RESULTS of %d bytes never filled", resultsBytes)
	}
	before := streamMsgs(t, c, StreamResults)
	// A subject at its history limit still takes a message of the same
	// size (it replaces its oldest); stored results are never deleted to
	// make room.
	if _, err := c.PublishSync(ctx, result("uid-a", "p", 3)); err != nil {
		t.Errorf("replacing within a full subject: %v", err)
	}
	if _, err := c.PublishSync(ctx, result(fmt.Sprint("uid-", full), "p", 0)); !errors.Is(err, queue.ErrStreamFull) {
		t.Errorf("a new subject in a full stream: %v, want queue.ErrStreamFull", err)
	}
	if after := streamMsgs(t, c, StreamResults); after != before {
		t.Errorf("full stream went from %d to %d messages", before, after)
	}
	if _, err := c.LastMsg(ctx, StreamResults, ResultSubject("uid-0", "p")); err != nil {
		t.Errorf("the first subject stored: %v", err)
	}

	// DeleteMsg removes one message; deleting it again is no error.
	last, err := c.LastMsg(ctx, StreamResults, ResultSubject("uid-a", "p"))
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := c.DeleteMsg(ctx, StreamResults, last.Sequence); err != nil {
			t.Fatalf("delete %d: %v", last.Sequence, err)
		}
	}
	if m, err := c.LastMsg(ctx, StreamResults, ResultSubject("uid-a", "p")); err != nil || !strings.HasPrefix(string(m.Data), "uid-a p 002") {
		t.Errorf("after deleting the last of uid-a/p: %q, %v; want 002", m.Data, err)
	}
}

// A VERDICT_WORK made before VERDICT_SCHEDULES existed (with message
// schedules on) cannot be bounded in place: Provision says so, and still
// provisions everything else.
func TestProvisionLegacyWorkStream(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := c.JetStream().CreateStream(ctx, jetstream.StreamConfig{Name: StreamWork, Subjects: []string{workPrefix + ">"},
		Retention: jetstream.WorkQueuePolicy, AllowMsgSchedules: true, AllowRollup: true}); err != nil {
		t.Fatal(err)
	}
	err := Provision(ctx, c, WithConsumers(DefaultConsumers()...))
	if !errors.Is(err, queue.ErrProvision) || !strings.Contains(err.Error(), "drain it, delete it") {
		t.Fatalf("Provision over a legacy VERDICT_WORK: %v", err)
	}
	for _, name := range []string{StreamResults, StreamSchedules, StreamDead} {
		if _, err := c.JetStream().Stream(ctx, name); err != nil {
			t.Errorf("%s not provisioned: %v", name, err)
		}
	}
	if _, err := c.JetStream().Consumer(ctx, StreamWork, ConsumerScanner); err != nil {
		t.Errorf("scanner consumer on the legacy stream: %v", err)
	}
}
