package app_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
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
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/verdict-dev/verdict/internal/bus"
	reporterapp "github.com/verdict-dev/verdict/internal/reports/app"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// TestE2EServeMode runs the service in its serving mode (--serve-reports)
// against a control plane without the report CRDs: it becomes ready once
// it has read the stream, and a result published for a real object is
// served through the kube-apiserver's aggregation layer as that object's
// PolicyReport; etcd holds no report. Deleting the report takes it out
// until a newer evaluation brings it back. A client in the style of
// policy-reporter (a client-go metadata informer, then a GET of each
// report) keeps its view current through all of it, and the service
// stops promptly while its watch is open.
func TestE2EServeMode(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.WithoutCRDs())
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	srv := natstest.Server(t)

	port := testkit.FreePort(t)
	for _, ns := range []string{"verdict", "team"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kube.CoreV1().Services("verdict").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "verdict-reports"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost", Ports: []corev1.ServicePort{{Port: int32(port)}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
		"metadata": map[string]any{"name": "v1alpha2.wgpolicyk8s.io"},
		"spec": map[string]any{"group": "wgpolicyk8s.io", "version": "v1alpha2", "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
			"service": map[string]any{"namespace": "verdict", "name": "verdict-reports", "port": int64(port)}},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	cfg := reporterapp.DefaultConfig()
	cfg.Kube.Kubeconfig = cp.KubeconfigPath()
	cfg.NATS.URLs = []string{srv.ClientURL()}
	cfg.ProbeAddress = "127.0.0.1:" + strconv.Itoa(testkit.FreePort(t))
	cfg.Serve, cfg.ServeAddress, cfg.ServePort = true, "127.0.0.1", port
	// The certificate kept by the replicas, for the Service's names: the
	// APIService has no caBundle and does verify; its leader sets it.
	cfg.Namespace, cfg.ServeServiceName, cfg.ServeTLSSecret, cfg.ServeCASecret = "verdict", "verdict-reports", "verdict-reporter-tls", "verdict-reporter-ca"
	cfg.ServeAPIServices = []string{"v1alpha2.wgpolicyk8s.io"}
	cfg.Scan = false // no policy CRDs here
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- reporterapp.Run(runCtx, cfg, zerolog.Nop()) }()
	testkit.Eventually(t, 30*time.Second, "ready", func() error {
		resp, err := http.Get("http://" + cfg.ProbeAddress + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return testkit.ErrNotYet
		}
		return nil
	})

	// A client in the style of policy-reporter: a metadata informer on
	// the reports, and a GET of each report it sees added or changed.
	view := watchReportView(t, cp.RESTConfig())

	cm, err := kube.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := bus.Connect(ctx, queue.WithURL(srv.ClientURL()), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	m, err := bus.ResultMessage(reportertest.Evaluation{Ref: reportertest.RefOf("v1", "ConfigMap", cm), Policy: "require-labels", Version: "1", Request: "r1", Scored: true,
		Rules: reportertest.Rules(engine.StatusFail, engine.StatusPass)}.Event())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.PublishSync(ctx, m); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the report served through the API server", func() error {
		got, err := dyn.Resource(model.PolicyReports).Namespace("team").Get(ctx, string(cm.UID), metav1.GetOptions{})
		if err != nil {
			return err
		}
		return reportertest.SummaryIs(got, 1, 1, 0, 0, 0)
	})
	view.eventually(t, "team/"+string(cm.UID), func(u *unstructured.Unstructured) error {
		return reportertest.SummaryIs(u, 1, 1, 0, 0, 0)
	})

	// The serving mode's metrics say what the index holds and did.
	resp, err := http.Get("http://" + cfg.ProbeAddress + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"verdict_report_index_resources 1", "verdict_report_index_results_applied_total 1", "verdict_report_index_results_rejected_total 0", "verdict_report_index_ready 1"} {
		if !strings.Contains(string(metrics), "\n"+want+"\n") {
			t.Errorf("/metrics has no %q", want)
		}
	}

	// Through a verified connection: the leader set the caBundle to its
	// CA, and the replica serves the certificate that CA signed.
	as, err := dyn.Resource(schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}).Get(ctx, "v1alpha2.wgpolicyk8s.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bundle, _, _ := unstructured.NestedString(as.Object, "spec", "caBundle")
	skip, _, _ := unstructured.NestedBool(as.Object, "spec", "insecureSkipTLSVerify")
	if bundle == "" || skip {
		t.Fatalf("the APIService: caBundle %q, insecureSkipTLSVerify %t", bundle, skip)
	}

	// Deleting the report (as tools do to reset) takes it out until a
	// newer evaluation arrives.
	polr := dyn.Resource(model.PolicyReports).Namespace("team")
	if err := polr.Delete(ctx, string(cm.UID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := polr.Get(ctx, string(cm.UID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a deleted report: %v", err)
	}
	view.eventually(t, "team/"+string(cm.UID), nil)
	m, err = bus.ResultMessage(reportertest.Evaluation{Ref: reportertest.RefOf("v1", "ConfigMap", cm), Policy: "require-labels", Version: "2", Request: "r2", Scored: true,
		Rules: reportertest.Rules(engine.StatusPass)}.Event())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.PublishSync(ctx, m); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the report back with the newer evaluation", func() error {
		got, err := polr.Get(ctx, string(cm.UID), metav1.GetOptions{})
		if err != nil {
			return err
		}
		return reportertest.SummaryIs(got, 1, 0, 0, 0, 0)
	})
	view.eventually(t, "team/"+string(cm.UID), func(u *unstructured.Unstructured) error {
		return reportertest.SummaryIs(u, 1, 0, 0, 0, 0)
	})
	if n := view.getErrors.Load(); n > 0 {
		t.Logf("the view's GETs failed %d times (a report deleted between the event and the GET)", n)
	}
	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("service stopped with %v", err)
		}
	case <-time.After(40 * time.Second):
		t.Fatal("service did not stop")
	}
}

// reportView is a client in the style of policy-reporter: a metadata
// informer on PolicyReports, and a GET of every report it adds or
// updates; it holds each report as last read, by namespace/name.
type reportView struct {
	mu        sync.Mutex
	reports   map[string]*unstructured.Unstructured
	getErrors atomic.Int64
}

func watchReportView(t *testing.T, cfg *rest.Config) *reportView {
	t.Helper()
	v := &reportView{reports: map[string]*unstructured.Unstructured{}}
	polr := dynamic.NewForConfigOrDie(cfg).Resource(model.PolicyReports)
	meta := metadata.NewForConfigOrDie(cfg)
	testkit.Eventually(t, 60*time.Second, "a metadata list of the reports", func() error {
		_, err := meta.Resource(model.PolicyReports).List(t.Context(), metav1.ListOptions{})
		return err
	})
	factory := metadatainformer.NewSharedInformerFactory(meta, 0)
	inf := factory.ForResource(model.PolicyReports).Informer()
	get := func(obj any) {
		m, ok := obj.(*metav1.PartialObjectMetadata)
		if !ok {
			return
		}
		got, err := polr.Namespace(m.Namespace).Get(t.Context(), m.Name, metav1.GetOptions{})
		if err != nil {
			v.getErrors.Add(1)
			return
		}
		v.mu.Lock()
		v.reports[m.Namespace+"/"+m.Name] = got
		v.mu.Unlock()
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    get,
		UpdateFunc: func(_, obj any) { get(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok {
				v.mu.Lock()
				delete(v.reports, m.Namespace+"/"+m.Name)
				v.mu.Unlock()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	factory.Start(t.Context().Done())
	t.Cleanup(factory.Shutdown)
	syncCtx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for gvr, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			t.Fatalf("the metadata informer on %s did not sync", gvr)
		}
	}
	return v
}

// eventually waits until the view holds the report key and check accepts
// it, or, with a nil check, until the view no longer holds it.
func (v *reportView) eventually(t *testing.T, key string, check func(*unstructured.Unstructured) error) {
	t.Helper()
	testkit.Eventually(t, 30*time.Second, "the policy-reporter-style view of "+key, func() error {
		v.mu.Lock()
		u, ok := v.reports[key]
		v.mu.Unlock()
		switch {
		case check == nil && ok:
			return fmt.Errorf("still holds %s", key)
		case check == nil:
			return nil
		case !ok:
			return testkit.ErrNotYet
		}
		return check(u)
	})
}
