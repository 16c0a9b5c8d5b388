package reporter_test

import (
	"cmp"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// TestE2ENewestWins: for one resource and policy, a newer evaluation is
// stored first and an older one after it (a publish retried after backoff,
// a slow replica): the stream keeps both, and the report shows the newer,
// live and after a replay. Two ways of being older: an earlier policy
// version (evaluated later, by a replica whose policy cache lagged), and
// an earlier state of the resource (evaluated later too).
func TestE2ENewestWins(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := e.Namespace("newest-")
	cm, err := e.Kube.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created := reportertest.RefOf("v1", "ConfigMap", cm)
	cm.Data = map[string]string{"k": "v"}
	if cm, err = e.Kube.CoreV1().ConfigMaps(ns.Name).Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	updated := reportertest.RefOf("v1", "ConfigMap", cm)
	rep := e.StartProjector(e.Connect())

	// Newer first, older after; the older ones carry a later evaluation
	// time, so neither arrival nor clock order can pick them.
	newerPolicy := reportertest.Evaluation{Ref: updated, Policy: "by-policy", Version: "2", Request: "a", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event()
	olderPolicy := reportertest.Evaluation{Ref: updated, Policy: "by-policy", Version: "1", Request: "b", Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event()
	olderPolicy.Timestamp = newerPolicy.Timestamp.Add(time.Minute)
	newerState := reportertest.Evaluation{Ref: updated, Policy: "by-state", Version: "1", Request: "c", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event()
	olderState := reportertest.Evaluation{Ref: created, Policy: "by-state", Version: "1", Request: "d", Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event()
	olderState.Timestamp = newerState.Timestamp.Add(time.Minute)
	seqs := e.Publish(newerPolicy, newerState)
	testkit.Eventually(t, 20*time.Second, "the report of the newer results", func() error {
		return reportertest.SummaryIs(e.Report(ns.Name, string(cm.UID)), 0, 2, 0, 0, 0)
	})
	late := e.Publish(olderPolicy, olderState)
	testkit.Eventually(t, 20*time.Second, "every message acknowledged", e.ConsumerSettled)
	got := e.Report(ns.Name, string(cm.UID))
	if err := reportertest.SummaryIs(got, 0, 2, 0, 0, 0); err != nil {
		t.Fatalf("after the older results arrived: %v", err)
	}
	if want := fmt.Sprint(max(seqs[0], seqs[1])); got.GetAnnotations()[model.AnnotationLastSequence] != want {
		t.Errorf("last sequence %s, want %s (the newer results')", got.GetAnnotations()[model.AnnotationLastSequence], want)
	}
	// The stream holds all four (a history per subject), the older last.
	var stored []uint64
	for _, r := range readStream(t, e, bus.ResultsOfResource(string(cm.UID))) {
		stored = append(stored, r.Sequence)
	}
	if len(stored) != 4 || stored[3] != late[1] {
		t.Fatalf("stream holds sequences %v, want 4 ending with %d", stored, late[1])
	}
	if err := reportertest.Matches(got, e.Expected()[string(cm.UID)]); err != nil {
		t.Error(err)
	}
	rep.Halt(t)

	// Replay: the report deleted, Rebuild brings back the newer.
	if err := e.Dyn.Resource(model.PolicyReports).Namespace(ns.Name).Delete(ctx, string(cm.UID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := reporter.NewWriter(e.Dyn, reporter.WithWriteQPS(2000, 2000))
	if err != nil {
		t.Fatal(err)
	}
	st, err := reporter.Rebuild(ctx, e.Connect(), w, reporter.WithRebuildChecker(e.Check))
	if err != nil {
		t.Fatal(err)
	}
	if st.Results != 4 || st.Outcomes[reporter.OutcomeCreated] != 1 {
		t.Errorf("rebuild %+v: want 4 results read, 1 report created", st)
	}
	replayed := e.Report(ns.Name, string(cm.UID))
	if err := reportertest.SummaryIs(replayed, 0, 2, 0, 0, 0); err != nil {
		t.Fatalf("after the replay: %v", err)
	}
	if !model.SameReport(replayed, got) {
		t.Errorf("the replayed report differs from the live one")
	}
}

// readStream reads every stored result under filter, in stream order.
func readStream(t *testing.T, e *reportertest.Env, filter string) []model.Result {
	t.Helper()
	m, err := reporter.NewMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	byUID, err := reporter.ReadStored(t.Context(), e.Conn, m, []string{filter})
	if err != nil {
		t.Fatal(err)
	}
	var out []model.Result
	for _, rs := range byUID {
		out = append(out, rs...)
	}
	slices.SortFunc(out, func(a, b model.Result) int { return cmp.Compare(a.Sequence, b.Sequence) })
	return out
}

// TestE2EUnverifiedResults: results published straight to VERDICT_RESULTS
// (as a forged AdmissionReview would cause) change no report: a uid that
// no object has (dropped once the grace period is over), a real name with
// another uid (dropped at once), a real object at a resourceVersion it has
// not reached (dropped at once; the object's real report is untouched).
// Each is counted by reason and deleted from the stream, and a replay
// leaves such results out too. Real results still make reports.
func TestE2EUnverifiedResults(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := e.Namespace("forged-")
	cm, err := e.Kube.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "real"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	real := reportertest.RefOf("v1", "ConfigMap", cm)
	const grace = 2 * time.Second
	e.Check = e.Checker(apicheck.WithGrace(grace))
	rep := e.StartProjector(e.Connect())

	seqs := e.Publish(reportertest.Evaluation{Ref: real, Policy: "p", Version: "1", Request: "real", Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event())
	testkit.Eventually(t, 20*time.Second, "the real report", func() error { return reportertest.SummaryIs(e.Report(ns.Name, string(cm.UID)), 1, 0, 0, 0, 0) })
	before := e.Report(ns.Name, string(cm.UID))

	ghost := bus.ResourceRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns.Name, Name: "ghost", UID: "00000000-0000-4000-8000-000000000001"}
	impostor := real
	impostor.UID, impostor.ResourceVersion = "00000000-0000-4000-8000-000000000002", ""
	future := real
	future.ResourceVersion = "999999999999"
	forged := map[string]bus.ResultEvent{
		"notFound":    reportertest.Evaluation{Ref: ghost, Policy: "p", Version: "1", Request: "f1", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event(),
		"uidMismatch": reportertest.Evaluation{Ref: impostor, Policy: "p", Version: "1", Request: "f2", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event(),
		"future":      reportertest.Evaluation{Ref: future, Policy: "p", Version: "1", Request: "f3", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event(),
	}
	begin := time.Now()
	for _, ev := range forged {
		e.Publish(ev)
	}
	testkit.Eventually(t, 30*time.Second, "every forged result counted", func() error {
		for reason := range forged {
			if n := reportertest.Counter(t, rep.Reg, "verdict_reporter_results_unverified_total", reason); n != 1 {
				return fmt.Errorf("%s: %v", reason, n)
			}
		}
		return nil
	})
	if took := time.Since(begin); took < grace {
		t.Errorf("a result of a missing object dropped after %v, within the grace period (%v)", took, grace)
	}
	testkit.Eventually(t, 20*time.Second, "every message acknowledged", e.ConsumerSettled)
	for reason, ev := range forged {
		if ev.Resource.UID != real.UID && e.Report(ns.Name, ev.Resource.UID) != nil {
			t.Errorf("%s: a report for the forged uid %s", reason, ev.Resource.UID)
		}
	}
	if after := e.Report(ns.Name, string(cm.UID)); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("the real report was written again: %v", after.Object["summary"])
	}
	if left := readStream(t, e, bus.ResultsOfResource(ghost.UID)); len(left) != 0 {
		t.Errorf("forged results left in the stream: %d", len(left))
	}
	if left := readStream(t, e, bus.ResultsOfResource(real.UID)); len(left) != 1 || left[0].Sequence != seqs[0] {
		t.Errorf("results of the real object: %+v, want only the real one", left)
	}

	// Real results still work, and a replay leaves forged ones out: those
	// stored while no projector runs are found there.
	rep.Halt(t)
	e.Publish(
		reportertest.Evaluation{Ref: real, Policy: "p", Version: "2", Request: "real-2", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event(),
		reportertest.Evaluation{Ref: ghost, Policy: "p", Version: "2", Request: "f4", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event(),
		reportertest.Evaluation{Ref: impostor, Policy: "p", Version: "2", Request: "f5", Scored: true, Rules: reportertest.Rules(engine.StatusFail)}.Event(),
	)
	reg := prometheus.NewRegistry()
	m, err := reporter.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := reporter.NewWriter(e.Dyn, reporter.WithWriteQPS(2000, 2000), reporter.WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	// A rebuild's checker with no grace to wait for: a replay cannot wait.
	st, err := reporter.Rebuild(ctx, e.Connect(), w, reporter.WithRebuildChecker(e.Checker(apicheck.WithGrace(time.Millisecond))))
	if err != nil {
		t.Fatal(err)
	}
	if st.Unverified != 2 || st.Outcomes[reporter.OutcomeApplied] != 1 {
		t.Errorf("rebuild %+v: want 2 unverified, the real report applied", st)
	}
	for _, reason := range []apicheck.Status{apicheck.NotFound, apicheck.UIDMismatch} {
		if n := reportertest.Counter(t, reg, "verdict_reporter_results_unverified_total", string(reason)); n != 1 {
			t.Errorf("replay's %s count %v, want 1", reason, n)
		}
	}
	if err := reportertest.SummaryIs(e.Report(ns.Name, string(cm.UID)), 0, 1, 0, 0, 0); err != nil {
		t.Errorf("the real report after the replay: %v", err)
	}
	for _, uid := range []string{ghost.UID, impostor.UID} {
		if e.Report(ns.Name, uid) != nil {
			t.Errorf("the replay made a report for the forged uid %s", uid)
		}
	}
}

// TestE2EPartialFolds: a fold that left out a result whose object is not
// found yet (partial) replaces only a report of a lower sequence and never
// deletes one, so it cannot undo the complete fold of the same results
// that another replica wrote; a complete fold of the same sequence
// replaces a partial one. Checked against the report itself (a writer
// without memory) and with the writer's memory.
func TestE2EPartialFolds(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := e.Namespace("partial-")
	cm, err := e.Kube.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ref := reportertest.RefOf("v1", "ConfigMap", cm)
	uid := string(cm.UID)
	res := func(seq uint64, policy string, s engine.Status) model.Result {
		return model.Result{Sequence: seq, Event: reportertest.Evaluation{Ref: ref, Policy: policy, Version: "1", Request: fmt.Sprint(seq), Scored: true, Rules: reportertest.Rules(s)}.Event()}
	}
	fold := func(partial bool, rs ...model.Result) model.Report {
		t.Helper()
		rep, err := model.Fold(uid, rs)
		if err != nil {
			t.Fatal(err)
		}
		rep.Partial = partial
		return rep
	}
	a, b, c := res(5, "a", engine.StatusFail), res(7, "b", engine.StatusPass), res(9, "c", engine.StatusPass)
	for name, opts := range map[string][]reporter.WriterOption{"no memory": {reporter.WithMemory(0)}, "memory": nil} {
		t.Run(name, func(t *testing.T) {
			w, err := reporter.NewWriter(e.Dyn, opts...)
			if err != nil {
				t.Fatal(err)
			}
			steps := []struct {
				what     string
				rep      model.Report
				want     reporter.WriteOutcome
				pass, fl int64
			}{
				{"complete, a and b", fold(false, a, b), reporter.OutcomeCreated, 1, 1},
				{"partial, a pending: same sequence", fold(true, b), reporter.OutcomeStale, 1, 1},
				{"partial, nothing verified: no delete", fold(true), reporter.OutcomeStale, 1, 1},
				{"partial, c newer", fold(true, b, c), reporter.OutcomeApplied, 2, 0},
				{"complete, same sequence", fold(false, a, b, c), reporter.OutcomeApplied, 2, 1},
				{"partial again, same sequence", fold(true, b, c), reporter.OutcomeStale, 2, 1},
			}
			for _, s := range steps {
				out, err := w.Write(ctx, s.rep, nil)
				if err != nil || out != s.want {
					t.Fatalf("%s: %s, %v; want %s", s.what, out, err, s.want)
				}
				if err := reportertest.SummaryIs(e.Report(ns.Name, uid), s.pass, s.fl, 0, 0, 0); err != nil { //nolint:contextcheck // the helper bounds its own read
					t.Fatalf("after %s: %v", s.what, err)
				}
			}
			if err := e.Dyn.Resource(model.PolicyReports).Namespace(ns.Name).Delete(ctx, uid, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
