package queue

import (
	"context"
	"errors"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// counterValue reads one counter series from a registry.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
					continue series
				}
			}
			return m.GetCounter().GetValue(), true
		}
	}
	return 0, false
}

func TestMetricsOnCallerRegistry(t *testing.T) {
	e := runServer(t)
	reg := prometheus.NewRegistry()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, WithURL(e.ClientURL()), WithRegisterer(reg), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	provision(t, c)
	m := workMsg(t, WorkScan, "x")
	for range 2 {
		if _, err := c.PublishSync(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	sync := map[string]string{"publisher": "sync"}
	if got, ok := counterValue(t, reg, "verdict_queue_published_total", sync); !ok || got != 1 {
		t.Errorf("published_total = %v (%v), want 1", got, ok)
	}
	if got, ok := counterValue(t, reg, "verdict_queue_publish_duplicates_total", sync); !ok || got != 1 {
		t.Errorf("publish_duplicates_total = %v (%v), want 1", got, ok)
	}
	if _, err := NewMetrics(reg); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("second registration: %v", err)
	}
	// Two connections sharing one Metrics.
	c2, err := Connect(ctx, WithURL(e.ClientURL()), WithMetrics(c.Metrics()))
	if err != nil {
		t.Fatal(err)
	}
	c2.Close()
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
		"nil registerer":  {WithURL("nats://x"), WithRegisterer(nil)},
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
	e, err := embedded.Run(ctx, embedded.Config{StoreDir: t.TempDir(), InProcessOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Shutdown()
	if e.ClientURL() != "" {
		t.Fatalf("in-process server has URL %q", e.ClientURL())
	}
	c, err := Connect(ctx, WithEmbedded(e))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	provision(t, c)
	if _, err := c.PublishSync(ctx, workMsg(t, WorkScan, "in-process")); err != nil {
		t.Fatal(err)
	}
	if _, err := embedded.Run(ctx, embedded.Config{}); !errors.Is(err, embedded.ErrInvalidConfig) {
		t.Errorf("no store dir: %v", err)
	}
}
