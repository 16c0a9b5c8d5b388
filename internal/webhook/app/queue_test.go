package app

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// TestClosedConnectionIsReplaced: issue 28, finding 6. The server drops
// the webhook's client over a protocol line longer than its control line
// (what a review's 5,000-byte uid did), and nats.go closes the connection
// for good. The replica is not ready while it cannot queue generate work,
// a new connection replaces the closed one, and then work and results are
// published again and the replica is ready again.
func TestClosedConnectionIsReplaced(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	e := natstest.Server(t)
	nc := platform.DefaultNATSConfig()
	nc.URLs = []string{e.ClientURL()}
	reg := prometheus.NewRegistry()
	js, err := startJetStream(ctx, queueSettings{nats: nc, identity: "replace", buffer: 100, replaceDelay: 200 * time.Millisecond}, reg, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer js.close(ctx)

	item := func(uid string) bus.WorkItem {
		return bus.WorkItem{
			Kind: bus.WorkGenerate, Policy: bus.PolicyRef{Key: "p", UID: "pu", ResourceVersion: "1"}, Rule: "r",
			Trigger: bus.ResourceRef{APIVersion: "v1", Kind: "Namespace", Name: uid, UID: uid}, Operation: "CREATE",
			RequestUID: "req-" + uid, Timestamp: time.Now(),
		}
	}
	// poll waits for cond, failing the test after 10 s.
	poll := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	publish := func(uid string) func() bool {
		return func() bool {
			pctx, pcancel := context.WithTimeout(ctx, time.Second)
			defer pcancel()
			return js.work.Publish(pctx, item(uid)) == nil
		}
	}
	poll("work published through the first connection", publish("before"))
	if err := js.ready(ctx); err != nil {
		t.Fatalf("not ready with a connection: %v", err)
	}

	first := js.conn()
	if err := first.NATS().Publish("verdict.results."+strings.Repeat("u", 5000)+".p", nil); err != nil {
		t.Fatal(err)
	}
	_ = first.NATS().Flush()
	select {
	case <-first.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not drop the client")
	}
	var unready error
	poll("readiness to fail", func() bool { unready = js.ready(ctx); return unready != nil || js.conn() != first })
	if js.conn() == first && !errors.Is(unready, errConnClosed) {
		t.Fatalf("readiness error %v, want errConnClosed", unready)
	}
	poll("the connection to be replaced and the replica ready", func() bool { return js.conn() != first && js.ready(ctx) == nil })
	poll("work published through the new connection", publish("after"))

	js.results.Publish(ctx, []bus.ResultEvent{{
		Resource: bus.ResourceRef{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "pod-uid"},
		Policy:   bus.PolicyRef{Key: "p", UID: "pu", ResourceVersion: "1"}, Timestamp: time.Now(),
	}})
	if err := js.results.Flush(ctx); err != nil {
		t.Fatalf("results not flushed through the new connection: %v", err)
	}
	check, err := bus.Connect(ctx, queue.WithURL(e.ClientURL()), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer check.Close()
	n := 0
	if _, err := check.Replay(ctx, bus.StreamResults, func(queue.ReplayMsg) error { n++; return nil },
		queue.WithReplayFilter(bus.ResultsOfResource("pod-uid"))); err != nil || n != 1 {
		t.Fatalf("%d results of the pod stored (%v), want 1", n, err)
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	replaced := -1.0
	for _, mf := range mfs {
		if mf.GetName() == "verdict_webhook_nats_connections_replaced_total" {
			replaced = mf.GetMetric()[0].GetCounter().GetValue()
		}
	}
	if replaced != 1 {
		t.Fatalf("verdict_webhook_nats_connections_replaced_total %v, want 1", replaced)
	}
}

// TestLogMetrics (issue 34): a flood of decisions past the admission
// log's size limit keeps being recorded, the oldest go, and the
// replica's metrics say what the stream holds and what its limits
// removed.
func TestLogMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	e := natstest.Server(t)
	nc := platform.DefaultNATSConfig()
	nc.URLs = []string{e.ClientURL()}
	nc.Streams.DecisionsMaxBytes = 1 << 20
	reg := prometheus.NewRegistry()
	js, err := startJetStream(ctx, queueSettings{nats: nc, identity: "log", buffer: 10000, decisions: true}, reg, zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer js.close(ctx)
	d := bus.Decision{Webhook: "validate", Operation: "CREATE", Outcome: bus.DecisionDenied, Message: strings.Repeat("m", 1000),
		Resource: bus.DecisionResource{Version: "v1", Kind: "Pod", Resource: "pods", Namespace: "team", Name: "p"}, Time: time.Now()}
	const n = 3000 // about 3.5 MiB
	for i := range n {
		d.RequestUID = "req-" + strconv.Itoa(i)
		js.decisions.Record(d)
		if i%500 == 499 {
			if err := js.decisions.Flush(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := js.decisions.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "verdict_decisions_") {
			m := mf.GetMetric()[0]
			got[mf.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	held, removed := got["verdict_decisions_stored_messages"], got["verdict_decisions_removed_total"]
	if held == 0 || removed == 0 || held+removed != n || got["verdict_decisions_stored_bytes"] > 1<<20 || got["verdict_decisions_oldest_age_seconds"] <= 0 {
		t.Fatalf("metrics %v, want %d decisions held or removed, at most 1 MiB held", got, n)
	}
	t.Logf("%d decisions recorded: %.0f held (%.0f bytes), %.0f removed by the size limit", n, held, got["verdict_decisions_stored_bytes"], removed)
}
