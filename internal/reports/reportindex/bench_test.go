package reportindex_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reportindex"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// scaleResult is the result of policy p on resource r as the webhook
// publishes it for a Pod: two rules, Pod Security-like messages (the
// failing ones name the container, so they vary per resource).
func scaleResult(r, p int) bus.ResultEvent {
	ev := bus.ResultEvent{
		Resource:   bus.ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: fmt.Sprintf("team-%03d", r%200), Name: fmt.Sprintf("web-%06d-7d9f8c6b5-x2x4z", r), UID: fmt.Sprintf("6f1c0e4a-3b2d-4c5e-8f9a-%012d", r), ResourceVersion: fmt.Sprint(100000 + r)},
		Policy:     bus.PolicyRef{Key: fmt.Sprintf("pod-security-%02d", p), UID: fmt.Sprintf("1b2c3d4e-0000-0000-0000-%012d", p), ResourceVersion: "4711"},
		Category:   "Pod Security Standards (Baseline)",
		Severity:   "medium",
		Scored:     true,
		Timestamp:  time.Date(2026, 11, 1, 12, 0, 0, r, time.UTC),
		Admission:  true,
		RequestUID: fmt.Sprintf("req-%d-%d", r, p),
	}
	for rule := range 2 {
		rr := bus.RuleResult{Name: fmt.Sprintf("check-%d", rule), Type: engine.TypeValidation, Status: engine.StatusPass, Message: fmt.Sprintf("validation rule 'check-%d' passed.", rule)}
		if (r+p+rule)%17 == 0 {
			rr.Status, rr.Message = engine.StatusFail, fmt.Sprintf("validation error: privileged mode is disallowed. rule check-%d failed at path /spec/containers/%d/securityContext/privileged/", rule, r%3)
		}
		ev.Rules = append(ev.Rules, rr)
	}
	return ev
}

// BenchmarkIndexScale folds 100,000 resources × 10 policies × 2 rules
// (20 results each) from their encoded messages, as a replica reads
// VERDICT_RESULTS at a cold start (decoding included, the stream itself
// not), and reports the heap the index holds.
//
//	go test -run '^$' -bench IndexScale -benchtime 1x ./internal/reports/reportindex/
func BenchmarkIndexScale(b *testing.B) {
	const resources, policies = 100_000, 10
	msgs := make([]queue.ReplayMsg, 0, resources*policies)
	for r := range resources {
		for p := range policies {
			ev := scaleResult(r, p)
			data, err := json.Marshal(ev)
			if err != nil {
				b.Fatal(err)
			}
			msgs = append(msgs, queue.ReplayMsg{Subject: bus.ResultSubject(ev.Resource.UID, ev.Policy.ResultKey()), Data: data, Sequence: uint64(len(msgs) + 1), Published: ev.Timestamp})
		}
	}
	b.ResetTimer()
	for range b.N {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		x := reportindex.New()
		for _, m := range msgs {
			evs, err := bus.DecodeResults(m.Subject, m.Data)
			if err != nil {
				b.Fatal(err)
			}
			for _, ev := range evs {
				x.Apply(model.Result{Sequence: m.Sequence, Event: ev, Stored: m.Published})
			}
		}
		took := time.Since(start)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-held")
		b.ReportMetric(took.Seconds(), "s-to-fold")
		b.ReportMetric(float64(took.Nanoseconds())/float64(len(msgs)), "ns/result")
		if x.Len() != resources {
			b.Fatalf("%d resources", x.Len())
		}
		runtime.KeepAlive(x)
	}
}

// trustAll confirms every result: the cold-start benchmark measures the
// stream, the decoding and the fold, not the API server.
type trustAll struct{}

func (trustAll) Check(context.Context, bus.ResourceRef, time.Time) (apicheck.Status, error) {
	return apicheck.Verified, nil
}
func (trustAll) RetryIn(time.Time) time.Duration { return time.Second }

// BenchmarkFeedColdStart: a replica starting on a VERDICT_RESULTS of
// VERDICT_BENCH_RESOURCES resources (default 100,000) × 10 policies × 2
// rules (20 results each), in a real JetStream (one embedded server, file
// store), until it is ready; results are taken as checked. from=stream
// reads the stream from its first message; from=snapshot starts from the
// snapshot a ready replica stored (WithSnapshots).
//
//	go test -run '^$' -bench FeedColdStart -benchtime 1x ./internal/reports/reportindex/
func BenchmarkFeedColdStart(b *testing.B) {
	resources := 100_000
	if v, err := strconv.Atoi(os.Getenv("VERDICT_BENCH_RESOURCES")); err == nil && v > 0 {
		resources = v
	}
	const policies = 10
	ctx := b.Context()
	srv := natstest.Server(b)
	conn, err := bus.Connect(ctx, queue.WithURL(srv.ClientURL()), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	if err := bus.Provision(ctx, conn, bus.WithResultsMaxBytes(8<<30)); err != nil {
		b.Fatal(err)
	}
	pub, err := conn.NewAsyncPublisher(queue.WithBufferSize(1<<16), queue.WithMessageDeadline(10*time.Minute))
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for r := range resources {
		for p := range policies {
			m, err := bus.ResultMessage(scaleResult(r, p))
			if err != nil {
				b.Fatal(err)
			}
			for {
				err := pub.Publish(m)
				if err == nil {
					break
				}
				if !errors.Is(err, queue.ErrBufferFull) {
					b.Fatal(err)
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	if err := pub.Close(ctx); err != nil {
		b.Fatal(err)
	}
	b.Logf("stored %d results in %s", resources*policies, time.Since(start).Round(time.Second))
	// The floor: reading the stream, nothing done with the messages.
	start = time.Now()
	rctx, rcancel := context.WithCancel(ctx)
	caught := make(chan struct{})
	go func() {
		_ = conn.Follow(rctx, bus.StreamResults, func(queue.ReplayMsg) error { return nil }, queue.WithFollowCaughtUp(func(uint64) { close(caught) }))
	}()
	<-caught
	rcancel()
	b.Logf("the stream read alone: %s", time.Since(start).Round(10*time.Millisecond))
	if err := conn.ProvisionSnapshots(ctx, 1, 8<<30); err != nil {
		b.Fatal(err)
	}
	// ready starts a replica with opts and waits until it is ready.
	ready := func(b *testing.B, opts ...reportindex.FeedOption) (*reportindex.Index, *reportindex.Feed, context.CancelFunc) {
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		start := time.Now()
		x := reportindex.New()
		f := reportindex.NewFeed(x, conn, trustAll{}, zerolog.Nop(), append(opts, reportindex.WithCatchUpGCPercent(400))...)
		fctx, cancel := context.WithCancel(ctx)
		go func() { _ = f.Run(fctx) }()
		<-f.Ready()
		took := time.Since(start)
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		b.ReportMetric(took.Seconds(), "s-to-ready")
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/(1<<20), "MiB-held")
		if st := f.Stats(); x.Len() != resources || st.Applied+st.Loaded != uint64(resources*policies) {
			b.Fatalf("%d resources, %+v", x.Len(), st)
		}
		return x, f, cancel
	}
	// From the stream's first message, as without a snapshot.
	b.Run("from=stream", func(b *testing.B) {
		for range b.N {
			x, _, cancel := ready(b)
			cancel()
			runtime.KeepAlive(x)
		}
	})
	// From a snapshot written by a replica that was ready.
	x, f, cancel := ready(b, reportindex.WithSnapshots("bench", 0))
	start = time.Now()
	snap, err := f.WriteSnapshot(ctx)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("snapshot of %d resources: %.1f MiB written in %s", x.Len(), float64(snap.Size)/(1<<20), time.Since(start).Round(10*time.Millisecond))
	cancel()
	b.Run("from=snapshot", func(b *testing.B) {
		for range b.N {
			x, f, cancel := ready(b, reportindex.WithSnapshots("bench", 0))
			cancel()
			if st := f.Stats(); st.Loaded != uint64(resources*policies) || st.Read != 0 {
				b.Fatalf("not from the snapshot: %+v", st)
			}
			b.ReportMetric(float64(snap.Size)/(1<<20), "MiB-snapshot")
			runtime.KeepAlive(x)
		}
	})
}
