package reporter_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/reports/reportindex"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// scaleResources is the resource count of the scale test
// (VERDICT_REPORTER_RESOURCES overrides it for measurements).
func scaleResources(t *testing.T) int {
	if s := os.Getenv("VERDICT_REPORTER_RESOURCES"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			t.Fatalf("VERDICT_REPORTER_RESOURCES=%q", s)
		}
		return n
	}
	return 1000
}

// TestE2EScaleReplicasAndReplay: three projector replicas on the shared
// durable consumer are fed 10 results per resource for 1,000 ConfigMaps,
// shuffled, with superseded evaluations and duplicates; one replica is
// stopped (drained) half-way. Every report then equals the fold of the
// stream. Every report is deleted and Rebuild brings back the same ones
// (and prunes an orphan, leaving a report Verdict does not own); a second
// Rebuild changes nothing.
func TestE2EScaleReplicasAndReplay(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	n := scaleResources(t)
	ns := e.Namespace("scale-").Name

	begin := time.Now()
	cms := e.CreateConfigMaps(ns, n)
	t.Logf("created %d ConfigMaps in %v", n, time.Since(begin).Round(time.Millisecond))
	msgs := reportertest.ScaleMessages(t, cms, rand.New(rand.NewPCG(5, 8)))

	var popts []reporter.ProjectorOption
	if c := os.Getenv("VERDICT_REPORTER_CONCURRENCY"); c != "" {
		n, _ := strconv.Atoi(c)
		popts = append(popts, reporter.WithConcurrency(n), reporter.WithReadBatch(n))
	}
	replicas := []*reportertest.Replica{e.StartProjector(e.Connect(), popts...), e.StartProjector(e.Connect(), popts...), e.StartProjector(e.Connect(), popts...)}
	pub, err := e.Conn.NewAsyncPublisher(queue.WithBufferSize(len(msgs)))
	if err != nil {
		t.Fatal(err)
	}
	begin = time.Now()
	for _, m := range msgs {
		if err := pub.Publish(m); err != nil {
			t.Fatal(err)
		}
	}
	if err := pub.Close(ctx); err != nil {
		t.Fatal(err)
	}
	stats := pub.Stats()
	published := time.Since(begin)
	// One replica leaves half-way: it drains (writes what it holds, acks,
	// gives back the rest) and the others carry on.
	var once sync.Once
	halt := func() { once.Do(func() { replicas[2].Halt(t) }) }
	time.AfterFunc(time.Second, halt)
	testkit.Eventually(t, time.Duration(max(3, 3*n/1000))*time.Minute, "every result acknowledged", e.ConsumerSettled)
	projected := time.Since(begin)
	halt()
	live := e.CheckReports(ns, cms)

	sum := func(name string, label ...string) float64 {
		var s float64
		for _, r := range replicas {
			s += reportertest.Counter(t, r.Reg, name, label...)
		}
		return s
	}
	stored := stats.Published - stats.Duplicates
	t.Logf("published %d messages (%d stored, %d duplicates) in %v; projected into %d reports in %v: %.0f results/s; "+
		"consumed %.0f, created %.0f, applied %.0f, unchanged %.0f, stale %.0f, conflicts %.0f",
		len(msgs), stored, stats.Duplicates, published.Round(time.Millisecond), n, projected.Round(time.Millisecond),
		float64(stored)/projected.Seconds(),
		sum("verdict_reporter_results_consumed_total"), sum("verdict_reporter_reports_total", "created"), sum("verdict_reporter_reports_total", "applied"),
		sum("verdict_reporter_reports_total", "unchanged"), sum("verdict_reporter_reports_total", "stale"), sum("verdict_reporter_write_conflicts_total"))
	if got := sum("verdict_reporter_reports_total", "created"); got != float64(n) {
		t.Errorf("%v reports created, want %d (one create per resource; later writes apply)", got, n)
	}
	for _, r := range replicas {
		r.Halt(t)
	}

	// Delete every report; add an orphan of Verdict's and a foreign one.
	// With 10,000 reports the API server's DeleteCollection may time out
	// partway: delete again until none is left.
	testkit.Eventually(t, 5*time.Minute, "every report deleted", func() error {
		// A timeout, or the stream reset with it, is retried; a report
		// still listed is what fails.
		_ = e.Dyn.Resource(model.PolicyReports).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
		if left := e.ListReports(ns); len(left) != 0 { //nolint:contextcheck // the helper lists with the test's context
			return fmt.Errorf("%d reports left after the delete", len(left))
		}
		return nil
	})
	orphan := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": model.ReportAPIVersion, "kind": model.KindPolicyReport,
		"metadata": map[string]any{"name": "orphan", "namespace": ns, "labels": map[string]any{model.LabelManagedBy: model.ManagedByValue},
			"annotations": map[string]any{model.AnnotationLastSequence: "3"}},
	}}
	foreign := orphan.DeepCopy()
	foreign.SetName("foreign")
	foreign.SetLabels(map[string]string{model.LabelManagedBy: "someone-else"})
	for _, o := range []*unstructured.Unstructured{orphan, foreign} {
		if _, err := e.Dyn.Resource(model.PolicyReports).Namespace(ns).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	w, err := reporter.NewWriter(e.Dyn, reporter.WithWriteQPS(2000, 2000))
	if err != nil {
		t.Fatal(err)
	}
	rconn := e.Connect()
	rebuild := func() reporter.RebuildStats {
		var lines []string
		st, err := reporter.Rebuild(ctx, rconn, w, reporter.WithRebuildChecker(e.Check), reporter.WithPrune(true), reporter.WithRebuildProgress(500*time.Millisecond, func(p reporter.RebuildProgress) {
			lines = append(lines, fmt.Sprintf("%s %d/%d %v", p.Phase, p.Done, p.Total, p.Elapsed.Round(time.Millisecond)))
		}))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("rebuild: %d results, %d resources, read in %v, total %v, outcomes %v, pruned %d; progress %v",
			st.Results, st.Resources, st.ReadTime.Round(time.Millisecond), st.Elapsed.Round(time.Millisecond), st.Outcomes, st.Pruned, lines)
		if len(lines) == 0 || lines[len(lines)-1][:4] != reporter.PhaseDone {
			t.Errorf("progress %v: want the phases, ending in done", lines)
		}
		return st
	}
	st := rebuild()
	// (Other tests' reports on the shared API server have no results in
	// this stream: they are pruned too.)
	// Every message stored is read (the history keeps the superseded
	// evaluations too; the fold picks the newest).
	if st.Outcomes[reporter.OutcomeCreated] != n || st.Pruned < 1 || st.Results != int(stats.Published) {
		t.Errorf("rebuild: %d created, %d pruned, %d results; want %d, at least 1, %d", st.Outcomes[reporter.OutcomeCreated], st.Pruned, st.Results, n, stats.Published)
	}
	replayed := e.CheckReports(ns, cms)
	for uid, c := range live {
		if string(replayed[uid]) != string(c) {
			t.Fatalf("replayed report %s differs from the live one:\n%s\n%s", uid, replayed[uid], c)
		}
	}
	left := e.ListReports(ns)
	if _, ok := left["orphan"]; ok {
		t.Error("orphan report not pruned")
	}
	if _, ok := left["foreign"]; !ok {
		t.Error("a report Verdict does not own was pruned")
	}

	if st := rebuild(); st.Outcomes[reporter.OutcomeUnchanged] != n || st.Pruned != 0 {
		t.Errorf("second rebuild: outcomes %v, pruned %d; want %d unchanged", st.Outcomes, st.Pruned, n)
	}

	// The serving mode on the same stream, side by side with the replay
	// above: a replica's index from a cold start, its results checked
	// against watches of their kinds, ready to serve; no report written;
	// the same reports, field for field.
	begin = time.Now()
	x := reportindex.New()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.Kube.Discovery()))
	fctx, stopFeed := context.WithCancel(ctx)
	defer stopFeed()
	feed := reportindex.NewFeed(x, e.Connect(), reportindex.NewCluster(fctx, e.Meta, mapper), zerolog.Nop())
	go func() { _ = feed.Run(fctx) }()
	select {
	case <-feed.Ready():
	case <-time.After(5 * time.Minute):
		t.Fatalf("the serving index not ready: %+v", feed.Stats())
	}
	t.Logf("serving mode: %d resources ready to serve from a cold start in %v (the replay above: %v); feed %+v",
		x.Len(), time.Since(begin).Round(time.Millisecond), st.Elapsed.Round(time.Millisecond), feed.Stats())
	for uid, c := range live {
		rep, ok := x.Report(uid)
		if !ok {
			t.Fatalf("the serving index has no report for %s", uid)
		}
		if got, _ := reportertest.Content(rep.Object); string(got) != string(c) {
			t.Fatalf("the served report %s differs from the written one:\n%s\n%s", uid, got, c)
		}
	}
}
