package app_test

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/balancer"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/latency"
	"github.com/verdict-dev/verdict/internal/testkit/podload"
	"github.com/verdict-dev/verdict/internal/testkit/procstat"
	"github.com/verdict-dev/verdict/internal/testkit/testproc"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// The policy sets of Kyverno's benchmark, and where they are read from.
const (
	// setVpol is Kyverno's 16 ValidatingPolicies, "vpol-pss" in its
	// results (testdata/kyverno-vpol-pss-baseline.yaml, copied from
	// Kyverno's docs/perf-testing/v1.18.1/policies).
	setVpol = "vpol-pss"
	// setCpol is the ClusterPolicy set: the 22 Pod Security policies of
	// the kyverno/policies library that cmd/loadgen and
	// hack/bench-webhook.sh load (../shared/bench/pss-classic; 19 Audit,
	// 3 Enforce).
	setCpol = "cpol-pss"

	vpolFile      = "testdata/kyverno-vpol-pss-baseline.yaml"
	cpolDir       = "../../../../shared/bench/pss-classic"
	benchLoadNS   = "testns" // Kyverno's k6 script's namespace
	benchVerdict  = "verdict"
	benchGroupAdm = "kubeadm:cluster-admins"
)

// apiBenchScenario is one cell of the matrix's rows: a policy set ("" for
// the baseline without any webhook) and the number of webhook replicas.
type apiBenchScenario struct {
	set      string
	replicas int
}

func (s apiBenchScenario) String() string {
	if s.set == "" {
		return "baseline"
	}
	return fmt.Sprintf("%s-%dr", s.set, s.replicas)
}

// apiBenchPlan is what a run measures, from the environment.
type apiBenchPlan struct {
	scenarios  []apiBenchScenario
	clients    []int
	iterations []int
	mode       podload.Mode
	user       string // kubeadm or masters
	out        string // a file for the Markdown tables ("": none)
	profile    string // a folder for kube-apiserver's CPU profiles ("": none)
}

// readAPIBenchPlan reads the plan from VERDICT_APISERVER_BENCH and its
// knobs, and skips the test when it is unset.
func readAPIBenchPlan(t *testing.T) apiBenchPlan {
	t.Helper()
	which := os.Getenv("VERDICT_APISERVER_BENCH")
	if which == "" {
		t.Skip("the API-server benchmark runs only with VERDICT_APISERVER_BENCH=full or quick (hack/bench-apiserver.sh)")
	}
	p := apiBenchPlan{mode: podload.ModeK6, user: "kubeadm", out: os.Getenv("VERDICT_APISERVER_BENCH_OUT"), profile: os.Getenv("VERDICT_APISERVER_BENCH_PROFILE")}
	switch which {
	case "full", "1":
		// Each set's 3-replica runs follow its 1-replica runs, or the
		// other way round, so that replicas start or stop once a set.
		p.scenarios = []apiBenchScenario{{}, {setVpol, 1}, {setVpol, 3}, {setCpol, 3}, {setCpol, 1}, {}}
		p.clients = []int{10, 50, 200, 500}
		p.iterations = []int{500, 1500, 3000, 3000}
	case "quick":
		p.scenarios = []apiBenchScenario{{}, {setVpol, 1}, {setCpol, 1}, {}}
		p.clients = []int{50, 200}
		p.iterations = []int{1500, 3000}
	default:
		t.Fatalf("VERDICT_APISERVER_BENCH=%q: full or quick", which)
	}
	ints := func(name string, into *[]int) {
		s := os.Getenv(name)
		if s == "" {
			return
		}
		var v []int
		for _, f := range strings.Split(s, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil || n < 1 {
				t.Fatalf("%s=%q: positive integers, comma-separated", name, s)
			}
			v = append(v, n)
		}
		*into = v
	}
	ints("VERDICT_APISERVER_BENCH_CLIENTS", &p.clients)
	ints("VERDICT_APISERVER_BENCH_ITERATIONS", &p.iterations)
	if len(p.iterations) != len(p.clients) {
		t.Fatalf("%d client levels, %d iteration counts: one count per level", len(p.clients), len(p.iterations))
	}
	if s := os.Getenv("VERDICT_APISERVER_BENCH_MODE"); s != "" {
		m, err := podload.ParseMode(s)
		if err != nil {
			t.Fatal(err)
		}
		p.mode = m
	}
	if s := os.Getenv("VERDICT_APISERVER_BENCH_USER"); s != "" {
		if s != "kubeadm" && s != "masters" {
			t.Fatalf("VERDICT_APISERVER_BENCH_USER=%q: kubeadm or masters", s)
		}
		p.user = s
	}
	return p
}

// TestAPIServerBenchmark reproduces Kyverno's published admission
// benchmark (kyverno/kyverno docs/perf-testing/v1.18.1) against the local
// control plane: Pods created through a real kube-apiserver (etcd behind
// it, no scheduler: Pods stay Pending, as on Kyverno's KWOK nodes) by 10,
// 50, 200 and 500 concurrent clients (podload, in the way Kyverno's k6
// script creates them), with no webhook (the baseline), then with
// Verdict's webhook as real processes in cluster mode (built from
// cmd/webhook, results published to a nats-server process), one replica
// and three behind a Service stand-in, enforcing Kyverno's 16
// ValidatingPolicies and then the 22 Pod Security ClusterPolicies. The
// baseline runs first and again last. Each run reports the latency of an
// iteration (avg, p95, p99, max: k6's iteration_duration) and of its
// CREATE alone, the p99's change over the baseline at the same
// concurrency, and each process's CPU time and peak resident memory
// (from /proc). Every Pod must be admitted: an error fails the test after
// the tables.
//
// Only with VERDICT_APISERVER_BENCH=full (about 6 minutes on two cores)
// or quick (50 and 200 clients, one replica); hack/bench-apiserver.sh
// runs it. Knobs: VERDICT_APISERVER_BENCH_CLIENTS and _ITERATIONS (comma
// lists of the same length), _MODE (k6, fresh or reuse: podload.Mode),
// _USER (kubeadm: the loader is in kubeadm:cluster-admins, as kind's
// admin kubeconfig is, so API Priority and Fairness applies to it as in
// Kyverno's runs; masters: system:masters, exempt), _OUT (a file for
// the Markdown tables), _PROFILE (a folder: a 5 s CPU profile of
// kube-apiserver from the middle of each run, <scenario>-<clients>.pprof),
// _WEBHOOK (a webhook binary to run instead of one built from the tree:
// builds compared in one session).
func TestAPIServerBenchmark(t *testing.T) {
	plan := readAPIBenchPlan(t)
	ctx := t.Context()
	bins := t.TempDir()
	built := make(chan error, 1)
	var webhookBin, natsBin string
	go func() {
		var err error
		if webhookBin = os.Getenv("VERDICT_APISERVER_BENCH_WEBHOOK"); webhookBin == "" {
			webhookBin, err = testproc.Build(ctx, "github.com/verdict-dev/verdict/cmd/webhook", bins)
		}
		if err == nil {
			natsBin, err = testproc.Build(ctx, testproc.NATSModule, bins)
		}
		built <- err
	}()
	var cpOpts []controlplane.Option
	if plan.profile != "" {
		cpOpts = append(cpOpts, controlplane.WithAPIServerArgs("--profiling=true"))
	}
	cp := controlplane.StartForTest(t, cpOpts...)
	admin := cp.RESTConfig()
	admin.QPS, admin.Burst = 200, 400
	admin.WarningHandler = rest.NoWarnings{}
	kube := kubernetes.NewForConfigOrDie(admin)
	dyn := dynamic.NewForConfigOrDie(admin)
	if err := <-built; err != nil {
		t.Fatal(err)
	}

	b := newAPIBench(t, plan, cp, kube, dyn, natsBin, webhookBin)
	var rows []apiBenchRow
	// The tables are written whatever happens: a run that fails midway
	// still shows what it measured.
	defer func() {
		tables := apiBenchTables(plan, b, rows)
		t.Log("\n" + tables)
		if plan.out != "" {
			if err := os.WriteFile(plan.out, []byte(tables), 0o644); err != nil {
				t.Error(err)
			}
		}
	}()
	for i, sc := range plan.scenarios {
		b.arrange(sc, i)
		b.warmUp(i == 0)
		for j, clients := range plan.clients {
			row := b.measure(sc, clients, plan.iterations[j])
			t.Log(row.line())
			rows = append(rows, row)
			b.deletePods()
		}
	}
	for _, r := range rows {
		if r.errors > 0 {
			t.Errorf("%s, %d clients: %d of %d iterations failed; first: %v", r.scenario, r.clients, r.errors, r.iterations, r.firstErr)
		}
	}
}

// apiBench is the running rig: the control plane, NATS, the webhook
// replicas behind the balancer, and the loader's client configuration.
type apiBench struct {
	t          *testing.T
	plan       apiBenchPlan
	cp         *controlplane.ControlPlane
	kube       kubernetes.Interface
	dyn        dynamic.Interface
	load       *rest.Config
	webhookBin string
	natsURL    string
	nats       *testproc.Proc
	lb         *balancer.Balancer
	host       string // the webhook URL's host
	replicas   []*benchReplica
	set        string // the policy set in the cluster
	probes     int
}

// benchReplica is one webhook process.
type benchReplica struct {
	name, addr, probe string
	proc              *testproc.Proc
}

func newAPIBench(t *testing.T, plan apiBenchPlan, cp *controlplane.ControlPlane, kube kubernetes.Interface, dyn dynamic.Interface, natsBin, webhookBin string) *apiBench {
	t.Helper()
	ctx := t.Context()
	b := &apiBench{t: t, plan: plan, cp: cp, kube: kube, dyn: dyn, webhookBin: webhookBin}
	for _, ns := range []string{benchVerdict, benchLoadNS} {
		if err := podload.EnsureNamespace(ctx, kube, ns); err != nil {
			t.Fatal(err)
		}
	}
	// The loader: kind's admin kubeconfig is kubeadm's admin.conf, whose
	// user is in kubeadm:cluster-admins (kubeadm 1.29 and later), bound
	// to cluster-admin and not exempt from API Priority and Fairness.
	b.load = cp.RESTConfig()
	if plan.user == "kubeadm" {
		if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "kubeadm:cluster-admins"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: benchGroupAdm}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		var err error
		if b.load, err = cp.UserRESTConfig("kubernetes-admin", benchGroupAdm); err != nil {
			t.Fatal(err)
		}
	}
	b.load.WarningHandler = rest.NoWarnings{}
	b.load.UserAgent = "podload"

	// One nats-server, JetStream on, as hack/bench-webhook.sh runs it.
	addr := testkit.FreeAddr(t)
	host, port, _ := net.SplitHostPort(addr)
	b.natsURL = "nats://" + addr
	b.nats = testproc.StartForTest(t, testproc.Spec{
		Name: "nats-server", Path: natsBin, LogDir: t.TempDir(), Ready: "Server is ready",
		Args: []string{"-a", host, "-p", port, "-js", "-sd", t.TempDir()},
	}, false)
	select {
	case <-b.nats.Ready():
	case <-time.After(30 * time.Second):
		t.Fatalf("nats-server not ready:\n%s", b.nats.Tail(20))
	}

	// The Service stand-in, and the serving certificate for the name the
	// webhook configurations give it.
	b.lb = balancer.Start(t, "127.0.0.1:0")
	b.host = webhookHost(t)
	b.writeCertificates()
	return b
}

// webhookHost is the host of the webhook URL. The API server calls a
// webhook on a loopback address (127.0.0.1, localhost) over HTTP/2, all
// its calls on one connection; a Service (as in Kyverno's runs, and in a
// Verdict install) over HTTP/1.1, a connection per call in flight, which
// kube-proxy spreads over the replicas (k8s.io/apiserver
// pkg/util/webhook, issue 75791). A name of /etc/hosts other than
// localhost that means a loopback address gets HTTP/1.1 with no traffic
// leaving the machine; without one, 127.0.0.1 (and HTTP/2).
func webhookHost(t *testing.T) string {
	t.Helper()
	f, err := os.Open("/etc/hosts")
	if err != nil {
		t.Logf("no /etc/hosts (%v): the webhook URL is https://127.0.0.1, which the API server calls over HTTP/2", err)
		return "127.0.0.1"
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(strings.SplitN(sc.Text(), "#", 2)[0])
		if len(fields) < 2 || !slices.Equal(net.ParseIP(fields[0]).To4(), net.IPv4(127, 0, 0, 1).To4()) {
			continue
		}
		for _, name := range fields[1:] {
			if !strings.EqualFold(name, "localhost") && !strings.HasPrefix(strings.ToLower(name), "localhost.") {
				return name
			}
		}
	}
	t.Log("no name for 127.0.0.1 in /etc/hosts but localhost: the webhook URL is https://127.0.0.1, which the API server calls over HTTP/2")
	return "127.0.0.1"
}

// writeCertificates writes the CA and serving certificate Secrets the
// webhook reads, as cert-manager would (the replicas run with
// --renew-certificates=false): the serving certificate names the URL's
// host, which the webhook's own renewer would not put in it.
func (b *apiBench) writeCertificates() {
	t := b.t
	now := time.Now()
	ca, err := certs.NewCA("verdict-bench-ca", now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := certs.NewServing(ca, []string{b.host}, []net.IP{net.IPv4(127, 0, 0, 1)}, now, 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "verdict-webhook-ca"}, Data: map[string][]byte{
			certs.KeyCert: ca.CertPEM, certs.KeyKey: ca.KeyPEM, certs.KeyBundle: ca.CertPEM,
		}},
		{ObjectMeta: metav1.ObjectMeta{Name: "verdict-webhook-tls"}, Type: corev1.SecretTypeTLS, Data: map[string][]byte{
			certs.KeyCert: kp.CertPEM, certs.KeyKey: kp.KeyPEM, certs.KeyCA: ca.CertPEM,
		}},
	} {
		if _, err := b.kube.CoreV1().Secrets(benchVerdict).Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// arrange brings the cluster to the scenario: the replicas running and
// behind the balancer, the policy set in place and enforced, or (the
// baseline) no replica and no webhook configuration.
func (b *apiBench) arrange(sc apiBenchScenario, index int) {
	t := b.t
	t.Helper()
	if sc.set == "" {
		if index > 0 {
			b.removeWebhook()
		}
		return
	}
	for len(b.replicas) < sc.replicas {
		b.startReplica()
	}
	for len(b.replicas) > sc.replicas {
		r := b.replicas[len(b.replicas)-1]
		b.replicas = b.replicas[:len(b.replicas)-1]
		b.setBackends() // endpoints drop it first, then it stops
		if err := r.proc.Stop(40 * time.Second); err != nil {
			t.Fatalf("stop %s: %v", r.name, err)
		}
	}
	b.setBackends()
	if b.set != sc.set {
		b.swapPolicies(sc.set)
	}
	b.waitEnforced(sc.set)
	b.logWebhooks()
}

// logWebhooks says which webhooks the registrar put in place: each one a
// Pod CREATE reaches is a call from the API server.
func (b *apiBench) logWebhooks() {
	t := b.t
	ctx := t.Context()
	var names []string
	v, err := b.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range v.Items {
		for _, w := range c.Webhooks {
			names = append(names, "validating "+w.Name)
		}
	}
	m, err := b.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range m.Items {
		for _, w := range c.Webhooks {
			names = append(names, "mutating "+w.Name)
		}
	}
	t.Logf("webhooks registered for %s: %s", b.set, strings.Join(names, ", "))
}

// startReplica starts one more webhook replica and waits until it is
// ready; the first one leads (registrar, policy status).
func (b *apiBench) startReplica() {
	t := b.t
	r := &benchReplica{name: fmt.Sprintf("webhook-%d", len(b.replicas)), addr: testkit.FreeAddr(t), probe: testkit.FreeAddr(t)}
	// The chart's arguments (deploy/helm/verdict/templates/webhook),
	// with the addresses of loopback, the webhook URL instead of the
	// Service, the certificates from the Secrets above, and the API
	// server's client CA (mutual TLS, as docs/install.md recommends: the
	// results of every admission are published).
	args := []string{
		"--mode=cluster", "--namespace=" + benchVerdict, "--identity=" + r.name,
		"--kubeconfig=" + b.cp.KubeconfigPath(),
		"--webhook-url=https://" + net.JoinHostPort(b.host, strconv.Itoa(b.lb.Port())),
		"--renew-certificates=false",
		"--address=" + r.addr, "--probe-address=" + r.probe,
		"--client-ca-file=" + b.cp.WebhookClientCAFile(),
		"--result-buffer=10000", "--on-work-publish-failure=deny", "--request-timeout=10s", "--shutdown-budget=25s",
		"--nats-url=" + b.natsURL,
	}
	env := append(os.Environ(), "GOMEMLIMIT=1073741824") // the chart's, from the 1Gi limit
	r.proc = testproc.StartForTest(t, testproc.Spec{Name: r.name, Path: b.webhookBin, Args: args, Env: env, LogDir: t.TempDir()}, true)
	testkit.Eventually(t, 60*time.Second, r.name+" ready", func() error {
		if r.proc.Gone() {
			t.Fatalf("%s exited: %v\n%s", r.name, r.proc.State(), r.proc.Tail(30))
		}
		return probe("http://" + r.probe + "/readyz")
	})
	b.replicas = append(b.replicas, r)
}

func probe(url string) error {
	resp, err := http.Get(url) //nolint:gosec,noctx // a loopback probe in a test
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// setBackends puts the running replicas behind the balancer.
func (b *apiBench) setBackends() {
	backends := make([]balancer.Backend, 0, len(b.replicas))
	for _, r := range b.replicas {
		backends = append(backends, balancer.Backend{Addr: r.addr})
	}
	b.lb.Set(backends...)
}

// swapPolicies replaces the policy set in the cluster.
func (b *apiBench) swapPolicies(set string) {
	t := b.t
	ctx := t.Context()
	for _, kind := range []string{policy.KindClusterPolicy, policy.KindValidatingPolicy} {
		gvr := policycache.VerdictAPI.MustResource(kind)
		if err := b.dyn.Resource(gvr).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatalf("delete %s: %v", gvr.Resource, err)
		}
	}
	for _, obj := range benchPolicies(t, set) {
		gvr := policycache.VerdictAPI.MustResource(obj.GetKind())
		if _, err := b.dyn.Resource(gvr).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
	b.set = set
}

// benchPolicies reads a set's policies, in Verdict's group.
func benchPolicies(t *testing.T, set string) []*unstructured.Unstructured {
	t.Helper()
	var files []string
	switch set {
	case setVpol:
		files = []string{vpolFile}
	case setCpol:
		var err error
		if files, err = filepath.Glob(filepath.Join(cpolDir, "*.yaml")); err != nil || len(files) == 0 {
			t.Fatalf("no policies in %s (../shared/bench): %v", cpolDir, err)
		}
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		docs, err := document.DecodeAll(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, d := range docs {
			u := &unstructured.Unstructured{Object: d.Object}
			u.SetAPIVersion(schema.GroupVersion{Group: policy.GroupVerdict, Version: "v1"}.String())
			out = append(out, u)
		}
	}
	return out
}

// privileged is a Pod every set denies (privileged containers), which
// tells whether a set is enforced.
func (b *apiBench) privilegedPod() *corev1.Pod {
	b.probes++
	p := pod(fmt.Sprintf("probe-%d", b.probes), true)
	p.Namespace = benchLoadNS
	return p
}

// waitEnforced waits until a privileged Pod is denied by a policy of the
// set and by none of another set, then lets every replica's policy cache
// settle a moment longer (a denial came from one replica).
func (b *apiBench) waitEnforced(set string) {
	t := b.t
	// The names of the sets' policies: vpol-pss-*, podsecurity-subrule-*.
	mine, other := "vpol-pss-", "podsecurity-subrule-"
	if set == setCpol {
		mine, other = other, mine
	}
	testkit.Eventually(t, 60*time.Second, set+" enforced", func() error {
		_, err := b.kube.CoreV1().Pods(benchLoadNS).Create(t.Context(), b.privilegedPod(), metav1.CreateOptions{})
		switch {
		case err == nil:
			return errors.New("a privileged Pod was admitted")
		case !strings.Contains(err.Error(), mine) || strings.Contains(err.Error(), other):
			return fmt.Errorf("not denied by %s alone: %w", set, err)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
}

// removeWebhook stops every replica and deletes the webhook
// configurations: the API server calls no webhook.
func (b *apiBench) removeWebhook() {
	t := b.t
	ctx := t.Context()
	b.lb.Set()
	for _, r := range b.replicas {
		if err := r.proc.Stop(40 * time.Second); err != nil {
			t.Fatalf("stop %s: %v", r.name, err)
		}
	}
	b.replicas = nil
	if err := b.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := b.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "no webhook called", func() error {
		p, err := b.kube.CoreV1().Pods(benchLoadNS).Create(ctx, b.privilegedPod(), metav1.CreateOptions{})
		if err != nil {
			return err
		}
		return b.kube.CoreV1().Pods(benchLoadNS).Delete(ctx, p.Name, metav1.DeleteOptions{})
	})
}

// deletePods deletes the run's Pods (never scheduled, they go at once),
// so that every run starts from the same API server: the Pods would
// otherwise pile up in its watch cache, and its garbage collector's work
// per request grows with them (in a trial, kube-apiserver's CPU per
// iteration grew by a third over 10,000 Pods).
func (b *apiBench) deletePods() {
	t := b.t
	ctx := t.Context()
	if err := b.kube.CoreV1().Pods(benchLoadNS).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 2*time.Minute, "the run's Pods deleted", func() error {
		l, err := b.kube.CoreV1().Pods(benchLoadNS).List(ctx, metav1.ListOptions{Limit: 1})
		if err != nil {
			return err
		}
		if len(l.Items) > 0 {
			return fmt.Errorf("%s and more left", l.Items[0].Name)
		}
		return nil
	})
}

// benchProc is a process whose CPU time and memory a run reports.
type benchProc struct {
	name string
	pid  int
}

func (b *apiBench) procs() []benchProc {
	pids := b.cp.PIDs()
	out := []benchProc{
		{"kube-apiserver", pids["kube-apiserver"]},
		{"etcd", pids["etcd"]},
		{"nats-server", b.nats.Pid()},
	}
	for _, r := range b.replicas {
		out = append(out, benchProc{r.name, r.proc.Pid()})
	}
	return append(out, benchProc{"loader", os.Getpid()})
}

// procUse is one process's share of a run.
type procUse struct {
	name    string
	cpu     time.Duration
	peakRSS int64
}

// apiBenchRow is one run.
type apiBenchRow struct {
	scenario           string
	set                string
	replicas, clients  int
	iterations, errors int
	firstErr           error
	rate               float64
	iter, create       latency.Summary
	procs              []procUse
	conns              map[string]int // connections the balancer opened, by replica
	others             time.Duration  // CPU time of every other process of the machine
}

func (r apiBenchRow) line() string {
	return fmt.Sprintf("%s, %d clients, %d iterations: %.0f/s, avg %s, p95 %s, p99 %s, max %s (CREATE p99 %s), %d errors",
		r.scenario, r.clients, r.iterations, r.rate, latency.Ms(r.iter.Avg), latency.Ms(r.iter.P95),
		latency.Ms(r.iter.P99), latency.Ms(r.iter.Max), latency.Ms(r.create.P99), r.errors)
}

// warmUp creates Pods unmeasured: the first time enough for the API
// server's and etcd's first allocations, then a few for each scenario
// (the API server's connections to the webhook replicas).
func (b *apiBench) warmUp(first bool) {
	n := 100
	if first {
		n = 500
	}
	res, err := podload.Run(b.t.Context(), podload.Config{
		REST: b.load, Namespace: benchLoadNS, Clients: b.plan.clients[0], Iterations: n, Mode: b.plan.mode,
	})
	if err != nil {
		b.t.Fatal(err)
	}
	if res.Errors > 0 {
		b.t.Fatalf("warm-up: %d of %d iterations failed; first: %v", res.Errors, n, res.FirstErr)
	}
}

// measure runs one level and reads every process's CPU time before and
// after it and its resident memory every 100 ms during it.
func (b *apiBench) measure(sc apiBenchScenario, clients, iterations int) apiBenchRow {
	t := b.t
	procs := b.procs()
	before := make([]procstat.Stat, len(procs))
	peak := make([]int64, len(procs))
	for i, p := range procs {
		st, err := procstat.Read(p.pid)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		before[i], peak[i] = st, st.RSS
	}
	busyBefore := machineBusy(t)
	connsBefore := b.lb.Opened()
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			for i, p := range procs {
				if st, err := procstat.Read(p.pid); err == nil {
					peak[i] = max(peak[i], st.RSS)
				}
			}
		}
	}()
	if b.plan.profile != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.profileAPIServer(fmt.Sprintf("%s-%d.pprof", sc, clients))
		}()
	}
	res, err := podload.Run(t.Context(), podload.Config{
		REST: b.load, Namespace: benchLoadNS, Clients: clients, Iterations: iterations, Mode: b.plan.mode,
	})
	if err != nil {
		t.Fatal(err)
	}
	// What the processes still do for the run (results published,
	// acknowledged, written to disk) ends within a moment.
	time.Sleep(500 * time.Millisecond)
	close(done)
	wg.Wait()
	row := apiBenchRow{
		scenario: sc.String(), set: sc.set, replicas: sc.replicas, clients: clients, iterations: iterations,
		errors: res.Errors, firstErr: res.FirstErr, rate: res.Rate(),
		iter: latency.Summarize(res.Iterations), create: latency.Summarize(res.Creates),
		conns: map[string]int{},
	}
	for i, p := range procs {
		st, err := procstat.Read(p.pid)
		if err != nil {
			t.Fatalf("%s: %v", p.name, err)
		}
		row.procs = append(row.procs, procUse{name: p.name, cpu: st.CPU - before[i].CPU, peakRSS: max(peak[i], st.RSS)})
	}
	for _, r := range b.replicas {
		row.conns[r.name] = b.lb.Opened()[r.addr] - connsBefore[r.addr]
	}
	// Whatever else ran on the machine meanwhile: its busy time less the
	// processes above (another job's load shows here).
	row.others = machineBusy(t) - busyBefore
	for _, p := range row.procs {
		row.others -= p.cpu
	}
	return row
}

// profileAPIServer writes a 5 s CPU profile of kube-apiserver, taken
// after a second of the run, into the profile folder.
func (b *apiBench) profileAPIServer(name string) {
	t := b.t
	time.Sleep(time.Second)
	kube := kubernetes.NewForConfigOrDie(b.cp.RESTConfig())
	data, err := kube.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "5").DoRaw(t.Context())
	if err != nil {
		t.Errorf("profile of kube-apiserver: %v", err)
		return
	}
	if err := os.MkdirAll(b.plan.profile, 0o755); err != nil {
		t.Error(err)
		return
	}
	if err := os.WriteFile(filepath.Join(b.plan.profile, name), data, 0o644); err != nil {
		t.Error(err)
	}
}

// machineBusy is the CPU time all the machine's cores spent busy since
// boot (/proc/stat: all but idle and iowait).
func machineBusy(t *testing.T) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	fields := strings.Fields(line)
	if len(fields) < 6 || fields[0] != "cpu" {
		t.Fatalf("/proc/stat: %q", line)
	}
	var ticks int64
	for i, f := range fields[1:] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			t.Fatalf("/proc/stat: %v", err)
		}
		// user nice system idle iowait irq softirq steal (guest time is
		// already in user).
		if i != 3 && i != 4 && i < 8 {
			ticks += n
		}
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

// apiBenchTables writes the runs as Markdown: latencies with the p99's
// change over the baseline (the mean of its runs at the same
// concurrency), then each process's CPU seconds and peak memory.
func apiBenchTables(plan apiBenchPlan, b *apiBench, rows []apiBenchRow) string {
	base := map[int][]time.Duration{}
	for _, r := range rows {
		if r.set == "" {
			base[r.clients] = append(base[r.clients], r.iter.P99)
		}
	}
	var s strings.Builder
	fmt.Fprintf(&s, "mode %s, loader %s, webhook URL host %s\n\n", plan.mode, plan.user, b.host)
	s.WriteString("| scenario | clients | iterations | errors | iterations/s | avg | p95 | p99 | max | p99 over baseline | CREATE avg | CREATE p99 |\n")
	s.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, r := range rows {
		delta := ""
		if bs := base[r.clients]; r.set != "" && len(bs) > 0 {
			var sum time.Duration
			for _, v := range bs {
				sum += v
			}
			mean := sum / time.Duration(len(bs))
			delta = fmt.Sprintf("%+.0f%%", (float64(r.iter.P99)/float64(mean)-1)*100)
		}
		fmt.Fprintf(&s, "| %s | %d | %d | %d | %.0f | %s | %s | %s | %s | %s | %s | %s |\n",
			r.scenario, r.clients, r.iterations, r.errors, r.rate, msCell(r.iter.Avg), msCell(r.iter.P95),
			msCell(r.iter.P99), msCell(r.iter.Max), delta, msCell(r.create.Avg), msCell(r.create.P99))
	}
	names := []string{}
	seen := map[string]bool{}
	for _, r := range rows {
		for _, p := range r.procs {
			if !seen[p.name] {
				seen[p.name] = true
				names = append(names, p.name)
			}
		}
	}
	sort.SliceStable(names, func(i, j int) bool { return procOrder(names[i]) < procOrder(names[j]) })
	s.WriteString("\nCPU seconds / peak resident MiB of each process during the run (webhook connections opened by the balancer in brackets; anything else: the CPU seconds of every other process on the machine):\n\n")
	s.WriteString("| scenario | clients | " + strings.Join(names, " | ") + " | anything else |\n")
	s.WriteString("|---|---:|" + strings.Repeat("---:|", len(names)+1) + "\n")
	for _, r := range rows {
		cells := make([]string, len(names))
		for i, n := range names {
			for _, p := range r.procs {
				if p.name == n {
					cells[i] = fmt.Sprintf("%.1f / %d", p.cpu.Seconds(), p.peakRSS>>20)
					if c, ok := r.conns[n]; ok {
						cells[i] += fmt.Sprintf(" (%d)", c)
					}
				}
			}
			if cells[i] == "" {
				cells[i] = "–"
			}
		}
		fmt.Fprintf(&s, "| %s | %d | %s | %.1f |\n", r.scenario, r.clients, strings.Join(cells, " | "), r.others.Seconds())
	}
	return s.String()
}

func procOrder(name string) int {
	return slices.Index([]string{"kube-apiserver", "etcd", "nats-server", "webhook-0", "webhook-1", "webhook-2", "loader"}, name)
}

func msCell(d time.Duration) string {
	return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64)
}
