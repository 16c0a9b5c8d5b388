package bus

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nkeys"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// authServer runs a nats-server with JetStream and the account and users of
// deploy/nats/verdict-auth.conf, each *_NKEY replaced by a fresh user's
// public key; it returns the server's URL and each user's seed file.
func authServer(t *testing.T) (string, map[string]string) {
	t.Helper()
	conf, err := os.ReadFile(filepath.Join("..", "..", "deploy", "nats", "verdict-auth.conf"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	seeds := map[string]string{}
	text := string(conf)
	for _, user := range []string{"WEBHOOK", "GENERATOR", "REPORTER", "CLEANER"} {
		kp, err := nkeys.CreateUser()
		if err != nil {
			t.Fatal(err)
		}
		pub, _ := kp.PublicKey()
		seed, _ := kp.Seed()
		seeds[user] = filepath.Join(dir, strings.ToLower(user)+".nk")
		if err := os.WriteFile(seeds[user], seed, 0o600); err != nil {
			t.Fatal(err)
		}
		text = strings.ReplaceAll(text, user+"_NKEY", pub)
	}
	path := filepath.Join(dir, "auth.conf")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	opts, err := server.ProcessConfigFile(path)
	if err != nil {
		t.Fatalf("deploy/nats/verdict-auth.conf: %v", err)
	}
	opts.Host, opts.Port = "127.0.0.1", server.RANDOM_PORT
	opts.JetStream, opts.StoreDir = true, t.TempDir()
	opts.NoLog, opts.NoSigs = true, true
	srv, err := server.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	t.Cleanup(srv.Shutdown)
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("server not ready")
	}
	return srv.ClientURL(), seeds
}

// connectAs connects with the user of seedFile (none: anonymous); the
// connection's metrics count the server's refusals (connection_events_total
// {event="error"}: a permissions violation is an asynchronous error).
func connectAs(t *testing.T, url, seedFile string) (*queue.Conn, *prometheus.Registry, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Second)
	defer cancel()
	metrics, reg := promMetrics(t)
	opts := []queue.ConnOption{queue.WithURL(url), queue.WithLogger(testLogger(t)), queue.WithReconnectBackoff(20*time.Millisecond, 250*time.Millisecond), queue.WithMetrics(metrics)}
	if seedFile != "" {
		opts = append(opts, queue.WithNKeyFile(seedFile))
	}
	c, err := Connect(ctx, opts...)
	if err == nil {
		t.Cleanup(c.Close)
	}
	return c, reg, err
}

// refusals is how many asynchronous errors (permissions violations) the
// server sent the connection whose metrics are in reg.
func refusals(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	v, _ := testkit.MetricValue(t, reg, "verdict_queue_connection_events_total", map[string]string{"event": "error"})
	return v
}

// TestServicePermissions: the users of deploy/nats/verdict-auth.conf, the
// NATS install docs/install.md documents, can do their work and no more
// (issue 28, finding 7). A client without a user cannot connect; the
// webhook provisions the streams (and heals a missing one) and queues
// generate work; the generator provisions its consumer and takes the
// work; no service can delete a stream; the webhook cannot take work,
// publish a dead letter or a scan item.
func TestServicePermissions(t *testing.T) {
	url, seeds := authServer(t)
	if _, _, err := connectAs(t, url, ""); err == nil {
		t.Fatal("a client without credentials connected")
	}
	webhook, webhookReg, err := connectAs(t, url, seeds["WEBHOOK"])
	if err != nil {
		t.Fatal(err)
	}
	generator, generatorReg, err := connectAs(t, url, seeds["GENERATOR"])
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	if err := Provision(ctx, webhook, WithConsumers()); err != nil {
		t.Fatalf("the webhook provisions the streams: %v", err)
	}
	gen, _ := DefaultConsumer(ConsumerGenerator)
	if err := Provision(ctx, generator, WithConsumers(gen)); err != nil {
		t.Fatalf("the generator provisions the streams and its consumer: %v", err)
	}
	publishWork(t, webhook, WorkGenerate, "allowed")
	// The webhook records its decisions in the admission log.
	dm, err := DecisionMessage(testDecision())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := webhook.PublishSync(ctx, dm); err != nil {
		t.Fatalf("the webhook records a decision: %v", err)
	}
	got := make(chan string, 4)
	startRunner(t, generator, ConsumerGenerator, func(_ context.Context, m *queue.Msg) queue.Outcome {
		got <- string(m.Data)
		return queue.Done()
	}, queue.WithConcurrency(1))
	select {
	case k := <-got:
		if k != "allowed" {
			t.Fatalf("the generator took %q, want the work published", k)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the generator took no work within 10s")
	}
	time.Sleep(200 * time.Millisecond) // the runner's first backlog reading
	for name, reg := range map[string]*prometheus.Registry{"webhook": webhookReg, "generator": generatorReg} {
		if n := refusals(t, reg); n != 0 {
			t.Errorf("the %s's user was refused %v times doing its own work (see the log: natsAsyncError)", name, n)
		}
	}

	for name, seed := range seeds {
		c, _, err := connectAs(t, url, seed)
		if err != nil {
			t.Fatal(err)
		}
		for _, stream := range []string{StreamWork, StreamResults} {
			ctx, cancel := context.WithTimeout(t.Context(), 500*time.Millisecond)
			err := c.JetStream().DeleteStream(ctx, stream)
			cancel()
			if err == nil {
				t.Fatalf("%s deleted %s", name, stream)
			}
		}
	}

	refused := map[string]struct {
		do func(context.Context) error
	}{
		"scan work": {do: func(ctx context.Context) error {
			_, err := webhook.PublishSync(ctx, workMsg(t, WorkScan, "x"))
			return err
		}},
		"a dead letter": {do: func(ctx context.Context) error {
			_, err := webhook.PublishSync(ctx, queue.Message{Subject: deadPrefix + "work.generate.x", ID: "d", Data: []byte("x")})
			return err
		}},
		"the generator's consumer": {do: func(ctx context.Context) error {
			_, err := webhook.JetStream().Consumer(ctx, StreamWork, ConsumerGenerator)
			return err
		}},
	}
	for name, tc := range refused {
		t.Run("webhook refused "+name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), time.Second)
			defer cancel()
			if err := tc.do(ctx); err == nil {
				t.Errorf("the webhook's user may %s", name)
			}
		})
	}
}
