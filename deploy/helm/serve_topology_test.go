package helm_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/verdict-dev/verdict/internal/bus"
	reporterapp "github.com/verdict-dev/verdict/internal/reports/app"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/reports/reportserver"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// serveResources is how many resources TestE2EServeTopology reports on:
// 2,000 by default, VERDICT_SERVE_RESOURCES for the 10,000.
func serveResources(t *testing.T) int {
	n := 2000
	if s := os.Getenv("VERDICT_SERVE_RESOURCES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("VERDICT_SERVE_RESOURCES=%q: a positive count", s)
		}
		n = v
	}
	return n
}

// TestE2EServeTopology runs the chart's reporter in its serving mode
// (reporter.mode=serve, the HA values: three replicas) as processes
// with the chart's arguments and RBAC, behind the kube-apiserver's
// aggregation layer, with no report CRD: the replicas keep their own
// certificate and the APIServices' caBundle. While results for
// thousands of resources are published, one replica is killed with
// SIGKILL: lists through the API server keep answering, a watch resumes
// on another replica from the resourceVersion it had reached (the
// versions come from the stream, so they mean the same on every
// replica) and sees every report, and the surviving replicas, asked
// directly, answer identically (the same documents); so does the killed one once restarted.
func TestE2EServeTopology(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the serving mode's topology on a real control plane; skipped under -short")
	}
	helmPath(t)
	n := serveResources(t)
	begin := time.Now()
	bins := make(chan topoBuild, 1)
	binDir := t.TempDir()
	go func() { bins <- buildServices(t.Context(), binDir, "reporter") }()

	cp := controlplane.StartForTest(t, controlplane.WithoutCRDs())
	ctx := t.Context()
	admin := cp.RESTConfig()
	admin.QPS, admin.Burst = 500, 1000
	admin.WarningHandler = rest.NoWarnings{}
	kube := kubernetes.NewForConfigOrDie(admin)
	dyn := dynamic.NewForConfigOrDie(admin)
	for _, ns := range []string{namespace, topoNamespace} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The chart's crds/, as helm installs them: no report CRD among them.
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	applyChartCRDs(t, dyn, mapper)

	b, _, urls := startTopoNATS(t, bins)
	lb := startTopoBalancer(t)

	args := []string{"-f", haValues, "--set", "reporter.mode=serve",
		"--set", "nats.credentials.secretName=", "--set", "nats.tls.caConfigMapName=",
		"--set", "nats.allowUnauthenticated=true", "--set", "nats.networkPolicy.enabled=false",
		"--set", "nats.streamReplicas=3", "--set", "reporter.serve.snapshotInterval=10s"}
	for i, u := range urls {
		args = append(args, "--set", fmt.Sprintf("nats.urls[%d]=%s", i, u))
	}
	var reporterDeployment *appsv1.Deployment
	for _, u := range decode(t, render(t, args...)) {
		switch {
		case u.GetKind() == "Deployment":
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
				t.Fatal(err)
			}
			if d.Spec.Template.Spec.Containers[0].Name == "reporter" {
				reporterDeployment = &d
			}
			continue
		case u.GetKind() == "Service" && u.GetName() == "verdict-reporter":
			// No kube-proxy here: the API server reaches the replicas
			// through an ExternalName Service naming localhost, and the
			// balancer standing in for the Service's endpoints.
			u.Object["spec"] = map[string]any{"type": "ExternalName", "externalName": "localhost",
				"ports": []any{map[string]any{"name": "https", "port": int64(lbPort(t, lb)), "protocol": "TCP"}}}
		case u.GetKind() == "APIService":
			if err := unstructured.SetNestedField(u.Object, int64(lbPort(t, lb)), "spec", "service", "port"); err != nil {
				t.Fatal(err)
			}
		}
		apply(t, dyn, mapper, u, false)
	}
	if reporterDeployment == nil {
		t.Fatal("the chart renders no reporter Deployment")
	}
	if t.Failed() {
		t.FailNow()
	}
	topo := &topology{t: t, cp: cp, kube: kube, bins: b.dir, lb: lb, replicas: map[string][]*topoReplica{}, services: []string{"reporter"}}
	topo.startDeployment(reporterDeployment)
	replicas := topo.replicas["reporter"]
	if len(replicas) != 3 {
		t.Fatalf("%d reporter replicas, want the HA values' 3", len(replicas))
	}
	topo.waitReady(90 * time.Second)
	polr := dyn.Resource(model.PolicyReports).Namespace(topoNamespace)
	var list *unstructured.UnstructuredList
	topoEventually(t, 60*time.Second, "the reports served through the API server", func() error {
		var err error
		list, err = polr.List(ctx, metav1.ListOptions{})
		return err
	})
	t.Logf("serving: %v", time.Since(begin).Round(time.Millisecond))

	// A client keeps listing, and a watch follows, through the API server.
	var lists, listErrs, failed atomic.Int64
	var streak time.Time // when the current run of failed lists began
	var lastListErr atomic.Value
	killed := make(chan time.Time, 1)
	var killedAt time.Time
	stopLists := make(chan struct{})
	wctx, stopWatch := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stopLists:
				return
			case at := <-killed:
				killedAt = at
			default:
			}
			_, err := polr.List(ctx, metav1.ListOptions{Limit: 500})
			lists.Add(1)
			// A request in flight on the killed replica fails, as through
			// a Service (the aggregator answers 503 for it; the loop may
			// learn of the kill only after that request, so the log can
			// say "before the kill"), and so may one while the
			// aggregator replaces its connection. Each failure is counted
			// and logged; lists failing for more than 35 s in a row (the
			// aggregator's 30 s recheck of an APIService and a margin)
			// are an outage, and fail the test.
			if err != nil {
				failed.Add(1)
				if streak.IsZero() {
					streak = time.Now()
				}
				if d := time.Since(streak); d > 35*time.Second {
					listErrs.Add(1)
					lastListErr.Store(err.Error())
				}
				after := "before the kill"
				if !killedAt.IsZero() {
					after = time.Since(killedAt).Round(time.Millisecond).String() + " after the kill"
				}
				t.Logf("a list failed %s: %v", after, err)
			} else {
				streak = time.Time{}
			}
			time.Sleep(50 * time.Millisecond)
		}
	}()
	seen := map[string]bool{}
	var seenMu sync.Mutex
	var resumes, gone atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		rv := list.GetResourceVersion()
		for {
			w, err := dyn.Resource(model.PolicyReports).Namespace(metav1.NamespaceAll).Watch(wctx, metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true})
			if err != nil {
				select {
				case <-stopLists:
					return
				case <-time.After(200 * time.Millisecond):
					continue
				}
			}
			for ev := range w.ResultChan() {
				if ev.Type == watch.Error {
					if st, ok := ev.Object.(*metav1.Status); ok && st.Code == http.StatusGone {
						gone.Add(1)
					} else if wctx.Err() == nil {
						t.Logf("watch error: %v", ev.Object)
					}
					break
				}
				u, ok := ev.Object.(*unstructured.Unstructured)
				if !ok {
					continue
				}
				rv = u.GetResourceVersion()
				if ev.Type == watch.Added || ev.Type == watch.Modified {
					seenMu.Lock()
					seen[u.GetName()] = true
					seenMu.Unlock()
				}
			}
			select {
			case <-stopLists:
				return
			default:
				resumes.Add(1)
			}
		}
	}()

	// n ConfigMaps, and one result each, published from 8 goroutines;
	// the first replica is killed a third of the way in.
	cms := make([]*corev1.ConfigMap, n)
	var next atomic.Int64
	var pub sync.WaitGroup
	conn, err := bus.Connect(ctx, queue.WithURL(urls...), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	errs := make(chan error, 8)
	for range 8 {
		pub.Add(1)
		go func() {
			defer pub.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				cm, err := kube.CoreV1().ConfigMaps(topoNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%05d", i)}}, metav1.CreateOptions{})
				if err != nil {
					errs <- err
					return
				}
				cms[i] = cm
				m, err := bus.ResultMessage(reportertest.Evaluation{Ref: reportertest.RefOf("v1", "ConfigMap", cm), Policy: "require-labels", Version: "1",
					Request: "r-" + strconv.Itoa(i), Scored: true, Rules: reportertest.Rules(engine.StatusFail, engine.StatusPass)}.Event())
				if err == nil {
					_, err = conn.PublishSync(ctx, m)
				}
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	for next.Load() < int64(n/3) {
		time.Sleep(10 * time.Millisecond)
	}
	// The replica the aggregator's connections (and so the watch) go
	// through: killing it makes the watch resume on another.
	victim, conns := lb.busiest()
	sigkilled, err := victim.proc.Kill()
	if err != nil || !sigkilled {
		t.Fatalf("kill %s: SIGKILL %v, %v", victim.name, sigkilled, err)
	}
	killed <- time.Now()
	t.Logf("SIGKILL to %s (%d connections through the balancer) after %d of %d resources", victim.name, conns, next.Load(), n)
	pub.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	t.Logf("%d resources created and their results published: %v", n, time.Since(begin).Round(time.Millisecond))

	// Issue 34: a denial in the admission log is served, through the API
	// server, as the namespace's AdmissionDenial by the surviving
	// replicas (each follows the log).
	denial := bus.Decision{RequestUID: "denied-1", Webhook: "validate-cluster", Operation: "CREATE", Outcome: bus.DecisionDenied,
		Resource: bus.DecisionResource{Version: "v1", Kind: "Pod", Resource: "pods", Namespace: topoNamespace, Name: "blocked"},
		User:     bus.DecisionUser{Username: "alice"}, Message: "blocked", Time: time.Now(),
		Findings: []bus.Finding{{Policy: "disallow-privileged", Rule: "privileged", Action: bus.ActionDeny, Message: "no"}}}
	dm, err := bus.DecisionMessage(denial)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.PublishSync(ctx, dm); err != nil {
		t.Fatal(err)
	}
	denials := dyn.Resource(reportserver.Decisions.WithResource("admissiondenials")).Namespace(topoNamespace)
	topoEventually(t, 60*time.Second, "the denial served through the API server", func() error {
		l, err := denials.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) != 1 || l.Items[0].Object["requestUid"] != "denied-1" {
			return fmt.Errorf("%d denials served", len(l.Items))
		}
		return nil
	})

	// Every report, through the API server, and on the watch.
	topoEventually(t, 120*time.Second, "every report listed through the API server", func() error {
		l, err := polr.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(l.Items) != n {
			return fmt.Errorf("%d of %d reports", len(l.Items), n)
		}
		return nil
	})
	topoEventually(t, 60*time.Second, "every report seen by the watch", func() error {
		seenMu.Lock()
		defer seenMu.Unlock()
		if len(seen) != n {
			return fmt.Errorf("the watch saw %d of %d reports", len(seen), n)
		}
		return nil
	})
	close(stopLists)
	stopWatch()
	wg.Wait()
	t.Logf("%d lists through the API server during the run, %d failed; the watch resumed %d times, %d expired", lists.Load(), failed.Load(), resumes.Load(), gone.Load())
	if listErrs.Load() > 0 {
		t.Errorf("lists failed for more than 35 s in a row: %d, the last: %v", listErrs.Load(), lastListErr.Load())
	}
	if resumes.Load() == 0 {
		t.Errorf("the watch never resumed: the kill of %s did not reach it (%d connections through the balancer)", victim.name, conns)
	}
	if gone.Load() > 0 {
		t.Errorf("the watch expired %d times: a resourceVersion from one replica was not good on another", gone.Load())
	}

	// The survivors, asked directly, answer identically: the same
	// reports, the same documents.
	identical := func(rs []*topoReplica) error {
		var want []byte
		var wantFrom string
		for _, r := range rs {
			got, err := directList(ctx, admin, r)
			if err != nil {
				return fmt.Errorf("%s: %w", r.name, err)
			}
			if want == nil {
				want, wantFrom = got, r.name
				continue
			}
			if string(got) != string(want) {
				return fmt.Errorf("%s and %s answer differently", r.name, wantFrom)
			}
		}
		return nil
	}
	topoEventually(t, 30*time.Second, "the surviving replicas' answers identical", func() error {
		return identical(slices.DeleteFunc(slices.Clone(replicas), func(r *topoReplica) bool { return r == victim }))
	})
	// The survivors store a snapshot of their index every 10 s: the
	// killed replica, restarted once one holds the whole run, starts from
	// it and reads only what the stream holds after it.
	topoEventually(t, 60*time.Second, "a snapshot of the whole run", func() error {
		s, err := conn.JetStream().Stream(ctx, bus.StreamResults)
		if err != nil {
			return err
		}
		info, err := s.Info(ctx)
		if err != nil {
			return err
		}
		snap, err := conn.StatSnapshot(ctx, reporterapp.SnapshotName, bus.StreamResults)
		if err != nil {
			return err
		}
		if snap.Sequence < info.State.LastSeq {
			return fmt.Errorf("the snapshot reaches sequence %d, the stream %d", snap.Sequence, info.State.LastSeq)
		}
		return nil
	})
	topo.restart(victim)
	topoEventually(t, 30*time.Second, "every replica's answers identical, the restarted one's too", func() error { return identical(replicas) })
	loaded, read := replicaMetric(t, victim, "verdict_report_index_results_loaded_total"), replicaMetric(t, victim, "verdict_report_index_messages_read_total")
	t.Logf("%s restarted from the snapshot: %v results loaded, %v messages read from the stream", victim.name, loaded, read)
	if loaded < float64(n) || read >= float64(n)/2 {
		t.Errorf("%s did not start from the snapshot: %v results loaded, %v messages read (%d resources)", victim.name, loaded, read, n)
	}

	// No report in etcd: the group is served, not stored.
	if _, err := kube.Discovery().ServerResourcesForGroupVersion("wgpolicyk8s.io/v1alpha2"); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}).Get(ctx, "policyreports.wgpolicyk8s.io", metav1.GetOptions{}); err == nil {
		t.Error("the PolicyReport CRD is installed in the serving mode")
	}
	topo.checkAlive()
	topo.checkForbidden()
	t.Logf("done in %v", time.Since(begin).Round(time.Millisecond))
}

// replicaMetric is the value of a series on a replica's probe port: an
// unlabelled metric's name, or name{labels} as /metrics writes it
// (labels in name order).
func replicaMetric(t *testing.T, r *topoReplica, name string) float64 {
	t.Helper()
	resp, err := http.Get(strings.Replace(r.ready, "/readyz", "/metrics", 1))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(body)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				t.Fatalf("%s: %q: %v", name, line, err)
			}
			return f
		}
	}
	t.Fatalf("%s has no metric %s", r.name, name)
	return 0
}

// lbPort is the balancer's port.
func lbPort(t *testing.T, lb *topoBalancer) int {
	t.Helper()
	_, port, err := net.SplitHostPort(lb.addr)
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// directList lists every PolicyReport from one replica, bypassing the
// API server (the replica authenticates the admin's client certificate
// against the cluster's client CA, as it would the API server's), as
// JSON with the items sorted by name.
func directList(ctx context.Context, admin *rest.Config, r *topoReplica) ([]byte, error) {
	cfg := rest.CopyConfig(admin)
	cfg.Host = "https://" + r.serve
	cfg.Insecure, cfg.CAFile, cfg.CAData = true, "", nil
	l, err := dynamic.NewForConfigOrDie(cfg).Resource(model.PolicyReports).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	if len(l.Items) == 0 {
		return nil, errors.New("no reports")
	}
	slices.SortFunc(l.Items, func(a, b unstructured.Unstructured) int {
		switch {
		case a.GetName() < b.GetName():
			return -1
		case a.GetName() > b.GetName():
			return 1
		}
		return 0
	})
	// Same documents. Versions are left out: a result one replica
	// applied once its resource was confirmed, after later ones, has
	// another version there (reportindex.Change.Local).
	for i := range l.Items {
		unstructured.RemoveNestedField(l.Items[i].Object, "metadata", "resourceVersion")
	}
	return json.Marshal(l.Items)
}
