package bus

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/queue"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"
	"github.com/verdict-dev/verdict/pkg/queue/queueprom"
)

// The tests of Verdict's streams, subjects and NATS users run them on a
// real nats-server.

func testLogger(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.WarnLevel).With().Timestamp().Logger()
}

// runServer starts an embedded server on a free port with a temporary store.
func runServer(t testing.TB) *embedded.Server {
	t.Helper()
	return natstest.Server(t)
}

// connect connects with Verdict's topology and fast reconnects.
func connect(t testing.TB, url string) *queue.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, queue.WithURL(url), queue.WithReconnectBackoff(20*time.Millisecond, 250*time.Millisecond),
		queue.WithLogger(testLogger(t)), queue.WithName(t.Name()))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// provision provisions Verdict's streams and consumers (with a short
// AckWait), then opts.
func provision(t testing.TB, c *queue.Conn, opts ...ProvisionOption) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	specs := DefaultConsumers()
	for i := range specs {
		specs[i].AckWait = time.Second
	}
	if err := Provision(ctx, c, append([]ProvisionOption{WithConsumers(specs...)}, opts...)...); err != nil {
		t.Fatalf("Provision: %v", err)
	}
}

func promMetrics(t testing.TB) (*queue.Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := queueprom.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// streamMsgs is how many messages the stream holds.
func streamMsgs(t testing.TB, c *queue.Conn, stream string) uint64 {
	t.Helper()
	s, err := c.JetStream().Stream(t.Context(), stream)
	if err != nil {
		t.Fatalf("stream %s: %v", stream, err)
	}
	return s.CachedInfo().State.Msgs
}

func workMsg(t testing.TB, kind queue.WorkKind, key string) queue.Message {
	t.Helper()
	subj, err := WorkSubject(kind, key)
	if err != nil {
		t.Fatal(err)
	}
	return queue.Message{Subject: subj, ID: queue.MsgID(string(kind), key), Data: []byte(key)}
}

func workMsgNats(subject, data string) *nats.Msg {
	return &nats.Msg{Subject: subject, Data: []byte(data)}
}

func publishWork(t *testing.T, c *queue.Conn, kind queue.WorkKind, keys ...string) {
	t.Helper()
	for _, k := range keys {
		if _, err := c.PublishSync(context.Background(), workMsg(t, kind, k)); err != nil {
			t.Fatalf("publish %s: %v", k, err)
		}
	}
}

// startRunner runs h over the durable consumer of VERDICT_WORK until the
// test ends.
func startRunner(t *testing.T, c *queue.Conn, durable string, h queue.Handler, opts ...queue.RunnerOption) {
	t.Helper()
	r, err := c.NewRunner(StreamWork, durable, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = r.Run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
}
