package webhook

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// gatedPublisher blocks every publish until the gate opens.
type gatedPublisher struct {
	gate chan struct{}
	fail error
	mu   sync.Mutex
	got  []ResultEvent
}

func (p *gatedPublisher) PublishResults(ctx context.Context, events []ResultEvent) error {
	select {
	case <-p.gate:
	case <-ctx.Done():
		return ctx.Err()
	}
	if p.fail != nil {
		return p.fail
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.got = append(p.got, events...)
	return nil
}

func (p *gatedPublisher) events() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.got)
}

func events(n int) []ResultEvent {
	out := make([]ResultEvent, n)
	for i := range out {
		out[i] = ResultEvent{Policy: PolicyRef{Key: "p"}, Rules: []RuleResult{{Name: "r", Status: engine.StatusPass}}}
	}
	return out
}

func TestAsyncResultSink(t *testing.T) {
	t.Run("never blocks; drops and counts past the buffer; flush drains", func(t *testing.T) {
		pub := &gatedPublisher{gate: make(chan struct{})}
		reg := prometheus.NewRegistry()
		s, err := NewAsyncResultSink(pub, WithBufferSize(2), WithSinkRegisterer(reg), WithSinkLogger(testLogger(t)))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		// One batch is taken by the publishing goroutine (and blocks on
		// the gate), two fill the buffer, the rest are dropped.
		for range 10 {
			s.Publish(t.Context(), events(3))
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("publish blocked for %s", d)
		}
		ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
		defer cancel()
		if err := s.Flush(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("flush with a stuck publisher: %v", err)
		}
		close(pub.gate)
		if err := s.Flush(t.Context()); err != nil {
			t.Fatal(err)
		}
		published := pub.events()
		dropped := counter(t, reg, "verdict_webhook_result_publish_failures_total", map[string]string{"reason": "buffer_full"})
		if published+int(dropped) != 30 || published < 6 || published > 9 {
			t.Fatalf("%d published, %v dropped", published, dropped)
		}
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		s.Publish(t.Context(), events(1))
		if got := counter(t, reg, "verdict_webhook_result_publish_failures_total", map[string]string{"reason": "closed"}); got != 1 {
			t.Fatalf("events after close counted %v", got)
		}
	})
	t.Run("publish errors are counted, not retried forever", func(t *testing.T) {
		pub := &gatedPublisher{gate: make(chan struct{}), fail: errors.New("nats: timeout")}
		close(pub.gate)
		reg := prometheus.NewRegistry()
		s, err := NewAsyncResultSink(pub, WithSinkRegisterer(reg))
		if err != nil {
			t.Fatal(err)
		}
		s.Publish(t.Context(), events(4))
		if err := s.Close(t.Context()); err != nil {
			t.Fatal(err)
		}
		if got := counter(t, reg, "verdict_webhook_result_publish_failures_total", map[string]string{"reason": "error"}); got != 4 {
			t.Fatalf("errors counted %v", got)
		}
	})
	t.Run("options are checked", func(t *testing.T) {
		if _, err := NewAsyncResultSink(nil); !errors.Is(err, ErrInvalidOption) {
			t.Fatal(err)
		}
		if _, err := NewAsyncResultSink(&gatedPublisher{}, WithBufferSize(0)); !errors.Is(err, ErrInvalidOption) {
			t.Fatal(err)
		}
	})
}

func TestLoadStaticSource(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", enforcePrivileged+"---\n"+`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: no-rules}
spec: {rules: []}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
`)
	write("sub/b.yml", auditLatest)
	write("sub/exception.yaml", `apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: ex, namespace: default}
spec:
  match: {any: [{resources: {kinds: [Pod]}}]}
  exceptions: [{policyName: disallow-latest, ruleNames: [no-latest]}]
`)
	write("c.yaml", "key: [unclosed\n")
	write(".hidden/d.yaml", auditLatest)
	write("notes.txt", "not a manifest")

	eng, err := engine.New()
	if err != nil {
		t.Fatal(err)
	}
	src, err := LoadStaticSource(eng, []string{dir}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	set, _ := src.Set(t.Context())
	var names []string
	for _, p := range set.Policies {
		names = append(names, p.Name())
	}
	if len(names) != 2 || names[0] != "disallow-privileged" || names[1] != "disallow-latest" || len(set.Exceptions) != 1 {
		t.Fatalf("policies %v, %d exceptions", names, len(set.Exceptions))
	}
	inv := src.Invalid()
	if len(inv) != 2 || inv[0].Key != "no-rules" || inv[1].Kind != "file" {
		t.Fatalf("invalid %v", inv)
	}
	if _, err := LoadStaticSource(eng, []string{filepath.Join(dir, "missing")}, testLogger(t)); err == nil {
		t.Fatal("a missing path is not an error")
	}
}
