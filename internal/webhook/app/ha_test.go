package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/balancer"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
	"github.com/verdict-dev/verdict/internal/webhook/registrar"
	"github.com/verdict-dev/verdict/pkg/queue"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"
)

// env is a control plane, a JetStream server and the test namespaces.
type env struct {
	cp   *controlplane.ControlPlane
	kube kubernetes.Interface
	dyn  dynamic.Interface
	nats *embedded.Server
	port int // JetStream client port
	dir  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cp := controlplane.StartForTest(t)
	e := &env{cp: cp, kube: kubernetes.NewForConfigOrDie(cp.RESTConfig()), dyn: dynamic.NewForConfigOrDie(cp.RESTConfig()), dir: t.TempDir(), port: testkit.FreePort(t)}
	ctx := t.Context()
	for _, ns := range []string{"verdict", "team"} {
		if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.kube.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, y := range []string{enforcePrivileged, auditLabels} {
		if _, err := e.dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, y), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.startNATS(t)
	return e
}

// startNATS starts JetStream, or starts it again after a Shutdown, on
// the env's port and store.
func (e *env) startNATS(t *testing.T) {
	t.Helper()
	e.nats = natstest.Server(t, natstest.WithPort(e.port), natstest.WithStoreDir(e.dir))
}

// replica is one running webhook service.
type replica struct {
	id     string
	port   int
	probe  int
	cancel context.CancelFunc
	done   chan error
}

func (e *env) startReplica(t *testing.T, id, url string, mod func(*webhookapp.Config)) *replica {
	t.Helper()
	r := &replica{id: id, port: testkit.FreePort(t), probe: testkit.FreePort(t), done: make(chan error, 1)}
	if url == "" {
		url = fmt.Sprintf("https://127.0.0.1:%d", r.port)
	}
	cfg := webhookapp.DefaultConfig()
	cfg.Kube.Kubeconfig = e.cp.KubeconfigPath()
	cfg.Identity = id
	cfg.WebhookURL = url
	cfg.CertIPs = []net.IP{net.ParseIP("127.0.0.1")}
	cfg.Webhook.Address = fmt.Sprintf("127.0.0.1:%d", r.port)
	cfg.Webhook.ProbeAddress = fmt.Sprintf("127.0.0.1:%d", r.probe)
	cfg.Webhook.ShutdownDelay = 500 * time.Millisecond
	cfg.NATS.URLs = []string{fmt.Sprintf("nats://127.0.0.1:%d", e.port)}
	cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = 3*time.Second, 2*time.Second, 200*time.Millisecond
	cfg.ReconcileInterval = 2 * time.Second
	cfg.Webhook.ClientCAFile = e.cp.WebhookClientCAFile()
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithCancel(t.Context())
	r.cancel = cancel
	go func() { r.done <- webhookapp.Run(ctx, cfg, zerolog.Nop()) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

func (r *replica) stop(t *testing.T) {
	r.cancel()
	select {
	case err := <-r.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("replica %s: %v", r.id, err)
		}
		r.done <- nil // later stops return at once
	case <-time.After(30 * time.Second):
		t.Errorf("replica %s did not stop", r.id)
	}
}

// replicaBalancer stands in for the webhook's Service as kube-proxy
// does (testkit/balancer): each TCP connection, untouched, to the next
// replica whose /readyz answers 200, as endpoints list only ready pods.
type replicaBalancer struct{ lb *balancer.Balancer }

func (e *env) startBalancer(t *testing.T) *replicaBalancer {
	t.Helper()
	return &replicaBalancer{lb: balancer.Start(t, "127.0.0.1:0")}
}

func (b *replicaBalancer) set(replicas ...*replica) {
	backends := make([]balancer.Backend, 0, len(replicas))
	for _, r := range replicas {
		backends = append(backends, balancer.Backend{Addr: fmt.Sprintf("127.0.0.1:%d", r.port), Ready: r.ready})
	}
	b.lb.Set(backends...)
}

func (b *replicaBalancer) url() string { return "https://" + b.lb.Addr() }

// traffic creates compliant and privileged Pods until stopped and counts
// every outcome that is not the policy's answer.
type traffic struct {
	sent, wrong atomic.Int64
	firstWrong  atomic.Value
	stop        chan struct{}
	done        chan struct{}
}

func startTraffic(t *testing.T, kube kubernetes.Interface) *traffic {
	tr := &traffic{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(tr.done)
		for i := 0; ; i++ {
			select {
			case <-tr.stop:
				return
			default:
			}
			ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
			_, err := kube.CoreV1().Pods("team").Create(ctx, pod(fmt.Sprintf("ok-%d", i), false), metav1.CreateOptions{})
			if err != nil {
				tr.wrong.Add(1)
				tr.firstWrong.CompareAndSwap(nil, fmt.Sprintf("compliant pod refused: %v", err))
			}
			_, err = kube.CoreV1().Pods("team").Create(ctx, pod(fmt.Sprintf("bad-%d", i), true), metav1.CreateOptions{})
			if err == nil || !strings.Contains(err.Error(), "Privileged mode is disallowed") {
				tr.wrong.Add(1)
				tr.firstWrong.CompareAndSwap(nil, fmt.Sprintf("privileged pod not denied by the policy: %v", err))
			}
			cancel()
			tr.sent.Add(2)
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return tr
}

func (tr *traffic) finish(t *testing.T) {
	t.Helper()
	close(tr.stop)
	<-tr.done
	if n := tr.wrong.Load(); n > 0 {
		t.Fatalf("%d of %d admissions went wrong; first: %v", n, tr.sent.Load(), tr.firstWrong.Load())
	}
	t.Logf("%d admissions, all answered as the policies say", tr.sent.Load())
}

func waitEnforced(t *testing.T, kube kubernetes.Interface) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		_, err := kube.CoreV1().Pods("team").Create(t.Context(), pod(fmt.Sprintf("probe-%d", i), true), metav1.CreateOptions{})
		if err != nil && strings.Contains(err.Error(), "Privileged mode is disallowed") {
			return
		}
		time.Sleep(300 * time.Millisecond)
	}
	t.Fatal("the policies are not enforced")
}

func leaseHolder(t *testing.T, kube kubernetes.Interface) string {
	l, err := kube.CoordinationV1().Leases("verdict").Get(t.Context(), "verdict-webhook", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// TestE2ETwoReplicasLeaderDies: two replicas behind a Service stand-in;
// the leader stops; the other takes the Lease and keeps the webhook
// configurations right, and no admission goes wrong meanwhile.
func TestE2ETwoReplicasLeaderDies(t *testing.T) {
	e := newEnv(t)
	lb := e.startBalancer(t)
	a := e.startReplica(t, "replica-a", lb.url(), nil)
	testkit.EventuallyTrue(t, 20*time.Second, "the condition", func() bool { return leaseHolder(t, e.kube) == "replica-a" })
	b := e.startReplica(t, "replica-b", lb.url(), nil)
	lb.set(a, b)
	waitEnforced(t, e.kube)

	tr := startTraffic(t, e.kube)
	time.Sleep(2 * time.Second)
	// The leader goes away: out of the Service first (as endpoints drop a
	// terminating pod), then it shuts down.
	lb.set(b)
	a.stop(t)
	testkit.EventuallyTrue(t, 20*time.Second, "the condition", func() bool { return leaseHolder(t, e.kube) == "replica-b" })
	time.Sleep(2 * time.Second)
	tr.finish(t)
	// The new leader restores a deleted configuration (no traffic then: a
	// deleted configuration admits everything until it is back).
	if err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(t.Context(), registrar.DefaultValidatingName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 15*time.Second, "the condition", func() bool {
		v, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(t.Context(), registrar.DefaultValidatingName, metav1.GetOptions{})
		return err == nil && len(v.Webhooks) >= 2
	})
	waitEnforced(t, e.kube)
}

// TestE2ENATSDown: with JetStream stopped, admissions are still answered
// (enforce decisions intact) and the results that could not be published
// are counted; when JetStream is back, publishing resumes.
func TestE2ENATSDown(t *testing.T) {
	e := newEnv(t)
	r := e.startReplica(t, "replica-a", "", nil)
	waitEnforced(t, e.kube)

	e.nats.Shutdown()
	e.nats = nil
	tr := startTraffic(t, e.kube)
	time.Sleep(3 * time.Second)
	tr.finish(t)
	testkit.EventuallyTrue(t, 10*time.Second, "the condition", func() bool {
		m := scrape(t, r.probe)
		return metricAbove(m, "publish_pending", 0) || metricAbove(m, "publish_retries_total", 0) || metricAbove(m, "publish_dropped_total", 0)
	})

	e.startNATS(t)
	p, err := e.kube.CoreV1().Pods("team").Create(t.Context(), pod("after-restart", false), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conn, err := bus.Connect(t.Context(), queue.WithURL(e.nats.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool {
		n := 0
		_, err := conn.Replay(t.Context(), bus.StreamResults, func(queue.ReplayMsg) error { n++; return nil },
			queue.WithReplayFilter(bus.ResultsOfResource(string(p.UID))))
		return err == nil && n > 0
	})
}

// scrape reads the replica's metrics over its probe port.
func scrape(t *testing.T, port int) string {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricAbove reports whether some sample whose name contains name is
// above v.
func metricAbove(metrics, name string, v float64) bool {
	for _, line := range strings.Split(metrics, "\n") {
		if strings.HasPrefix(line, "#") || !strings.Contains(line, name) {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		var f float64
		if _, err := fmt.Sscan(fields[len(fields)-1], &f); err == nil && f > v {
			return true
		}
	}
	return false
}

// TestE2ECertificateRotation: lifetimes short enough that the serving
// certificate is renewed and the CA rotated (new CA trusted, certificate
// switched, old CA dropped) while Pods are admitted: no admission fails.
func TestE2ECertificateRotation(t *testing.T) {
	e := newEnv(t)
	e.startReplica(t, "replica-a", "", func(c *webhookapp.Config) {
		c.CAValidity, c.CertValidity, c.RenewBefore = 36*time.Second, 24*time.Second, 20*time.Second
		c.ReloadGrace, c.RenewInterval = 2*time.Second, 500*time.Millisecond
	})
	waitEnforced(t, e.kube)
	caSecret := func() []byte {
		s, err := e.kube.CoreV1().Secrets("verdict").Get(t.Context(), "verdict-webhook-ca", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return s.Data[certs.KeyCert]
	}
	firstCA := caSecret()
	tr := startTraffic(t, e.kube)
	// The CA enters its renewal window 16 s after it was made; wait for a
	// new CA, then for the bundle to shrink back to it alone.
	testkit.EventuallyTrue(t, 60*time.Second, "the condition", func() bool { return !bytes.Equal(caSecret(), firstCA) })
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool {
		s, err := e.kube.CoreV1().Secrets("verdict").Get(t.Context(), "verdict-webhook-ca", metav1.GetOptions{})
		if err != nil {
			return false
		}
		b, _ := certs.ParseBundle(s.Data[certs.KeyBundle])
		return len(b) == 1
	})
	time.Sleep(2 * time.Second)
	tr.finish(t)
}
