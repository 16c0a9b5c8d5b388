package reporter

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/internal/events"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// evaluation builds the ResultEvent of one policy on one object.
type evaluation struct {
	ref     events.ResourceRef
	policy  string
	version string // the policy's resourceVersion: a new evaluation
	request string // the admission request: a new message id
	scored  bool
	rules   []events.RuleResult
}

func (v evaluation) event() events.ResultEvent {
	return events.ResultEvent{
		Resource:   v.ref,
		Policy:     events.PolicyRef{Key: v.policy, UID: "uid-" + strings.ReplaceAll(v.policy, "/", "-"), ResourceVersion: v.version},
		Rules:      v.rules,
		Category:   "Best Practices",
		Severity:   "medium",
		Scored:     v.scored,
		Timestamp:  time.Now().UTC(),
		Admission:  true,
		RequestUID: v.request,
	}
}

func refOf(apiVersion, kind string, o metav1.Object) events.ResourceRef {
	return events.ResourceRef{APIVersion: apiVersion, Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName(), UID: string(o.GetUID()), ResourceVersion: o.GetResourceVersion()}
}

func rules(statuses ...engine.Status) []events.RuleResult {
	out := make([]events.RuleResult, len(statuses))
	for i, s := range statuses {
		out[i] = events.RuleResult{Name: fmt.Sprintf("rule-%d", i), Type: engine.TypeValidation, Status: s, Message: "rule " + string(s)}
	}
	return out
}

func summaryIs(r *unstructured.Unstructured, pass, fail, warn, errs, skip int64) error {
	if r == nil {
		return errNotYet
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

// TestE2EReports: results of a Pod, a ConfigMap and a Namespace (real
// objects, real UIDs) become a PolicyReport each (a ClusterPolicyReport
// for the Namespace) owned by the object, with the right summaries; later,
// duplicated and interleaved publishes end in the newest state; an older
// fold written by hand after a newer one is skipped; a resource with no
// rule results left loses its report; an undecodable message is
// dead-lettered with its reason and the projection goes on.
func TestE2EReports(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	ns := e.namespace("reports-")
	// The controller manager's service account controller may be first.
	if _, err := e.kube.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	pod, err := e.kube.CoreV1().Pods(ns.Name).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web.v1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm, err := e.kube.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	podRef, cmRef, nsRef := refOf("v1", "Pod", pod), refOf("v1", "ConfigMap", cm), refOf("v1", "Namespace", ns)

	rep := e.startProjector(e.connect())

	e.publish(
		evaluation{ref: podRef, policy: "require-labels", version: "1", request: "r1", scored: true, rules: rules(engine.StatusFail)}.event(),
		evaluation{ref: podRef, policy: "team/advisory", version: "1", request: "r1", scored: false, rules: rules(engine.StatusFail, engine.StatusPass)}.event(),
		evaluation{ref: podRef, policy: "disallow-latest", version: "1", request: "r1", scored: true, rules: rules(engine.StatusPass, engine.StatusSkip)}.event(),
		evaluation{ref: cmRef, policy: "require-labels", version: "1", request: "r2", scored: true, rules: rules(engine.StatusPass)}.event(),
		evaluation{ref: nsRef, policy: "ns-owner", version: "1", request: "r3", scored: true, rules: rules(engine.StatusFail, engine.StatusError)}.event(),
	)
	eventually(t, 20*time.Second, "pod report", func() error { return summaryIs(e.report(ns.Name, string(pod.UID)), 2, 1, 1, 0, 1) })
	eventually(t, 20*time.Second, "configmap report", func() error { return summaryIs(e.report(ns.Name, string(cm.UID)), 1, 0, 0, 0, 0) })
	eventually(t, 20*time.Second, "namespace report", func() error { return summaryIs(e.report("", string(ns.UID)), 0, 1, 0, 1, 0) })
	want := e.expected()
	for _, c := range []struct {
		namespace string
		uid       string
		owner     string
	}{{ns.Name, string(pod.UID), "Pod"}, {ns.Name, string(cm.UID), "ConfigMap"}, {"", string(ns.UID), "Namespace"}} {
		got := e.report(c.namespace, c.uid)
		if err := matches(got, want[c.uid]); err != nil {
			t.Error(err)
		}
		owners := got.GetOwnerReferences()
		if len(owners) != 1 || string(owners[0].UID) != c.uid || owners[0].Kind != c.owner {
			t.Errorf("%s report owners %+v", c.owner, owners)
		}
		if kind, _, _ := unstructured.NestedString(got.Object, "scope", "kind"); kind != c.owner {
			t.Errorf("%s report scope kind %q", c.owner, kind)
		}
		if got.GetManagedFields()[0].Manager != FieldManager {
			t.Errorf("%s report written by %q", c.owner, got.GetManagedFields()[0].Manager)
		}
	}
	if kind := e.report("", string(ns.UID)).GetKind(); kind != KindClusterPolicyReport {
		t.Errorf("namespace report kind %s", kind)
	}

	// Newer evaluations, interleaved with the configmap's, with an exact
	// duplicate (same message id: stored once) and a republished
	// evaluation under a new id (stored again, same content): the report
	// ends in the newest state, at the stream's last sequence.
	seqs := e.publish(
		evaluation{ref: podRef, policy: "require-labels", version: "2", request: "r4", scored: true, rules: rules(engine.StatusPass)}.event(),
		evaluation{ref: cmRef, policy: "require-labels", version: "2", request: "r5", scored: true, rules: rules(engine.StatusFail)}.event(),
		evaluation{ref: podRef, policy: "disallow-latest", version: "2", request: "r4", scored: true, rules: rules(engine.StatusFail, engine.StatusFail)}.event(),
		evaluation{ref: podRef, policy: "require-labels", version: "3", request: "r6", scored: true, rules: rules(engine.StatusFail)}.event(),
		evaluation{ref: podRef, policy: "require-labels", version: "3", request: "r6", scored: true, rules: rules(engine.StatusFail)}.event(),
		evaluation{ref: podRef, policy: "disallow-latest", version: "2", request: "r7", scored: true, rules: rules(engine.StatusFail, engine.StatusFail)}.event(),
	)
	if seqs[4] != seqs[3] {
		t.Errorf("exact duplicate stored again: sequences %v", seqs)
	}
	last := fmt.Sprint(seqs[5])
	eventually(t, 20*time.Second, "pod report, newest", func() error {
		got := e.report(ns.Name, string(pod.UID))
		if got.GetAnnotations()[AnnotationLastSequence] != last {
			return fmt.Errorf("last sequence %s, want %s", got.GetAnnotations()[AnnotationLastSequence], last)
		}
		return summaryIs(got, 1, 3, 1, 0, 0)
	})
	eventually(t, 20*time.Second, "configmap report, newest", func() error { return summaryIs(e.report(ns.Name, string(cm.UID)), 0, 1, 0, 0, 0) })
	want = e.expected()
	if err := matches(e.report(ns.Name, string(pod.UID)), want[string(pod.UID)]); err != nil {
		t.Error(err)
	}

	// The stale guard: an older fold written after a newer one is skipped;
	// the same fold again changes nothing.
	before := e.report(ns.Name, string(pod.UID))
	older, err := Fold(string(pod.UID), []Result{{Sequence: seqs[0], Event: evaluation{ref: podRef, policy: "require-labels", version: "2", scored: true, rules: rules(engine.StatusPass)}.event()}})
	if err != nil {
		t.Fatal(err)
	}
	// Checked against the report itself (a writer without memory) and by
	// the projector's writer (which remembers what it wrote).
	fresh, err := NewWriter(e.dyn, WithMemory(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range []*Writer{fresh, rep.w} {
		if out, err := w.Write(ctx, older, nil); err != nil || out != OutcomeStale {
			t.Errorf("older fold: %s, %v; want stale", out, err)
		}
		if out, err := w.Write(ctx, want[string(pod.UID)], nil); err != nil || out != OutcomeUnchanged {
			t.Errorf("same fold: %s, %v; want unchanged", out, err)
		}
	}
	if after := e.report(ns.Name, string(pod.UID)); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("report written by a skipped write: resourceVersion %s → %s", before.GetResourceVersion(), after.GetResourceVersion())
	}
	// An empty fold of an older sequence deletes nothing either.
	if out, err := fresh.Write(ctx, Report{Resource: podRef, LastSequence: seqs[0]}, nil); err != nil || out != OutcomeStale {
		t.Errorf("older empty fold: %s, %v; want stale", out, err)
	}

	// No rule results left (the policy no longer matches the configmap):
	// its report goes.
	e.publish(evaluation{ref: cmRef, policy: "require-labels", version: "3", request: "r8", scored: true}.event())
	eventually(t, 20*time.Second, "configmap report deleted", func() error {
		if r := e.report(ns.Name, string(cm.UID)); r != nil {
			return fmt.Errorf("report still there: %v", r.Object["summary"])
		}
		return nil
	})

	// An undecodable message is dead-lettered with its reason, and is left
	// out of the fold; the projection goes on.
	garbage := queue.ResultSubject(string(pod.UID), "broken")
	if _, err := e.conn.PublishSync(ctx, queue.Message{Subject: garbage, ID: "garbage-1", Data: []byte("{not json")}); err != nil {
		t.Fatal(err)
	}
	e.publish(evaluation{ref: podRef, policy: "team/advisory", version: "2", request: "r9", scored: false, rules: rules(engine.StatusPass, engine.StatusPass)}.event())
	eventually(t, 20*time.Second, "pod report after the garbage", func() error { return summaryIs(e.report(ns.Name, string(pod.UID)), 2, 3, 0, 0, 0) })
	eventually(t, 20*time.Second, "dead letter", func() error {
		for _, d := range e.deadLetters() {
			if d.Subject == garbage && strings.Contains(d.Reason, "poison") && strings.Contains(d.Reason, "decode") {
				return nil
			}
		}
		return fmt.Errorf("no dead letter for %s: %+v", garbage, e.deadLetters())
	})
	eventually(t, 20*time.Second, "every message acknowledged", e.consumerSettled)

	if n := counter(t, rep.reg, "verdict_reporter_results_consumed_total"); n < 12 {
		t.Errorf("results consumed %v, want at least 12", n)
	}
	if n := counter(t, rep.reg, "verdict_reporter_reports_total", "deleted"); n != 1 {
		t.Errorf("reports deleted %v, want 1", n)
	}
	if n := counter(t, rep.reg, "verdict_reporter_reports_total", "stale"); n < 1 {
		t.Errorf("stale skips %v, want at least 1", n)
	}
	if n := counter(t, rep.reg, "verdict_reporter_lag_seconds"); n < 12 {
		t.Errorf("lag observations %v, want at least 12", n)
	}
}

// TestE2ESlowWrites: when writes are slow (a write QPS of one every two
// seconds) the waiting messages are kept in progress past their AckWait
// (1s here), so nothing is delivered twice; and they are acknowledged
// only once their report is written.
func TestE2ESlowWrites(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	var spec queue.ConsumerSpec
	for _, s := range queue.DefaultConsumers() {
		if s.Durable == queue.ConsumerReporter {
			spec = s
		}
	}
	spec.Durable, spec.AckWait = "slow", time.Second
	if err := e.conn.Provision(ctx, queue.WithConsumers(spec)); err != nil {
		t.Fatal(err)
	}
	ns := e.namespace("slow-")
	var refs []events.ResourceRef
	for i := range 3 {
		cm, err := e.kube.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, refOf("v1", "ConfigMap", cm))
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	w, err := NewWriter(e.dyn, WithWriteQPS(0.5, 1), WithMetrics(m))
	if err != nil {
		t.Fatal(err)
	}
	p, err := NewProjector(e.connect(), w, WithDurable("slow"), WithWindow(50*time.Millisecond), WithProgressEvery(200*time.Millisecond),
		WithChecker(e.check), WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- p.Run(runCtx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	begin := time.Now()
	for i, ref := range refs {
		e.publish(evaluation{ref: ref, policy: "p", version: "1", request: fmt.Sprint(i), scored: true, rules: rules(engine.StatusPass)}.event())
	}
	cons, err := e.conn.JetStream().Consumer(ctx, queue.StreamResults, "slow")
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "three reports", func() error {
		for _, ref := range refs {
			if e.report(ns.Name, ref.UID) == nil {
				return errNotYet
			}
		}
		return nil
	})
	if took := time.Since(begin); took < 3*time.Second {
		t.Fatalf("three writes at 0.5/s took %v: the rate limit did not hold", took)
	}
	eventually(t, 10*time.Second, "all acknowledged", func() error {
		ci, err := cons.Info(ctx)
		if err != nil {
			return err
		}
		if ci.NumAckPending != 0 || ci.NumPending != 0 {
			return fmt.Errorf("%d unacknowledged, %d pending", ci.NumAckPending, ci.NumPending)
		}
		return nil
	})
	if n := counter(t, reg, "verdict_reporter_results_consumed_total"); n != 3 {
		t.Errorf("%v deliveries for 3 results: messages went past their AckWait", n)
	}
}
