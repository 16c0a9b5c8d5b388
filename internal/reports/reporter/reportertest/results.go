package reportertest

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// Evaluation builds the ResultEvent of one policy on one object, as the
// webhook publishes it (admission, category Best Practices, severity
// medium, evaluated now).
type Evaluation struct {
	Ref    bus.ResourceRef
	Policy string
	// Kind is a CEL policy's kind ("" for a ClusterPolicy or Policy).
	Kind    string
	Version string // the policy's resourceVersion: a new evaluation
	Request string // the admission request: a new message id
	Scored  bool
	Rules   []bus.RuleResult
}

// Event is the evaluation's ResultEvent.
func (v Evaluation) Event() bus.ResultEvent {
	return bus.ResultEvent{
		Resource:   v.Ref,
		Policy:     bus.PolicyRef{Key: v.Policy, Kind: v.Kind, UID: "uid-" + v.Kind + strings.ReplaceAll(v.Policy, "/", "-"), ResourceVersion: v.Version},
		Rules:      v.Rules,
		Category:   "Best Practices",
		Severity:   "medium",
		Scored:     v.Scored,
		Timestamp:  time.Now().UTC(),
		Admission:  true,
		RequestUID: v.Request,
	}
}

// RefOf is the reference of a stored object.
func RefOf(apiVersion, kind string, o metav1.Object) bus.ResourceRef {
	return bus.ResourceRef{APIVersion: apiVersion, Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName(), UID: string(o.GetUID()), ResourceVersion: o.GetResourceVersion()}
}

// Rules are validate rule results rule-0, rule-1, ... with the statuses.
func Rules(statuses ...engine.Status) []bus.RuleResult {
	out := make([]bus.RuleResult, len(statuses))
	for i, s := range statuses {
		out[i] = bus.RuleResult{Name: fmt.Sprintf("rule-%d", i), Type: engine.TypeValidation, Status: s, Message: "rule " + string(s)}
	}
	return out
}

// SummaryIs says how the report's summary differs from the counts, or nil
// (testkit.ErrNotYet when there is no report).
func SummaryIs(r *unstructured.Unstructured, pass, fail, warn, errs, skip int64) error {
	if r == nil {
		return testkit.ErrNotYet
	}
	got := map[string]int64{}
	for _, k := range []string{"pass", "fail", "warn", "error", "skip"} {
		got[k], _, _ = unstructured.NestedInt64(r.Object, "summary", k)
	}
	want := map[string]int64{"pass": pass, "fail": fail, "warn": warn, "error": errs, "skip": skip}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("summary %v, want %v", got, want)
	}
	return nil
}

// Expected folds the stream: every resource's report as it should be
// (every message of every subject, Fold keeping the newest of each policy;
// the tests publish results of real objects only, so no check is needed).
func (e *Env) Expected() map[string]model.Report {
	e.T.Helper()
	m, err := reporter.NewMetrics(nil)
	if err != nil {
		e.T.Fatal(err)
	}
	byUID, err := reporter.ReadStored(e.T.Context(), e.Conn, m, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	out := map[string]model.Report{}
	for uid, rs := range byUID {
		rep, err := model.Fold(uid, rs)
		if err != nil {
			e.T.Fatal(err)
		}
		out[uid] = rep
	}
	return out
}

// Content is reporter.ReportContent as JSON, for messages and for
// comparing reports read at different times.
func Content(o *unstructured.Unstructured) ([]byte, error) {
	return json.Marshal(model.ReportContent(o))
}

// Matches says why the report differs from the fold, or nil.
func Matches(got *unstructured.Unstructured, want model.Report) error {
	switch {
	case want.Object == nil && got == nil:
		return nil
	case want.Object == nil:
		return fmt.Errorf("report %s exists, want none", got.GetName())
	case got == nil:
		return fmt.Errorf("no report for %s", want.Name())
	}
	if got.GetKind() != want.Object.GetKind() || got.GetNamespace() != want.Object.GetNamespace() || got.GetName() != want.Object.GetName() {
		return fmt.Errorf("report %s %s/%s, want %s %s/%s", got.GetKind(), got.GetNamespace(), got.GetName(),
			want.Object.GetKind(), want.Object.GetNamespace(), want.Object.GetName())
	}
	if !model.SameReport(got, want.Object) {
		a, _ := Content(got)
		b, _ := Content(want.Object)
		return fmt.Errorf("report %s:\n got %s\nwant %s", got.GetName(), a, b)
	}
	return nil
}

// ScalePolicies is the number of results per resource in the end state of
// ScaleMessages.
const ScalePolicies = 8

// CreateConfigMaps creates n ConfigMaps in ns with 16 clients at once.
func (e *Env) CreateConfigMaps(ns string, n int) []*corev1.ConfigMap {
	e.T.Helper()
	out := make([]*corev1.ConfigMap, n)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	idx := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range idx {
				cm, err := e.Kube.CoreV1().ConfigMaps(ns).Create(e.T.Context(), &corev1.ConfigMap{
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
		e.T.Fatal(firstErr)
	}
	return out
}

// ScaleMessages makes the messages of a stream that mixes both shapes,
// shuffled. For every other resource, 10 messages: the latest evaluation
// of each of ScalePolicies policies, each its own message (the shape
// before issue 33, and a background scan's), an older evaluation of one
// policy (a different message, superseding or superseded depending on
// where the shuffle puts it) and an exact duplicate of one (same message
// id). For the others, 3: the latest evaluations in one batch (an
// admission's shape), its exact duplicate, and an older evaluation of one
// policy on its own.
func ScaleMessages(t *testing.T, cms []*corev1.ConfigMap, rng *rand.Rand) []queue.Message {
	statuses := []engine.Status{engine.StatusPass, engine.StatusPass, engine.StatusFail, engine.StatusWarn, engine.StatusSkip, engine.StatusError}
	eval := func(cm *corev1.ConfigMap, p int, version string) bus.ResultEvent {
		rs := make([]bus.RuleResult, 1+rng.IntN(3))
		for i := range rs {
			rs[i] = bus.RuleResult{Name: fmt.Sprintf("rule-%d", i), Type: engine.TypeValidation, Status: statuses[rng.IntN(len(statuses))], Message: "checked " + version}
		}
		return Evaluation{Ref: RefOf("v1", "ConfigMap", cm), Policy: fmt.Sprintf("policy-%d", p), Version: version,
			Request: cm.Name + "-" + version, Scored: p%3 != 0, Rules: rs}.Event()
	}
	var msgs []queue.Message
	add := func(ev bus.ResultEvent) queue.Message {
		m, err := bus.ResultMessage(ev)
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
		return m
	}
	for i, cm := range cms {
		if i%2 == 1 {
			// An admission's shape: the latest evaluations in one batch.
			evs := make([]bus.ResultEvent, ScalePolicies)
			for p := range evs {
				evs[p] = eval(cm, p, "2")
				evs[p].Timestamp = evs[0].Timestamp
			}
			m, err := bus.ResultBatchMessage(evs)
			if err != nil {
				t.Fatal(err)
			}
			msgs = append(msgs, m, m)
			add(eval(cm, rng.IntN(ScalePolicies), "1"))
			continue
		}
		var latest []queue.Message
		for p := range ScalePolicies {
			latest = append(latest, add(eval(cm, p, "2")))
		}
		add(eval(cm, rng.IntN(ScalePolicies), "1"))
		msgs = append(msgs, latest[rng.IntN(ScalePolicies)])
	}
	rng.Shuffle(len(msgs), func(i, j int) { msgs[i], msgs[j] = msgs[j], msgs[i] })
	return msgs
}

// CheckReports compares every report of ns with the fold of the stream
// (one per ConfigMap, each Verdict's) and returns their Content by uid.
func (e *Env) CheckReports(ns string, cms []*corev1.ConfigMap) map[string][]byte {
	e.T.Helper()
	want := e.Expected()
	got := e.ListReports(ns)
	content := map[string][]byte{}
	bad := 0
	for _, cm := range cms {
		uid := string(cm.UID)
		w, ok := want[uid]
		if !ok || w.Object == nil {
			e.T.Fatalf("no results in the stream for %s", cm.Name)
		}
		if err := Matches(got[uid], w); err != nil {
			if bad++; bad <= 3 {
				e.T.Error(err)
			}
			continue
		}
		content[uid], _ = Content(got[uid])
	}
	if bad > 0 {
		e.T.Fatalf("%d of %d reports differ from the fold of the stream", bad, len(cms))
	}
	managed := 0
	for _, r := range got {
		if r.GetLabels()[model.LabelManagedBy] == model.ManagedByValue {
			managed++
		}
	}
	if managed != len(cms) {
		e.T.Errorf("%d reports of Verdict's, want %d", managed, len(cms))
	}
	return content
}
