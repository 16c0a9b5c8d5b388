package webhook

import (
	"context"
	"crypto/tls"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// stuckSource never answers: a request that reaches it hangs past any
// drain period.
type stuckSource struct{ release chan struct{} }

func (s stuckSource) Set(context.Context) (*engine.Set, error) {
	<-s.release
	return &engine.Set{}, nil
}
func (stuckSource) Invalid() []PolicyError { return nil }

// stuckSink never finishes flushing.
type stuckSink struct{ NopResultSink }

func (stuckSink) Flush(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// The whole shutdown fits its budget even when a request hangs and the
// result sink never flushes, whatever the individual steps are set to.
func TestShutdownBudget(t *testing.T) {
	src := stuckSource{release: make(chan struct{})}
	t.Cleanup(func() { close(src.release) })
	cert, _, _ := selfSigned(t, "webhook.test")
	cfg := testConfig(func(c *Config) {
		c.ShutdownDelay = 200 * time.Millisecond
		c.ShutdownGracePeriod = time.Minute
		c.FlushTimeout = time.Minute
		c.RequestTimeout = time.Minute
		c.ShutdownBudget = 3 * time.Second
	})
	// The configured steps cannot fit: Validate says so.
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "shutdown-budget") {
		t.Fatalf("Validate: %v, want a shutdown-budget error", err)
	}
	cfg.FlushTimeout = 500 * time.Millisecond
	s, err := New(cfg, WithPolicySource(src), WithCertSource(certs.Static(cert)), WithResultSink(stuckSink{}),
		WithRegistry(prometheus.NewRegistry()), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	sv := serve(t, s)

	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test client
	go func() {
		body := strings.NewReader(string(mustJSON(t, reviewOf(t, admissionv1.Create, pod("p")))))
		resp, err := client.Post("https://"+sv.addr+PathValidate, "application/json", body)
		if err == nil {
			_ = resp.Body.Close()
		}
	}()
	testkit.EventuallyTrue(t, 10*time.Second, "a request in flight", func() bool { return gaugeValue(s.metrics.inFlight) == 1 })
	start := time.Now()
	sv.cancel()
	select {
	case err := <-sv.done:
		took := time.Since(start)
		if took > cfg.ShutdownBudget-ShutdownReserve()+500*time.Millisecond {
			t.Fatalf("shutdown took %s, budget %s", took, cfg.ShutdownBudget)
		}
		if err == nil {
			t.Fatal("Serve reported a clean shutdown with a request cut off and results unflushed")
		}
		t.Logf("shutdown took %s: %v", took, err)
	case <-time.After(2 * cfg.ShutdownBudget):
		t.Fatalf("Serve did not return within twice the budget %s", cfg.ShutdownBudget)
	}
}

// gaugeValue reads a gauge.
func gaugeValue(g prometheus.Gauge) float64 {
	var m dto.Metric
	if g.Write(&m) != nil {
		return -1
	}
	return m.GetGauge().GetValue()
}
