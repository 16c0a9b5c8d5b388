package app

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// A result without a resource uid cannot become a message: it is counted,
// the others (whatever their uids and keys) are published.
func TestResultSinkCountsUnpublishable(t *testing.T) {
	ctx := t.Context()
	e := natstest.Server(t)
	conn, err := bus.Connect(ctx, queue.WithURL(e.ClientURL()), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	if err := bus.Provision(ctx, conn, bus.WithConsumers()); err != nil {
		t.Fatal(err)
	}
	pub, err := conn.NewAsyncPublisher()
	if err != nil {
		t.Fatal(err)
	}
	sink, err := newResultSink(pub, prometheus.NewRegistry(), zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	pol := bus.PolicyRef{Key: "p", UID: "pu", ResourceVersion: "1"}
	sink.Publish(ctx, []bus.ResultEvent{
		{Resource: bus.ResourceRef{Kind: "Pod", Name: "no-uid"}, Policy: pol},
		{Resource: bus.ResourceRef{Kind: "Pod", Name: "web", UID: "u1"}, Policy: pol},
		// Any uid and key make a valid subject (escaped tokens).
		{Resource: bus.ResourceRef{Kind: "Pod", Name: "odd", UID: "u 2.*>"}, Policy: bus.PolicyRef{Key: "ns/odd.*>", UID: "pu2"}},
	})
	if err := sink.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	var m dto.Metric
	if err := sink.unpublishable.Write(&m); err != nil {
		t.Fatal(err)
	}
	if got := m.GetCounter().GetValue(); got != 1 {
		t.Errorf("%v unpublishable, want 1", got)
	}
	n, results := 0, 0
	if _, err := conn.Replay(ctx, bus.StreamResults, func(m queue.ReplayMsg) error {
		n++
		evs, err := bus.DecodeResults(m.Subject, m.Data)
		results += len(evs)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if n != 2 || results != 2 {
		t.Errorf("%d results in %d messages stored, want 2 in 2 (a batch per resource)", results, n)
	}
	// One admission's results, one message.
	evs := make([]bus.ResultEvent, 22)
	for i := range evs {
		evs[i] = bus.ResultEvent{Resource: bus.ResourceRef{Kind: "Pod", Name: "many", UID: "u3", ResourceVersion: "9"},
			Policy: bus.PolicyRef{Key: fmt.Sprintf("policy-%d", i), UID: fmt.Sprintf("pu-%d", i)}}
	}
	sink.Publish(ctx, evs)
	if err := sink.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	n, results = 0, 0
	if _, err := conn.Replay(ctx, bus.StreamResults, func(m queue.ReplayMsg) error {
		n++
		got, err := bus.DecodeResults(m.Subject, m.Data)
		results += len(got)
		return err
	}, queue.WithReplayFilter(bus.ResultsOfResource("u3"))); err != nil {
		t.Fatal(err)
	}
	if n != 1 || results != 22 {
		t.Errorf("one admission's 22 results: %d results in %d messages, want 22 in 1", results, n)
	}
}
