package reporter

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/internal/events"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// Shape of the scale test (VERDICT_REPORTER_RESOURCES overrides the
// resource count for measurements).
const (
	scalePolicies = 8 // results per resource in the end state
)

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

// createConfigMaps creates n ConfigMaps in ns with 16 clients at once.
func (e *env) createConfigMaps(ns string, n int) []*corev1.ConfigMap {
	e.t.Helper()
	out := make([]*corev1.ConfigMap, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	idx := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range idx {
				cm, err := e.kube.CoreV1().ConfigMaps(ns).Create(e.t.Context(), &corev1.ConfigMap{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%04d", i)},
					Data:       map[string]string{"i": strconv.Itoa(i)},
				}, metav1.CreateOptions{})
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				out[i] = cm
				mu.Unlock()
			}
		})
	}
	for i := range n {
		idx <- i
	}
	close(idx)
	wg.Wait()
	if firstErr != nil {
		e.t.Fatal(firstErr)
	}
	return out
}

// scaleMessages makes 10 messages per resource, shuffled: the latest
// evaluation of each of 8 policies, an older evaluation of one policy
// (a different message, superseding or superseded depending on where the
// shuffle puts it) and an exact duplicate of one (same message id).
func scaleMessages(t *testing.T, cms []*corev1.ConfigMap, rng *rand.Rand) []queue.Message {
	statuses := []engine.Status{engine.StatusPass, engine.StatusPass, engine.StatusFail, engine.StatusWarn, engine.StatusSkip, engine.StatusError}
	eval := func(cm *corev1.ConfigMap, p int, version string) events.ResultEvent {
		rs := make([]events.RuleResult, 1+rng.IntN(3))
		for i := range rs {
			rs[i] = events.RuleResult{Name: fmt.Sprintf("rule-%d", i), Type: engine.TypeValidation, Status: statuses[rng.IntN(len(statuses))], Message: "checked " + version}
		}
		return evaluation{ref: refOf("v1", "ConfigMap", cm), policy: fmt.Sprintf("policy-%d", p), version: version,
			request: cm.Name + "-" + version, scored: p%3 != 0, rules: rs}.event()
	}
	var msgs []queue.Message
	add := func(ev events.ResultEvent) queue.Message {
		m, err := events.ResultMessage(ev)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
		return m
	}
	for _, cm := range cms {
		var latest []queue.Message
		for p := range scalePolicies {
			latest = append(latest, add(eval(cm, p, "2")))
		}
		add(eval(cm, rng.IntN(scalePolicies), "1"))
		msgs = append(msgs, latest[rng.IntN(scalePolicies)])
	}
	rng.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	return msgs
}

// listReports reads every PolicyReport of ns, by name.
func (e *env) listReports(ns string) map[string]*unstructured.Unstructured {
	e.t.Helper()
	list, err := e.dyn.Resource(PolicyReports).Namespace(ns).List(e.t.Context(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	out := make(map[string]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].GetName()] = &list.Items[i]
	}
	return out
}

// checkReports compares every report of ns with the fold of the stream.
func (e *env) checkReports(ns string, cms []*corev1.ConfigMap) map[string][]byte {
	e.t.Helper()
	want := e.expected()
	got := e.listReports(ns)
	content := map[string][]byte{}
	bad := 0
	for _, cm := range cms {
		uid := string(cm.UID)
		w, ok := want[uid]
		if !ok || w.Object == nil {
			e.t.Fatalf("no results in the stream for %s", cm.Name)
		}
		if err := matches(got[uid], w); err != nil {
			if bad++; bad <= 3 {
				e.t.Error(err)
			}
			continue
		}
		content[uid], _ = json.Marshal(reportContent(got[uid]))
	}
	if bad > 0 {
		e.t.Fatalf("%d of %d reports differ from the fold of the stream", bad, len(cms))
	}
	managed := 0
	for _, r := range got {
		if r.GetLabels()[LabelManagedBy] == ManagedByValue {
			managed++
		}
	}
	if managed != len(cms) {
		e.t.Errorf("%d reports of Verdict's, want %d", managed, len(cms))
	}
	return content
}

// TestE2EScaleReplicasAndReplay: three projector replicas on the shared
// durable consumer are fed 10 results per resource for 1,000 ConfigMaps,
// shuffled, with superseded evaluations and duplicates; one replica is
// stopped (drained) half-way. Every report then equals the fold of the
// stream. Every report is deleted and Rebuild brings back the same ones
// (and prunes an orphan, leaving a report Verdict does not own); a second
// Rebuild changes nothing.
func TestE2EScaleReplicasAndReplay(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	n := scaleResources(t)
	ns := e.namespace("scale-").Name

	begin := time.Now()
	cms := e.createConfigMaps(ns, n)
	t.Logf("created %d ConfigMaps in %v", n, time.Since(begin).Round(time.Millisecond))
	msgs := scaleMessages(t, cms, rand.New(rand.NewPCG(5, 8)))

	var popts []ProjectorOption
	if c := os.Getenv("VERDICT_REPORTER_CONCURRENCY"); c != "" {
		n, _ := strconv.Atoi(c)
		popts = append(popts, WithConcurrency(n), WithReadBatch(n))
	}
	replicas := []*replica{e.startProjector(e.connect(), popts...), e.startProjector(e.connect(), popts...), e.startProjector(e.connect(), popts...)}
	pub, err := e.conn.NewAsyncPublisher(queue.WithBufferSize(len(msgs)))
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
	halt := func() { once.Do(func() { replicas[2].halt(t) }) }
	time.AfterFunc(time.Second, halt)
	eventually(t, time.Duration(max(3, 3*n/1000))*time.Minute, "every result acknowledged", e.consumerSettled)
	projected := time.Since(begin)
	halt()
	live := e.checkReports(ns, cms)

	sum := func(name string, label ...string) float64 {
		var s float64
		for _, r := range replicas {
			s += counter(t, r.reg, name, label...)
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
		r.halt(t)
	}

	// Delete every report; add an orphan of Verdict's and a foreign one.
	if err := e.dyn.Resource(PolicyReports).Namespace(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if left := e.listReports(ns); len(left) != 0 {
		t.Fatalf("%d reports left after the delete", len(left))
	}
	orphan := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": ReportAPIVersion, "kind": KindPolicyReport,
		"metadata": map[string]any{"name": "orphan", "namespace": ns, "labels": map[string]any{LabelManagedBy: ManagedByValue},
			"annotations": map[string]any{AnnotationLastSequence: "3"}},
	}}
	foreign := orphan.DeepCopy()
	foreign.SetName("foreign")
	foreign.SetLabels(map[string]string{LabelManagedBy: "someone-else"})
	for _, o := range []*unstructured.Unstructured{orphan, foreign} {
		if _, err := e.dyn.Resource(PolicyReports).Namespace(ns).Create(ctx, o, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	w, err := NewWriter(e.dyn, WithWriteQPS(2000, 2000))
	if err != nil {
		t.Fatal(err)
	}
	rconn := e.connect()
	rebuild := func() RebuildStats {
		var lines []string
		st, err := Rebuild(ctx, rconn, w, WithRebuildChecker(e.check), WithPrune(true), WithRebuildProgress(500*time.Millisecond, func(p RebuildProgress) {
			lines = append(lines, fmt.Sprintf("%s %d/%d %v", p.Phase, p.Done, p.Total, p.Elapsed.Round(time.Millisecond)))
		}))
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("rebuild: %d results, %d resources, read in %v, total %v, outcomes %v, pruned %d; progress %v",
			st.Results, st.Resources, st.ReadTime.Round(time.Millisecond), st.Elapsed.Round(time.Millisecond), st.Outcomes, st.Pruned, lines)
		if len(lines) == 0 || lines[len(lines)-1][:4] != PhaseDone {
			t.Errorf("progress %v: want the phases, ending in done", lines)
		}
		return st
	}
	st := rebuild()
	// (Other tests' reports on the shared API server have no results in
	// this stream: they are pruned too.)
	// Every message stored is read (the history keeps the superseded
	// evaluations too; the fold picks the newest).
	if st.Outcomes[OutcomeCreated] != n || st.Pruned < 1 || st.Results != int(stats.Published) {
		t.Errorf("rebuild: %d created, %d pruned, %d results; want %d, at least 1, %d", st.Outcomes[OutcomeCreated], st.Pruned, st.Results, n, stats.Published)
	}
	replayed := e.checkReports(ns, cms)
	for uid, c := range live {
		if string(replayed[uid]) != string(c) {
			t.Fatalf("replayed report %s differs from the live one:\n%s\n%s", uid, replayed[uid], c)
		}
	}
	left := e.listReports(ns)
	if _, ok := left["orphan"]; ok {
		t.Error("orphan report not pruned")
	}
	if _, ok := left["foreign"]; !ok {
		t.Error("a report Verdict does not own was pruned")
	}

	if st := rebuild(); st.Outcomes[OutcomeUnchanged] != n || st.Pruned != 0 {
		t.Errorf("second rebuild: outcomes %v, pruned %d; want %d unchanged", st.Outcomes, st.Pruned, n)
	}
}
