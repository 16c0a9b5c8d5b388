package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
)

// connectWithMetrics connects to url with its own metrics registry.
func connectWithMetrics(t *testing.T, url, name string) (*Conn, *prometheus.Registry) {
	t.Helper()
	metrics, reg := promMetrics(t)
	c, err := Connect(t.Context(), WithURL(url), WithTopology(testTopology), WithMetrics(metrics), WithLogger(testLogger(t)), WithName(name),
		WithReconnectBackoff(20*time.Millisecond, 250*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c, reg
}

func reprovisions(t *testing.T, reg *prometheus.Registry, cause string) float64 {
	t.Helper()
	v, _ := metricValue(t, reg, metricPrefix+"reprovisions_total", map[string]string{labelCause: cause, labelResult: "ok"})
	return v
}

// An unauthenticated client deletes WORK (issue 28, finding 7):
// the webhook's next generate publish finds no stream, provisions the
// streams again and is stored within a second or two instead of failing
// after its deadline; the generator finds its consumer gone with the
// stream, provisions it again and works the item. Deleting the consumer
// alone, and RESULTS under the asynchronous publisher, heal the
// same way. Every re-provisioning is counted.
func TestDeletedStreamsAndConsumersComeBack(t *testing.T) {
	e := runServer(t)
	webhook, webhookReg := connectWithMetrics(t, e.ClientURL(), "webhook")
	worker, workerReg := connectWithMetrics(t, e.ClientURL(), "generator")
	attacker := connect(t, e.ClientURL())

	provision(t, webhook, withConsumers()) // streams only, as the webhook does
	gen, _ := defaultConsumer(consumerGenerator)
	gen.AckWait = time.Second
	provision(t, worker, withConsumers(gen))
	publishWork(t, webhook, workGenerate, "before")

	// The stream goes, with every consumer on it, while no worker runs:
	// the webhook's publish heals it.
	if err := attacker.JetStream().DeleteStream(t.Context(), streamWork); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := webhook.PublishSync(ctx, workMsg(t, workGenerate, "after-stream")); err != nil {
		t.Fatalf("generate work after WORK was deleted: %v", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("the publish took %s to heal the stream, want under 2s", took)
	}
	if n := reprovisions(t, webhookReg, causeStreamMissing); n < 1 {
		t.Errorf("webhook's reprovisions_total{cause=streamMissing} = %v, want at least 1", n)
	}

	// The generator starts: its consumer went with the stream, and it
	// provisions it again.
	got := make(chan string, 16)
	startRunner(t, worker, consumerGenerator, func(_ context.Context, m *Msg) Outcome {
		got <- string(m.Data)
		return Done()
	}, WithConcurrency(1))
	awaitWork(t, got, "after-stream")
	if n := reprovisions(t, workerReg, causeConsumerMissing); n < 1 {
		t.Errorf("generator's reprovisions_total{cause=consumerMissing} = %v, want at least 1", n)
	}

	// The stream goes while the generator runs: whichever finds it first
	// heals it, and the work flows again.
	healed := func() float64 {
		return reprovisions(t, webhookReg, causeStreamMissing) + reprovisions(t, workerReg, causeConsumerMissing)
	}
	before := healed()
	time.Sleep(ReprovisionInterval)
	if err := attacker.JetStream().DeleteStream(t.Context(), streamWork); err != nil {
		t.Fatal(err)
	}
	publishWork(t, webhook, workGenerate, "while-running")
	awaitWork(t, got, "while-running")
	if n := healed(); n <= before {
		t.Errorf("re-provisionings = %v after the stream was deleted under a running generator, want more than %v", n, before)
	}

	// The consumer alone goes.
	if err := attacker.JetStream().DeleteConsumer(t.Context(), streamWork, consumerGenerator); err != nil {
		t.Fatal(err)
	}
	before = reprovisions(t, workerReg, causeConsumerMissing)
	publishWork(t, webhook, workGenerate, "after-consumer")
	awaitWork(t, got, "after-consumer")
	if n := reprovisions(t, workerReg, causeConsumerMissing); n <= before {
		t.Errorf("generator's reprovisions_total{cause=consumerMissing} = %v after the consumer was deleted, want more than %v", n, before)
	}

	// RESULTS goes under the asynchronous publisher.
	pub, err := webhook.NewAsyncPublisher(WithMessageDeadline(5 * time.Second))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pub.Close(context.Background()) })
	if err := attacker.JetStream().DeleteStream(t.Context(), streamResults); err != nil {
		t.Fatal(err)
	}
	time.Sleep(time.Second) // past the rate limit of the first healing
	if err := pub.Publish(Message{Subject: resultSubject("uid-1", "policy"), ID: MsgID("uid-1", "policy"), Data: []byte("r")}); err != nil {
		t.Fatal(err)
	}
	fctx, fcancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer fcancel()
	if err := pub.Flush(fctx); err != nil {
		t.Fatal(err)
	}
	if st := pub.Stats(); st.Published != 1 {
		t.Fatalf("result after RESULTS was deleted: %+v, want it published", st)
	}
	if n := streamMsgs(t, webhook, streamResults); n != 1 {
		t.Errorf("RESULTS holds %d messages, want 1", n)
	}
}

// A connection that never provisioned (the pipeline CLI, verdict work)
// creates nothing when a stream is missing: it is not Verdict's service
// and cannot know the limits.
func TestNoReprovisionWithoutProvision(t *testing.T) {
	e := runServer(t)
	c, reg := connectWithMetrics(t, e.ClientURL(), "cli")
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	if _, err := c.PublishSync(ctx, workMsg(t, workGenerate, "x")); err == nil {
		t.Fatal("publish without a stream succeeded")
	}
	if _, err := c.JetStream().Stream(t.Context(), streamWork); err == nil {
		t.Error("a connection that never provisioned created WORK")
	} else if !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Errorf("stream lookup: %v", err)
	}
	if n := reprovisions(t, reg, causeStreamMissing); n != 0 {
		t.Errorf("reprovisions_total = %v, want 0", n)
	}
}

func awaitWork(t *testing.T, got <-chan string, want string) {
	t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case k := <-got:
			if k == want {
				return
			}
		case <-timeout:
			t.Fatalf("work item %q not delivered within 10s", want)
		}
	}
}
