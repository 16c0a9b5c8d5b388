package reportindex_test

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/events"
	"github.com/verdict-dev/verdict/internal/reporter"
	"github.com/verdict-dev/verdict/internal/reportindex"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// scaleResult is the result of policy p on resource r as the webhook
// publishes it for a Pod: two rules, Pod Security-like messages (the
// failing ones name the container, so they vary per resource).
func scaleResult(r, p int) events.ResultEvent {
	ev := events.ResultEvent{
		Resource:   events.ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: fmt.Sprintf("team-%03d", r%200), Name: fmt.Sprintf("web-%06d-7d9f8c6b5-x2x4z", r), UID: fmt.Sprintf("6f1c0e4a-3b2d-4c5e-8f9a-%012d", r), ResourceVersion: fmt.Sprint(100000 + r)},
		Policy:     events.PolicyRef{Key: fmt.Sprintf("pod-security-%02d", p), UID: fmt.Sprintf("1b2c3d4e-0000-0000-0000-%012d", p), ResourceVersion: "4711"},
		Category:   "Pod Security Standards (Baseline)",
		Severity:   "medium",
		Scored:     true,
		Timestamp:  time.Date(2026, 11, 1, 12, 0, 0, r, time.UTC),
		Admission:  true,
		RequestUID: fmt.Sprintf("req-%d-%d", r, p),
	}
	for rule := range 2 {
		rr := events.RuleResult{Name: fmt.Sprintf("check-%d", rule), Type: engine.TypeValidation, Status: engine.StatusPass, Message: fmt.Sprintf("validation rule 'check-%d' passed.", rule)}
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
//	go test -run '^$' -bench IndexScale -benchtime 1x ./internal/reportindex/
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
			msgs = append(msgs, queue.ReplayMsg{Subject: queue.ResultSubject(ev.Resource.UID, ev.Policy.ResultKey()), Data: data, Sequence: uint64(len(msgs) + 1), Published: ev.Timestamp})
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
			ev, err := reporter.DecodeResult(m.Subject, m.Data)
			if err != nil {
				b.Fatal(err)
			}
			x.Apply(reporter.Result{Sequence: m.Sequence, Event: ev, Stored: m.Published})
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
