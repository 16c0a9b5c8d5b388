package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	reporterapp "github.com/verdict-dev/verdict/internal/reports/app"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
)

func TestConfigValidate(t *testing.T) {
	tests := map[string]struct {
		mod  func(*reporterapp.Config)
		want string
	}{
		"defaults":          {mod: func(*reporterapp.Config) {}},
		"no nats":           {mod: func(c *reporterapp.Config) { c.NATS.URLs = nil }, want: "nats-url"},
		"two replicas":      {mod: func(c *reporterapp.Config) { c.NATS.StreamReplicas = 2 }, want: "stream-replicas 2"},
		"zero window":       {mod: func(c *reporterapp.Config) { c.CoalesceWindow = 0 }, want: "coalesce window"},
		"negative api qps":  {mod: func(c *reporterapp.Config) { c.Kube.QPS = -1 }, want: "api-qps"},
		"zero write burst":  {mod: func(c *reporterapp.Config) { c.WriteBurst = 0 }, want: "write QPS"},
		"no flush workers":  {mod: func(c *reporterapp.Config) { c.FlushWorkers = 0 }, want: "flush workers"},
		"bad format":        {mod: func(c *reporterapp.Config) { c.Log.Format = "xml" }, want: "log-format"},
		"several problems":  {mod: func(c *reporterapp.Config) { c.Attempts, c.ShutdownTimeout = 0, 0 }, want: "attempts 0"},
		"empty log level":   {mod: func(c *reporterapp.Config) { c.Log.Level = "" }, want: "log-level"},
		"huge concurrency":  {mod: func(c *reporterapp.Config) { c.Concurrency = 501 }, want: "concurrency 501"},
		"zero api timeout":  {mod: func(c *reporterapp.Config) { c.Kube.Timeout = -1 }, want: "api-timeout"},
		"zero concurrency":  {mod: func(c *reporterapp.Config) { c.Concurrency = 0 }, want: "concurrency 0"},
		"shutdown too soon": {mod: func(c *reporterapp.Config) { c.ShutdownTimeout = -time.Second }, want: "shutdown timeout"},
		"no history":        {mod: func(c *reporterapp.Config) { c.NATS.Streams.ResultHistory = 0 }, want: "result history 0"},
		"tiny results":      {mod: func(c *reporterapp.Config) { c.NATS.Streams.ResultsMaxBytes = 1000 }, want: "results max bytes"},
		"no work messages":  {mod: func(c *reporterapp.Config) { c.NATS.Streams.WorkMaxMsgs = 0 }, want: "work max messages"},
		"tiny work":         {mod: func(c *reporterapp.Config) { c.NATS.Streams.WorkMaxBytes = 1 }, want: "work max bytes"},
		"no grace":          {mod: func(c *reporterapp.Config) { c.VerifyGrace = 0 }, want: "verify grace"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := reporterapp.DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, reporterapp.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want reporterapp.ErrInvalidConfig about %q", err, tc.want)
			}
		})
	}
}

// TestE2EService runs the service as its main does (Config, kubeconfig,
// NATS URL, probes): a result becomes a report, /metrics and /readyz
// answer, SIGTERM (ctx) drains it; then `replay --prune` through the same
// Config rebuilds the report after it is deleted.
func TestE2EService(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := e.Namespace("service-")
	cm, err := e.Kube.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	probe := l.Addr().String()
	l.Close()

	cfg := reporterapp.DefaultConfig()
	cfg.Kube.Kubeconfig = reportertest.ControlPlane().KubeconfigPath()
	cfg.NATS.URLs = []string{e.NATS.ClientURL()}
	cfg.ProbeAddress = probe
	cfg.CoalesceWindow = 50 * time.Millisecond
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- reporterapp.Run(runCtx, cfg, zerolog.Nop()) }()

	e.Publish(reportertest.Evaluation{Ref: reportertest.RefOf("v1", "ConfigMap", cm), Policy: "require-labels", Version: "1", Request: "s1", Scored: true,
		Rules: reportertest.Rules(engine.StatusFail, engine.StatusPass)}.Event())
	testkit.Eventually(t, 20*time.Second, "report", func() error { return reportertest.SummaryIs(e.Report(ns.Name, string(cm.UID)), 1, 1, 0, 0, 0) })
	get := func(path string) (int, string) {
		resp, err := http.Get("http://" + probe + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/readyz"); code != http.StatusOK {
		t.Errorf("/readyz %d %s", code, body)
	}
	if code, body := get("/metrics"); code != http.StatusOK ||
		!strings.Contains(body, `verdict_reporter_reports_total{outcome="created"} 1`) ||
		!strings.Contains(body, "verdict_reporter_lag_seconds_bucket") ||
		!strings.Contains(body, `verdict_queue_handled_total{consumer="reporter",outcome="done"} 1`) {
		t.Errorf("/metrics %d:\n%s", code, body)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("service stopped with %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("service did not stop")
	}

	if err := e.Dyn.Resource(model.PolicyReports).Namespace(ns.Name).Delete(ctx, string(cm.UID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	st, err := reporterapp.Replay(ctx, cfg, true, &out, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	if st.Outcomes[reporter.OutcomeCreated] != 1 || !strings.Contains(out.String(), "replayed 1 results of 1 resources") {
		t.Errorf("replay %+v:\n%s", st, out.String())
	}
	if err := reportertest.SummaryIs(e.Report(ns.Name, string(cm.UID)), 1, 1, 0, 0, 0); err != nil {
		t.Error(fmt.Errorf("after replay: %w", err))
	}
}
