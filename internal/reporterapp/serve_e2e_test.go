package reporterapp_test

import (
	"context"
	"net"
	"net/http"
	"strconv"
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

	"github.com/verdict-dev/verdict/internal/controlplane"
	"github.com/verdict-dev/verdict/internal/events"
	"github.com/verdict-dev/verdict/internal/reporter"
	"github.com/verdict-dev/verdict/internal/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/reporterapp"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"
)

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestE2EServeMode runs the service in its serving mode (--serve-reports)
// against a control plane without the report CRDs: it becomes ready once
// it has read the stream, and a result published for a real object is
// served through the kube-apiserver's aggregation layer as that object's
// PolicyReport; etcd holds no report. Deleting the report takes it out
// until a newer evaluation brings it back.
func TestE2EServeMode(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.WithoutCRDs())
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	srv, err := embedded.Run(ctx, embedded.Config{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Shutdown)

	port := freePort(t)
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
	cfg.ProbeAddress = "127.0.0.1:" + strconv.Itoa(freePort(t))
	cfg.Serve, cfg.ServeAddress, cfg.ServePort = true, "127.0.0.1", port
	// The certificate kept by the replicas, for the Service's names: the
	// APIService has no caBundle and does verify; its leader sets it.
	cfg.Namespace, cfg.ServeServiceName, cfg.ServeTLSSecret, cfg.ServeCASecret = "verdict", "verdict-reports", "verdict-reporter-tls", "verdict-reporter-ca"
	cfg.ServeAPIServices = []string{"v1alpha2.wgpolicyk8s.io"}
	cfg.Scan = false // no policy CRDs here
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- reporterapp.Run(runCtx, cfg, zerolog.Nop()) }()
	reportertest.Eventually(t, 30*time.Second, "ready", func() error {
		resp, err := http.Get("http://" + cfg.ProbeAddress + "/readyz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return reportertest.ErrNotYet
		}
		return nil
	})

	cm, err := kube.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := queue.Connect(ctx, queue.WithURL(srv.ClientURL()), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	m, err := events.ResultMessage(reportertest.Evaluation{Ref: reportertest.RefOf("v1", "ConfigMap", cm), Policy: "require-labels", Version: "1", Request: "r1", Scored: true,
		Rules: reportertest.Rules(engine.StatusFail, engine.StatusPass)}.Event())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.PublishSync(ctx, m); err != nil {
		t.Fatal(err)
	}
	reportertest.Eventually(t, 60*time.Second, "the report served through the API server", func() error {
		got, err := dyn.Resource(reporter.PolicyReports).Namespace("team").Get(ctx, string(cm.UID), metav1.GetOptions{})
		if err != nil {
			return err
		}
		return reportertest.SummaryIs(got, 1, 1, 0, 0, 0)
	})

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
	polr := dyn.Resource(reporter.PolicyReports).Namespace("team")
	if err := polr.Delete(ctx, string(cm.UID), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := polr.Get(ctx, string(cm.UID), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a deleted report: %v", err)
	}
	m, err = events.ResultMessage(reportertest.Evaluation{Ref: reportertest.RefOf("v1", "ConfigMap", cm), Policy: "require-labels", Version: "2", Request: "r2", Scored: true,
		Rules: reportertest.Rules(engine.StatusPass)}.Event())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.PublishSync(ctx, m); err != nil {
		t.Fatal(err)
	}
	reportertest.Eventually(t, 20*time.Second, "the report back with the newer evaluation", func() error {
		got, err := polr.Get(ctx, string(cm.UID), metav1.GetOptions{})
		if err != nil {
			return err
		}
		return reportertest.SummaryIs(got, 1, 0, 0, 0, 0)
	})
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
