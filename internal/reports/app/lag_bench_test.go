package app_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/cache"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/platform/certs"
	reporterapp "github.com/verdict-dev/verdict/internal/reports/app"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/reports/reportserver"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/admissiontraffic"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// envInt reads a positive integer knob of a benchmark.
func envInt(b *testing.B, name string, def int) int {
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q", name, s)
	}
	return n
}

// BenchmarkAdmissionToReport measures the lag from an admission request to
// the resource's report, through the real path, in each of the
// reporter's modes: AdmissionReviews of the Pods of
// ../shared/bench/pods-1000.yaml (each iteration a new Pod UID) sent over
// TLS at a fixed rate (open loop) to the webhook (the 22 Pod Security
// policies of ../shared/bench/pss-classic), results published to an
// embedded JetStream, then
//   - mode=crd: one reporter projector with the service's default
//     settings writing PolicyReports to the real API server;
//   - mode=serve: the reporter service in its serving mode, its reports
//     served through the kube-apiserver's aggregation layer as
//     openreports.io Reports (the shared control plane has the
//     wgpolicyk8s.io CRDs, so the serving mode takes the other group);
//
// and seen by an informer through the API server. A Pod's lag ends when
// the informer first sees its report with all the results it ends up
// with. Reported: p50, p99 and max lag, and the kube-apiserver's own
// count of write requests to the report groups during the run
// (apiserver_request_total). Knobs: VERDICT_LAG_RATE (admissions per
// second, default 40), VERDICT_LAG_WRITE_QPS (the CRD mode's report
// writes per second, default the service's).
//
//	go test ./internal/reports/app -run '^$' -bench AdmissionToReport -benchtime 2000x
func BenchmarkAdmissionToReport(b *testing.B) {
	for _, mode := range []string{"crd", "serve"} {
		b.Run("mode="+mode, func(b *testing.B) { benchAdmissionToReport(b, mode) })
	}
}

func benchAdmissionToReport(b *testing.B, mode string) {
	if reportertest.ControlPlane() == nil {
		b.Skip("needs a real control plane; skipped under -short")
	}
	ctx := b.Context()
	rate := envInt(b, "VERDICT_LAG_RATE", 40)
	cfg := reporterapp.DefaultConfig()
	writeQPS := envInt(b, "VERDICT_LAG_WRITE_QPS", int(cfg.WriteQPS))

	rc := reportertest.ControlPlane().RESTConfig()
	rc.QPS, rc.Burst = 2000, 4000
	rc.WarningHandler = rest.NoWarnings{}
	kube := kubernetes.NewForConfigOrDie(rc)
	dyn := dynamic.NewForConfigOrDie(rc)
	nats := natstest.Server(b)

	reviews, namespaces := lagReviews(b)
	for _, ns := range namespaces {
		_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatal(err)
		}
	}

	// The webhook, in its file mode, publishing to JetStream.
	dir := b.TempDir()
	ca, err := certs.NewCA("bench-ca", time.Now(), time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	kp, err := certs.NewServing(ca, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Now(), time.Hour)
	if err != nil {
		b.Fatal(err)
	}
	for name, data := range map[string][]byte{"tls.crt": kp.CertPEM, "tls.key": kp.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		b.Fatal(err)
	}
	app := webhookapp.DefaultConfig()
	app.Mode = webhookapp.ModeFiles
	app.NATS.URLs, app.ResultBuffer = []string{nats.ClientURL()}, 100_000
	wcfg := &app.Webhook
	wcfg.Address, wcfg.ProbeAddress = addr, ""
	wcfg.CertFile, wcfg.KeyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	wcfg.PolicyPaths = []string{filepath.Join("..", "..", "..", "..", "shared", "bench", "pss-classic")}
	wcfg.ShutdownDelay = 0
	wctx, stopWebhook := context.WithCancel(context.WithoutCancel(ctx))
	webhookDone := make(chan error, 1)
	go func() {
		webhookDone <- webhookapp.Run(wctx, app, zerolog.Nop())
	}()
	b.Cleanup(func() {
		stopWebhook()
		if err := <-webhookDone; err != nil {
			b.Errorf("webhook: %v", err)
		}
	})

	// The projector, with the service's defaults.
	conn, err := bus.Connect(ctx, queue.WithURL(nats.ClientURL()), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(conn.Close)
	if err := bus.Provision(ctx, conn); err != nil {
		b.Fatal(err)
	}
	reports := model.PolicyReports
	switch mode {
	case "crd":
		startProjector(b, conn, dyn, kube, rc, cfg, writeQPS)
	case "serve":
		reports = startServing(b, rc, nats.ClientURL())
	}

	// Reports as the API server's watchers see them.
	var mu sync.Mutex
	seen := map[string]seenReport{}
	observe := func(obj any) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return
		}
		total := reportTotal(u)
		mu.Lock()
		if s, ok := seen[u.GetName()]; !ok || total > s.results {
			seen[u.GetName()] = seenReport{at: time.Now(), results: total}
		}
		mu.Unlock()
	}
	f := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	inf := f.ForResource(reports).Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: observe, UpdateFunc: func(_, obj any) { observe(obj) }}); err != nil {
		b.Fatal(err)
	}
	f.Start(ctx.Done())
	b.Cleanup(f.Shutdown)
	f.WaitForCacheSync(ctx.Done())

	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert())
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: 64,
	}}
	url := "https://" + addr + "/validate"
	warmup := createLagPods(b, dyn, reviews, "warmup", 1)
	testkit.Eventually(b, 30*time.Second, "the webhook's first answer", func() error {
		_, err := admissiontraffic.Send(ctx, client, url, warmup[0])
		return err
	})
	// The warm-up Pod's report is not measured.
	time.Sleep(time.Second)
	bodies := createLagPods(b, dyn, reviews, "lag-"+mode, b.N)
	writesBefore := reportWrites(b, kube)

	sent := make(map[string]time.Time, b.N)
	var sentMu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int, 1024)
	var failures sync.Map
	for range 16 {
		wg.Go(func() {
			for i := range work {
				body := bodies[i]
				uid := lagUID(body)
				start := time.Now()
				allowed, err := admissiontraffic.Send(ctx, client, url, body)
				var status *admissiontraffic.StatusError
				switch {
				case errors.As(err, &status), errors.Is(err, admissiontraffic.ErrNotReview):
					// An answer that admits nothing: the Pod is not measured.
				case err != nil:
					failures.Store(uid, err)
				case allowed:
					sentMu.Lock()
					sent[uid] = start
					sentMu.Unlock()
				}
			}
		})
	}
	b.ResetTimer()
	tick := time.NewTicker(time.Second / time.Duration(rate))
	for i := range b.N {
		<-tick.C
		work <- i
	}
	tick.Stop()
	close(work)
	wg.Wait()
	b.StopTimer()
	n := 0
	failures.Range(func(k, v any) bool { n++; b.Logf("request %v: %v", k, v); return n < 5 })
	if n > 0 {
		b.Fatalf("%d admission requests failed", n)
	}

	// Every admitted Pod's report arrives.
	testkit.Eventually(b, 5*time.Minute, "every admitted Pod's report", func() error {
		mu.Lock()
		defer mu.Unlock()
		missing := 0
		for uid := range sent {
			if _, ok := seen[uid]; !ok {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d reports missing", missing, len(sent))
		}
		return nil
	})
	// Results of one admission may reach the report in more than one
	// step: let the last of them land before taking the times.
	time.Sleep(2 * time.Second)
	writes := reportWrites(b, kube) - writesBefore
	lags := make([]time.Duration, 0, len(sent))
	mu.Lock()
	for uid, at := range sent {
		lags = append(lags, seen[uid].at.Sub(at))
	}
	mu.Unlock()
	if len(lags) == 0 {
		b.Logf("none of %d Pods admitted: nothing to measure", b.N)
		return
	}
	slices.Sort(lags)
	pct := func(q float64) time.Duration { return lags[min(len(lags)-1, int(q*float64(len(lags))))] }
	b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(lags[len(lags)-1].Microseconds())/1000, "max-ms")
	b.ReportMetric(float64(len(lags)), "reports")
	b.ReportMetric(writes, "report-writes")
	b.Logf("mode %s, rate %d/s, write QPS %d: %d admitted Pods, lag p50 %v p99 %v max %v; %.0f write requests for reports", mode, rate, writeQPS, len(lags),
		pct(0.50).Round(time.Millisecond), pct(0.99).Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond), writes)
}

// seenReport is when the informer first saw a report with its largest
// count of results, and that count.
type seenReport struct {
	at      time.Time
	results int64
}

// reportTotal is the number of results a report's summary counts.
func reportTotal(u *unstructured.Unstructured) int64 {
	var n int64
	for _, k := range []string{"pass", "fail", "warn", "error", "skip"} {
		v, _, _ := unstructured.NestedInt64(u.Object, "summary", k)
		n += v
	}
	return n
}

// startProjector runs the CRD mode's projector with the service's
// defaults (and the given write QPS) until the benchmark ends.
func startProjector(b *testing.B, conn *queue.Conn, dyn dynamic.Interface, kube kubernetes.Interface, rc *rest.Config, cfg reporterapp.Config, writeQPS int) {
	ctx := b.Context()
	w, err := reporter.NewWriter(dyn, reporter.WithWriteQPS(float64(writeQPS), max(cfg.WriteBurst, writeQPS)))
	if err != nil {
		b.Fatal(err)
	}
	check, err := apicheck.New(metadata.NewForConfigOrDie(rc), restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery())))
	if err != nil {
		b.Fatal(err)
	}
	p, err := reporter.NewProjector(conn, w, reporter.WithWindow(cfg.CoalesceWindow), reporter.WithConcurrency(cfg.Concurrency), reporter.WithFlushWorkers(cfg.FlushWorkers), reporter.WithChecker(check))
	if err != nil {
		b.Fatal(err)
	}
	pctx, stopProjector := context.WithCancel(context.WithoutCancel(ctx))
	projectorDone := make(chan error, 1)
	go func() { projectorDone <- p.Run(pctx) }()
	b.Cleanup(func() {
		stopProjector()
		if err := <-projectorDone; err != nil {
			b.Errorf("projector: %v", err)
		}
	})

}

// startServing runs the reporter service in its serving mode until the
// benchmark ends, registers it for openreports.io/v1alpha1 behind an
// ExternalName Service naming localhost, and returns the Reports'
// resource once the aggregator serves them.
func startServing(b *testing.B, rc *rest.Config, natsURL string) schema.GroupVersionResource {
	ctx := b.Context()
	kube := kubernetes.NewForConfigOrDie(rc)
	dyn := dynamic.NewForConfigOrDie(rc)
	const ns, svc, apiService = "verdict-bench", "verdict-reports", "v1alpha1.openreports.io"
	port := testkit.FreePort(b)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	// Created afresh: a run before this one (the benchmark runs once with
	// b.N=1 first) left them pointing at its own port.
	apiServices := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"})
	if err := apiServices.Delete(ctx, apiService, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
	if err := kube.CoreV1().Services(ns).Delete(ctx, svc, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		b.Fatal(err)
	}
	if _, err := kube.CoreV1().Services(ns).Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: svc},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost", Ports: []corev1.ServicePort{{Port: int32(port)}}},
	}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := apiServices.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": apiService},
		"spec": map[string]any{"group": reportserver.OpenReports.Group, "version": reportserver.OpenReports.Version, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service": map[string]any{"namespace": ns, "name": svc, "port": int64(port)}},
	}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		_ = apiServices.Delete(context.WithoutCancel(ctx), apiService, metav1.DeleteOptions{})
	})

	cfg := reporterapp.DefaultConfig()
	cfg.Kube.Kubeconfig = reportertest.ControlPlane().KubeconfigPath()
	cfg.NATS.URLs = []string{natsURL}
	cfg.ProbeAddress = "127.0.0.1:" + strconv.Itoa(testkit.FreePort(b))
	cfg.Serve, cfg.ServeAddress, cfg.ServePort = true, "127.0.0.1", port
	cfg.Namespace, cfg.ServeServiceName, cfg.ServeTLSSecret, cfg.ServeCASecret = ns, svc, "verdict-reports-tls", "verdict-reports-ca"
	cfg.ServeLeaseName, cfg.Identity = "verdict-reports-bench", "bench-"+strconv.Itoa(port)
	cfg.ServeAPIServices = []string{apiService}
	cfg.Scan = false
	sctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- reporterapp.Run(sctx, cfg, zerolog.Nop()) }()
	b.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			b.Errorf("serving reporter: %v", err)
		}
	})
	reports := reportserver.OpenReports.WithResource("reports")
	testkit.Eventually(b, 2*time.Minute, "the served Reports", func() error {
		_, err := dyn.Resource(reports).List(ctx, metav1.ListOptions{Limit: 1})
		return err
	})
	return reports
}

// reportWrites is the kube-apiserver's own count of write requests
// (POST, PUT, PATCH, APPLY, DELETE) to the report groups so far, from
// its apiserver_request_total metric.
func reportWrites(b *testing.B, kube kubernetes.Interface) float64 {
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	var n float64
	for line := range strings.Lines(string(raw)) {
		if !strings.HasPrefix(line, "apiserver_request_total{") ||
			!strings.Contains(line, `group="wgpolicyk8s.io"`) && !strings.Contains(line, `group="openreports.io"`) {
			continue
		}
		if !slices.ContainsFunc([]string{"POST", "PUT", "PATCH", "APPLY", "DELETE"}, func(v string) bool { return strings.Contains(line, `verb="`+v+`"`) }) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			b.Fatalf("apiserver metrics: %q: %v", line, err)
		}
		n += v
	}
	return n
}

// lagPod is one Pod of the bench file: its namespace and name, and a
// builder of its AdmissionReview naming a uid and a name.
type lagPod struct {
	obj    map[string]any
	review func(uid, name string) []byte
}

// lagReviews reads the Pods of the bench file and lists their namespaces.
func lagReviews(b *testing.B) ([]lagPod, []string) {
	pods, err := admissiontraffic.ReadPods(filepath.Join("..", "..", "..", "..", "shared", "bench", "pods-1000.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	var out []lagPod
	nss := map[string]bool{}
	for i, obj := range pods {
		nss[document.String(obj, "metadata", "namespace")] = true
		out = append(out, lagPod{obj: obj, review: func(uid, name string) []byte {
			o := document.DeepCopy(obj).(map[string]any)
			md := o["metadata"].(map[string]any)
			md["uid"], md["name"] = uid, name
			body, err := admissiontraffic.Review(o, admissiontraffic.Request{UID: "req-" + uid + "-" + strconv.Itoa(i), Operation: "CREATE", Username: "bench"})
			if err != nil {
				panic(err)
			}
			return body
		}})
	}
	return out, slices.Sorted(func(yield func(string) bool) {
		for ns := range nss {
			if !yield(ns) {
				return
			}
		}
	})
}

// createLagPods stores n Pods of the bench file in the API server (the
// reporter reports only on resources that exist) and returns each one's
// review, naming the stored uid.
func createLagPods(b *testing.B, dyn dynamic.Interface, pods []lagPod, prefix string, n int) [][]byte {
	b.Helper()
	out := make([][]byte, n)
	prefix += strconv.FormatInt(time.Now().UnixNano()%1e9, 36) // runs of one benchmark do not collide
	var wg sync.WaitGroup
	var failed atomic.Value
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				// Some Pods of the bench file are invalid for the API server
				// (the file tests policies): take the next one then.
				var err error
				for k := range len(pods) {
					p := pods[(i+k)%len(pods)]
					o := document.DeepCopy(p.obj).(map[string]any)
					md := o["metadata"].(map[string]any)
					name := fmt.Sprintf("%s-%s-%06d", md["name"], prefix, i)
					md["name"] = name
					delete(md, "uid")
					var created *unstructured.Unstructured
					created, err = dyn.Resource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).
						Namespace(document.String(o, "metadata", "namespace")).Create(b.Context(), &unstructured.Unstructured{Object: o}, metav1.CreateOptions{})
					if apierrors.IsInvalid(err) {
						continue
					}
					if err == nil {
						out[i] = p.review(string(created.GetUID()), name)
					}
					break
				}
				if err != nil {
					failed.CompareAndSwap(nil, err)
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatalf("create bench Pods: %v", err)
	}
	return out
}

// lagUID reads the object's uid back from a review.
func lagUID(body []byte) string {
	var r struct {
		Request struct {
			Object struct {
				Metadata struct {
					UID string `json:"uid"`
				} `json:"metadata"`
			} `json:"object"`
		} `json:"request"`
	}
	_ = json.Unmarshal(body, &r)
	return r.Request.Object.Metadata.UID
}
