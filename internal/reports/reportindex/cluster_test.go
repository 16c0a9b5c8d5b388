package reportindex_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/restmapper"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/reports/reportindex"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// TestFeedCluster: with results checked against watches of their kinds
// (reportindex.Cluster), a feed applies the results of real objects
// (namespaced and cluster-scoped), leaves out a result naming an object
// under another uid and one from a resourceVersion the object has not
// reached, applies a result published before its object is stored once
// the watch sees the object, and drops the report of a deleted object.
func TestFeedCluster(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ns := e.Namespace("cluster-")
	cms := e.CreateConfigMaps(ns.Name, 3)
	eval := func(ref reportertest.Evaluation) { e.Publish(ref.Event()) }
	for _, cm := range cms {
		eval(reportertest.Evaluation{Ref: reportertest.RefOf("v1", "ConfigMap", cm), Policy: "p", Version: "1", Request: cm.Name, Scored: true, Rules: reportertest.Rules(engine.StatusPass)})
	}
	eval(reportertest.Evaluation{Ref: reportertest.RefOf("v1", "Namespace", ns), Policy: "p", Version: "1", Request: "ns", Scored: true, Rules: reportertest.Rules(engine.StatusFail)})
	other := reportertest.RefOf("v1", "ConfigMap", cms[0])
	other.UID = "11111111-2222-3333-4444-555555555555"
	eval(reportertest.Evaluation{Ref: other, Policy: "p", Version: "1", Request: "other", Rules: reportertest.Rules(engine.StatusFail)})
	future := reportertest.RefOf("v1", "ConfigMap", cms[1])
	future.ResourceVersion = "999999999"
	eval(reportertest.Evaluation{Ref: future, Policy: "q", Version: "1", Request: "future", Rules: reportertest.Rules(engine.StatusFail)})

	x := reportindex.New()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.Kube.Discovery()))
	check := reportindex.NewCluster(ctx, e.Meta, mapper, reportindex.WithClusterGrace(2*time.Second), reportindex.WithGone(func(uid string) { x.Forget(uid) }))
	f := reportindex.NewFeed(x, e.Connect(), check, zerolog.Nop())
	go func() { _ = f.Run(ctx) }()
	select {
	case <-f.Ready():
	case <-time.After(30 * time.Second):
		t.Fatalf("not ready: %+v", f.Stats())
	}
	if st := f.Stats(); st.Applied != 4 || st.Rejected != 2 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
	for _, uid := range []string{string(cms[0].UID), string(cms[1].UID), string(cms[2].UID), string(ns.UID)} {
		if _, ok := x.Report(uid); !ok {
			t.Fatalf("no report for %s", uid)
		}
	}
	if rep, _ := x.Report(string(cms[0].UID)); reportertest.SummaryIs(rep.Object, 1, 0, 0, 0, 0) != nil {
		t.Fatalf("the result under another uid reached the report: %v", rep.Object)
	}

	// A result stored before its object: pending, then applied.
	late := reportertest.RefOf("v1", "ConfigMap", &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: ns.Name, UID: "to-be-known"}})
	created, err := e.Kube.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "late"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	late.UID, late.ResourceVersion = string(created.UID), created.ResourceVersion
	eval(reportertest.Evaluation{Ref: late, Policy: "p", Version: "1", Request: "late", Scored: true, Rules: reportertest.Rules(engine.StatusPass)})
	testkit.Eventually(t, 20*time.Second, "the late object's report", func() error {
		if _, ok := x.Report(late.UID); !ok {
			return testkit.ErrNotYet
		}
		return nil
	})

	// A deleted object's report goes with it.
	if err := e.Kube.CoreV1().ConfigMaps(ns.Name).Delete(ctx, cms[2].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the deleted object's report gone", func() error {
		if _, ok := x.Report(string(cms[2].UID)); ok {
			return testkit.ErrNotYet
		}
		return nil
	})
}

// seenChecker holds results pending, with a retry an hour away, until
// their objects are there; it says so on Seen, as Cluster does when its
// watches deliver an object.
type seenChecker struct {
	mu    sync.Mutex
	there map[string]bool
	seen  chan struct{}
}

func (c *seenChecker) Check(_ context.Context, ref bus.ResourceRef, _ time.Time) (apicheck.Status, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.there[ref.UID] {
		return apicheck.Verified, nil
	}
	return apicheck.Pending, nil
}
func (c *seenChecker) RetryIn(time.Time) time.Duration { return time.Hour }
func (c *seenChecker) Seen() <-chan struct{}           { return c.seen }

func (c *seenChecker) arrive(uid string) {
	c.mu.Lock()
	c.there[uid] = true
	c.mu.Unlock()
	select {
	case c.seen <- struct{}{}:
	default:
	}
}

// TestFeedRechecksWhenSeen: a pending result is checked again as soon as
// its checker has seen new objects, not at its retry (the lag from an
// admission to its report is not the retry's second), and a new pending
// result arriving meanwhile does not put that check off to its own retry.
func TestFeedRechecksWhenSeen(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ns := e.Namespace("seen-")
	cms := e.CreateConfigMaps(ns.Name, 3)
	check := &seenChecker{there: map[string]bool{}, seen: make(chan struct{}, 1)}
	x := reportindex.New()
	f := reportindex.NewFeed(x, e.Connect(), check, zerolog.Nop())
	go func() { _ = f.Run(ctx) }()
	publish := func(i int) {
		e.Publish(reportertest.Evaluation{Ref: reportertest.RefOf("v1", "ConfigMap", cms[i]), Policy: "p", Version: "1", Request: cms[i].Name, Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event())
	}
	pending := func(n int) {
		testkit.Eventually(t, 20*time.Second, "results pending", func() error {
			if f.Stats().Pending != n {
				return testkit.ErrNotYet
			}
			return nil
		})
	}
	publish(0)
	pending(1)
	check.arrive(string(cms[0].UID))
	publish(1)
	testkit.Eventually(t, 20*time.Second, "the first report, long before the hour's retry", func() error {
		if _, ok := x.Report(string(cms[0].UID)); !ok {
			return testkit.ErrNotYet
		}
		return nil
	})
	pending(1)
	check.arrive(string(cms[1].UID))
	testkit.Eventually(t, 20*time.Second, "the second report", func() error {
		if _, ok := x.Report(string(cms[1].UID)); !ok {
			return testkit.ErrNotYet
		}
		return nil
	})
	if _, ok := x.Report(string(cms[2].UID)); ok {
		t.Fatal("a report for a resource with no result")
	}
	if st := f.Stats(); st.Pending != 0 || st.Applied != 2 {
		t.Fatalf("stats %+v", st)
	}
}

// TestFeedClusterOfAKindItMayNotRead: in the serving mode, a result of a
// kind the reporter may not watch (Secrets, unless the chart's
// reporter.rbac.readSecrets) is left out and counted (Unreadable) at once,
// and the feed goes on: it becomes ready and serves the report of a Pod
// published after it. Before, the check waited for a watch that never
// synced, and the feed stopped there for good (never ready).
func TestFeedClusterOfAKindItMayNotRead(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	ns := e.Namespace("cluster-unreadable-")
	secret, err := e.Kube.CoreV1().Secrets(ns.Name).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cms := e.CreateConfigMaps(ns.Name, 1)
	e.Publish(
		reportertest.Evaluation{Ref: reportertest.RefOf("v1", "Secret", secret), Policy: "p", Version: "1", Request: "s", Rules: reportertest.Rules(engine.StatusFail)}.Event(),
		reportertest.Evaluation{Ref: reportertest.RefOf("v1", "ConfigMap", cms[0]), Policy: "p", Version: "1", Request: "c", Scored: true, Rules: reportertest.Rules(engine.StatusPass)}.Event(),
	)
	rc := e.As(rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}})
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kubernetes.NewForConfigOrDie(rc).Discovery()))
	x := reportindex.New()
	check := reportindex.NewCluster(ctx, metadata.NewForConfigOrDie(rc), mapper, reportindex.WithClusterGrace(2*time.Second))
	f := reportindex.NewFeed(x, e.Connect(), check, zerolog.Nop())
	go func() { _ = f.Run(ctx) }()
	select {
	case <-f.Ready():
	case <-time.After(30 * time.Second):
		t.Fatalf("not ready: %+v", f.Stats())
	}
	if st := f.Stats(); st.Applied != 1 || st.Unreadable != 1 || st.Rejected != 0 || st.Pending != 0 {
		t.Fatalf("stats %+v; want the ConfigMap's result applied, the Secret's unreadable", st)
	}
	if _, ok := x.Report(string(secret.UID)); ok {
		t.Error("a report for the Secret")
	}
	if _, ok := x.Report(string(cms[0].UID)); !ok {
		t.Error("no report for the ConfigMap")
	}
}
