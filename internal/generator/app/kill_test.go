package app_test

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/generator"
	generatorapp "github.com/verdict-dev/verdict/internal/generator/app"
	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/internal/testkit/testproc"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// The environment of a generator child: TestMain runs generatorChild
// instead of the tests when envChild is set.
const (
	envChild           = "VERDICT_GENERATOR_CHILD"
	envChildKubeconfig = "VERDICT_GENERATOR_CHILD_KUBECONFIG"
	envChildNATS       = "VERDICT_GENERATOR_CHILD_NATS"
)

// Shape of the kill test.
const (
	killReplicas   = 3
	killNamespaces = 500
	// killAckWait is the generator consumer's AckWait: how long the items
	// a killed replica held wait to be delivered again.
	killAckWait = 5 * time.Second
)

// TestMain runs a replica of the service instead of the tests when
// envChild is set (TestE2EKillGenerator re-executes this binary).
func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(generatorChild())
	}
	os.Exit(m.Run())
}

// generatorChild is the service as cmd/generator runs it (Config,
// Run, klog routed), in a re-executed test binary: the kubeconfig and the
// NATS URL come from the environment, logs go to stderr. It runs until it
// is killed or its parent (the test) is gone.
func generatorChild() int {
	cfg := generatorapp.DefaultConfig()
	cfg.Kube.Kubeconfig = os.Getenv(envChildKubeconfig)
	cfg.NATS.URLs = []string{os.Getenv(envChildNATS)}
	cfg.ProbeAddress = ""
	cfg.Kube.QPS, cfg.Kube.Burst = 1000, 2000
	cfg.Worker.AckWait = killAckWait
	cfg.Worker.RetryMin, cfg.Worker.RetryMax = 100*time.Millisecond, 2*time.Second
	log, err := cfg.Log.Logger(os.Stderr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	kubeutil.RouteKlog(log)
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	parent := os.Getppid()
	go func() {
		for range time.Tick(200 * time.Millisecond) {
			if os.Getppid() != parent {
				fmt.Fprintln(os.Stderr, "generator child: parent gone")
				os.Exit(3)
			}
		}
	}()
	if err := generatorapp.Run(ctx, cfg, log); err != nil {
		fmt.Fprintf(os.Stderr, "generator child: %v\n", err)
		return 1
	}
	return 0
}

// startReplica re-executes the test binary as a generator replica,
// ready once its runner consumes, killed when the test ends.
func startReplica(t *testing.T, i int, kubeconfig, natsURL string) *testproc.Proc {
	t.Helper()
	return testproc.StartForTest(t, testproc.Spec{
		Name: fmt.Sprintf("replica-%d", i), Path: os.Args[0], Args: []string{"-test.run=^$"},
		Env:    append(os.Environ(), envChild+"=1", envChildKubeconfig+"="+kubeconfig, envChildNATS+"="+natsURL),
		LogDir: t.TempDir(), Ready: `"runnerStarted"`,
	}, false)
}

// loadDefaults gives each Namespace named load-* a ConfigMap and a
// NetworkPolicy.
const loadDefaults = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: load-defaults}
spec:
  rules:
  - name: settings
    match: {any: [{resources: {kinds: [Namespace], names: ["load-*"]}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: settings
      namespace: "{{request.object.metadata.name}}"
      data:
        data: {owner: "{{request.object.metadata.name}}"}
  - name: deny-all
    match: {any: [{resources: {kinds: [Namespace], names: ["load-*"]}}]}
    generate:
      apiVersion: networking.k8s.io/v1
      kind: NetworkPolicy
      name: default-deny
      namespace: "{{request.object.metadata.name}}"
      data:
        spec: {podSelector: {}, policyTypes: [Ingress]}
`

// TestE2EKillGenerator: three generator replicas as separate processes,
// 500 Namespaces created at once, one replica killed with SIGKILL while
// their items are worked: every Namespace ends with exactly one
// ConfigMap and one NetworkPolicy, labelled with its own uid, and nothing
// is dead-lettered.
func TestE2EKillGenerator(t *testing.T) {
	cp := controlplane.StartForTest(t)
	ctx := t.Context()
	kc := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "verdict"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, loadDefaults), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nats := natstest.Server(t)
	startWebhook(t, cp, nats.ClientURL())
	replicas := make([]*testproc.Proc, killReplicas)
	for i := range replicas {
		replicas[i] = startReplica(t, i, cp.KubeconfigPath(), nats.ClientURL())
	}
	for i, r := range replicas {
		select {
		case <-r.Ready():
		case <-time.After(60 * time.Second):
			t.Fatalf("replica %d not consuming within 60s", i)
		}
	}
	warm, _ := firstGenerated(t, kc, "load-warm", "settings")

	// 500 Namespaces, 16 at a time; replica 0 is killed once a fifth of
	// the ConfigMaps exist.
	names := make([]string, 0, killNamespaces+1)
	names = append(names, warm.Name)
	var created atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, killNamespaces)
	next := make(chan int)
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := fmt.Sprintf("load-%03d", i)
				if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
					errs <- err
					continue
				}
				created.Add(1)
			}
		}()
	}
	for i := range killNamespaces {
		names = append(names, fmt.Sprintf("load-%03d", i))
	}
	go func() {
		for i := range killNamespaces {
			next <- i
		}
		close(next)
	}()
	generated := func(kind string) (map[string]int, error) {
		out := map[string]int{}
		sel := generator.LabelPolicyName + "=load-defaults"
		var n int
		switch kind {
		case "ConfigMap":
			l, err := kc.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return nil, err
			}
			for _, o := range l.Items {
				out[o.Namespace]++
				n++
			}
		case "NetworkPolicy":
			l, err := kc.NetworkingV1().NetworkPolicies("").List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return nil, err
			}
			for _, o := range l.Items {
				out[o.Namespace]++
				n++
			}
		}
		return out, nil
	}
	var atKill int
	testkit.Eventually(t, 60*time.Second, "a fifth of the ConfigMaps", func() error {
		got, err := generated("ConfigMap")
		if err != nil {
			return err
		}
		if atKill = len(got); atKill < killNamespaces/5 {
			return fmt.Errorf("%d ConfigMaps", atKill)
		}
		return nil
	})
	sigkilled, err := replicas[0].Kill()
	if err != nil || !sigkilled {
		t.Fatalf("kill replica 0: SIGKILL %v, %v", sigkilled, err)
	}
	if atKill >= len(names) {
		t.Fatalf("the kill came after all the work (%d of %d)", atKill, len(names))
	}
	t.Logf("replica 0 killed with %d of %d Namespaces generated for", atKill, len(names))
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("create a Namespace: %v", err)
	}

	testkit.Eventually(t, 120*time.Second, "every Namespace's ConfigMap and NetworkPolicy", func() error {
		for _, kind := range []string{"ConfigMap", "NetworkPolicy"} {
			got, err := generated(kind)
			if err != nil {
				return err
			}
			if len(got) != len(names) {
				return fmt.Errorf("%d Namespaces have a %s, want %d", len(got), kind, len(names))
			}
		}
		return nil
	})
	for _, kind := range []string{"ConfigMap", "NetworkPolicy"} {
		got, _ := generated(kind)
		for _, ns := range names {
			if got[ns] != 1 {
				t.Errorf("Namespace %s has %d generated %ss, want 1", ns, got[ns], kind)
			}
		}
	}
	// Each is its own Namespace's: labelled with that Namespace's uid.
	cms, err := kc.CoreV1().ConfigMaps("").List(ctx, metav1.ListOptions{LabelSelector: generator.LabelPolicyName + "=load-defaults"})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range cms.Items {
		ns, err := kc.CoreV1().Namespaces().Get(ctx, cm.Namespace, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if cm.Labels[generator.LabelTriggerUID] != string(ns.UID) || cm.Data["owner"] != ns.Name {
			t.Errorf("ConfigMap in %s: labels %v data %v", ns.Name, cm.Labels, cm.Data)
		}
	}
	// Nothing dead-lettered.
	conn, err := bus.Connect(ctx, queue.WithURL(nats.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	dead := 0
	if _, err := conn.Replay(ctx, bus.StreamDead, func(queue.ReplayMsg) error { dead++; return nil }); err != nil {
		t.Fatal(err)
	}
	if dead != 0 {
		t.Errorf("%d dead letters, want none", dead)
	}
}
