package queue

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"

	"github.com/prometheus/client_golang/prometheus"
)

// NewPromMetrics is queueprom.NewMetrics, set by prom_test.go (package
// queue_test): this package's tests read their metrics through
// prometheus, as the services serve them, but cannot import queueprom
// themselves (it imports this package).
var NewPromMetrics func(prometheus.Registerer) (*Metrics, error)

// promMetrics makes the package's metrics on a fresh prometheus registry.
func promMetrics(t testing.TB) (*Metrics, *prometheus.Registry) {
	t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewPromMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m, reg
}

// metricValue reads one counter or gauge series from a registry.
func metricValue(t testing.TB, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	return testkit.MetricValue(t, reg, name, labels)
}

func TestMetricsOnCallerRegistry(t *testing.T) {
	e := runServer(t)
	metrics, reg := promMetrics(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, WithURL(e.ClientURL()), WithTopology(testTopology), WithMetrics(metrics), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	provision(t, c)
	m := workMsg(t, workScan, "x")
	for range 2 {
		if _, err := c.PublishSync(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	sync := map[string]string{"publisher": "sync"}
	if got, ok := metricValue(t, reg, "verdict_queue_published_total", sync); !ok || got != 1 {
		t.Errorf("published_total = %v (%v), want 1", got, ok)
	}
	if got, ok := metricValue(t, reg, "verdict_queue_publish_duplicates_total", sync); !ok || got != 1 {
		t.Errorf("publish_duplicates_total = %v (%v), want 1", got, ok)
	}
	// Two connections sharing one Metrics.
	c2, err := Connect(ctx, WithURL(e.ClientURL()), WithTopology(testTopology), WithMetrics(c.Metrics()), WithName("second"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c2.PublishSync(ctx, workMsg(t, workScan, "y")); err != nil {
		t.Fatal(err)
	}
	c2.Close()
	if got, _ := metricValue(t, reg, "verdict_queue_published_total", sync); got != 2 {
		t.Errorf("published_total after the second connection's publish = %v, want 2", got)
	}
	// The client reports the close asynchronously.
	testkit.EventuallyTrue(t, 5*time.Second, "connection_events_total{event=closed} 1", func() bool {
		got, _ := metricValue(t, reg, "verdict_queue_connection_events_total", map[string]string{"event": "closed"})
		return got == 1
	})
}

// TestNoMetrics: without WithMetrics a Conn records nothing, and
// everything made from it works: the metrics that record nothing take
// every call.
func TestNoMetrics(t *testing.T) {
	m := MetricsFrom(nil)
	for _, v := range []CounterVec{m.connEvents, m.published, m.duplicates, m.retried, m.dropped, m.handled, m.ackErrors, m.deadLettered, m.deadErrors, m.replayed} {
		c := v.WithLabelValues("a", "b")
		c.Inc()
		c.Add(2)
	}
	for _, v := range []GaugeVec{m.pending, m.inFlight, m.backlog, m.oldestPending} {
		g := v.WithLabelValues("a")
		g.Set(1)
		g.Inc()
		g.Dec()
	}
	for _, v := range []ObserverVec{m.syncPublish, m.handleTime} {
		v.WithLabelValues("a").Observe(1)
	}
	e := runServer(t)
	c := connect(t, e.ClientURL())
	if c.Metrics() == nil {
		t.Fatal("a Conn without WithMetrics has nil Metrics")
	}
}

func TestConnectOptions(t *testing.T) {
	ctx := context.Background()
	for name, opts := range map[string][]ConnOption{
		"nothing":         nil,
		"both":            {WithURL("nats://127.0.0.1:1"), WithEmbedded(&embedded.Server{})},
		"empty url":       {WithURL("")},
		"half a cert":     {WithURL("nats://x"), WithTLS("", "cert.pem", "")},
		"backoff":         {WithURL("nats://x"), WithReconnectBackoff(time.Second, time.Millisecond)},
		"no creds":        {WithURL("nats://x"), WithCredentialsFile("")},
		"no nkey":         {WithURL("nats://x"), WithNKeyFile("")},
		"nil metrics":     {WithURL("nats://x"), WithMetrics(nil)},
		"missing nkey":    {WithURL("nats://x"), WithNKeyFile("/nonexistent/seed.nk")},
		"api timeout":     {WithURL("nats://x"), WithAPITimeout(0)},
		"nil embedded":    {WithEmbedded(nil)},
		"negative window": {WithURL("nats://x"), WithReconnectBackoff(-1, time.Second)},
	} {
		if _, err := Connect(ctx, opts...); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: err = %v, want ErrInvalidOption", name, err)
		}
	}
	// Nothing listening: Connect gives up when its context ends.
	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := Connect(cctx, WithURL("nats://127.0.0.1:1")); !errors.Is(err, ErrNotConnected) {
		t.Errorf("no server: %v", err)
	}
}

// The single-process default: a server with no port, reached in process.
func TestEmbeddedInProcess(t *testing.T) {
	ctx := context.Background()
	e := natstest.Server(t, natstest.InProcessOnly())
	if e.ClientURL() != "" {
		t.Fatalf("in-process server has URL %q", e.ClientURL())
	}
	c, err := Connect(ctx, WithEmbedded(e), WithTopology(testTopology))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	provision(t, c)
	if _, err := c.PublishSync(ctx, workMsg(t, workScan, "in-process")); err != nil {
		t.Fatal(err)
	}
	if _, err := embedded.Run(ctx, embedded.Config{}); !errors.Is(err, embedded.ErrInvalidConfig) {
		t.Errorf("no store dir: %v", err)
	}
}
