package reporter_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// TestE2EAdmissionBatches: a stream that mixes the two shapes of results,
// one message per policy (before issue 33, and background scans) and one
// batch per admission, folds into one report, the newest result of each
// policy whichever shape carried it. Then later admissions that evaluate
// only one of the policies push the batch holding the others out of the
// subject's history: the report keeps them (the projector's verified copy
// of the fold holds every policy), and so does a replay. A forged batch
// naming the same object's uid at a version it never had is deleted from
// the stream, the real results untouched.
func TestE2EAdmissionBatches(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := e.Namespace("batches-")
	cm := e.CreateConfigMaps(ns.Name, 1)[0]
	ref := reportertest.RefOf("v1", "ConfigMap", cm)
	eval := func(policy, version, request string, st engine.Status) bus.ResultEvent {
		return reportertest.Evaluation{Ref: ref, Policy: policy, Version: version, Request: request, Scored: true, Rules: reportertest.Rules(st)}.Event()
	}
	batch := func(evs ...bus.ResultEvent) uint64 {
		for i := range evs {
			evs[i].Timestamp = evs[0].Timestamp
		}
		return e.PublishBatch(evs...)
	}
	rep := e.StartProjector(e.Connect())
	reportIs := func(what string, last uint64, pass, fail int64) {
		t.Helper()
		testkit.Eventually(t, 20*time.Second, what, func() error {
			got := e.Report(ns.Name, string(cm.UID))
			if got == nil {
				return fmt.Errorf("no report")
			}
			if seq := got.GetAnnotations()[model.AnnotationLastSequence]; seq != strconv.FormatUint(last, 10) {
				return fmt.Errorf("last sequence %s, want %d", seq, last)
			}
			return reportertest.SummaryIs(got, pass, fail, 0, 0, 0)
		})
		if err := reportertest.Matches(e.Report(ns.Name, string(cm.UID)), e.Expected()[string(cm.UID)]); err != nil {
			t.Errorf("%s: %v", what, err)
		}
	}

	// The old shape first, then an admission's batch: a at version 2 in
	// the batch replaces a at version 1, b stays, c comes.
	e.Publish(eval("a", "1", "r1", engine.StatusFail), eval("b", "1", "r1", engine.StatusPass))
	seq := batch(eval("a", "2", "r2", engine.StatusPass), eval("c", "1", "r2", engine.StatusFail))
	reportIs("the fold of both shapes", seq, 2, 1)

	// Five admissions that evaluate c only (a rule of a that selects
	// CREATE alone, say): the batch with a is rotated out of the history
	// of the subject (4 messages).
	for i := range 5 {
		st := engine.StatusFail
		if i == 4 {
			st = engine.StatusPass
		}
		seq = batch(eval("c", strconv.Itoa(2+i), "r-c-"+strconv.Itoa(i), st))
		reportIs("an admission of c "+strconv.Itoa(i), seq, 3-boolInt(i < 4), boolInt(i < 4))
	}
	held := 0
	if _, err := e.Conn.Replay(ctx, bus.StreamResults, func(m queue.ReplayMsg) error {
		evs, err := bus.DecodeResults(m.Subject, m.Data)
		if err != nil {
			return err
		}
		if _, copied := bus.ParseVerifiedCopy(m.Subject); copied {
			return nil
		}
		for _, ev := range evs {
			if ev.Policy.Key == "a" && ev.Policy.ResourceVersion == "2" {
				held++
			}
		}
		return nil
	}, queue.WithReplayAll(), queue.WithReplayFilter(bus.ResultBatchSubject(string(cm.UID)))); err != nil {
		t.Fatal(err)
	}
	if held != 0 {
		t.Fatalf("the batch holding a is still in the subject's history: the test shows nothing")
	}
	if got := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_copied_total"); got == 0 {
		t.Error("no verified copy counted")
	}

	// A forged batch: the object's uid at a version from the future.
	forged := ref
	forged.ResourceVersion = "999999999"
	fe := reportertest.Evaluation{Ref: forged, Policy: "a", Version: "9", Request: "forged", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event()
	fseq := e.PublishBatch(fe)
	testkit.Eventually(t, 20*time.Second, "the forged batch deleted", func() error {
		if _, err := e.Conn.MsgAt(ctx, bus.StreamResults, fseq); err == nil {
			return fmt.Errorf("message %d still stored", fseq)
		}
		return nil
	})
	if err := reportertest.SummaryIs(e.Report(ns.Name, string(cm.UID)), 3, 0, 0, 0, 0); err != nil {
		t.Errorf("after the forged batch: %v", err)
	}

	// A replay of the whole stream, every report deleted first, writes
	// the same report.
	rep.Halt(t)
	want := e.Report(ns.Name, string(cm.UID))
	if err := e.Dyn.Resource(model.PolicyReports).Namespace(ns.Name).Delete(ctx, string(cm.UID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := reporter.NewWriter(e.Dyn, reporter.WithWriteQPS(2000, 2000), reporter.WithMetrics(mustMetrics(t, prometheus.NewRegistry())))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reporter.Rebuild(ctx, e.Connect(), w, reporter.WithRebuildChecker(e.Checker(apicheck.WithGrace(time.Millisecond)))); err != nil {
		t.Fatal(err)
	}
	if got := e.Report(ns.Name, string(cm.UID)); !model.SameReport(got, want) {
		a, _ := reportertest.Content(got)
		b, _ := reportertest.Content(want)
		t.Fatalf("after a replay:\n got %s\nwant %s", a, b)
	}
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

func mustMetrics(t *testing.T, reg prometheus.Registerer) *reporter.Metrics {
	t.Helper()
	m, err := reporter.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
