package app_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/verdict-dev/verdict/internal/generator"
	generatorapp "github.com/verdict-dev/verdict/internal/generator/app"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
)

// benchDefaults generates a ConfigMap into every Namespace named gen-*.
const benchDefaults = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: bench-defaults}
spec:
  rules:
  - name: settings
    match: {any: [{resources: {kinds: [Namespace], names: ["gen-*"]}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: settings
      namespace: "{{request.object.metadata.name}}"
      data:
        data: {owner: "{{request.object.metadata.name}}"}
`

// benchInt reads a positive integer knob of a benchmark.
func benchInt(b *testing.B, name string, def int) int {
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

// seen records when the informer first saw each generated ConfigMap, by
// namespace.
type seen struct {
	mu sync.Mutex
	at map[string]time.Time
}

func (s *seen) add(obj any) {
	if cm, ok := obj.(*corev1.ConfigMap); ok {
		s.mu.Lock()
		if _, ok := s.at[cm.Namespace]; !ok {
			s.at[cm.Namespace] = time.Now()
		}
		s.mu.Unlock()
	}
}

// wait waits until every namespace of names has its ConfigMap and
// returns when the last one was seen.
func (s *seen) wait(b *testing.B, names []string, d time.Duration) time.Time {
	b.Helper()
	deadline := time.Now().Add(d)
	for {
		s.mu.Lock()
		var last time.Time
		missing := 0
		for _, n := range names {
			at, ok := s.at[n]
			if !ok {
				missing++
			} else if at.After(last) {
				last = at
			}
		}
		s.mu.Unlock()
		if missing == 0 {
			return last
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d generated ConfigMaps not seen within %s", missing, len(names), d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// pairMode says what createAll writes besides each Namespace.
type pairMode int

const (
	namespaceOnly pairMode = iota
	// createPair: a ConfigMap created in it, as a user would by hand.
	createPair
	// applyPair: the ConfigMap written with server-side apply, as the
	// generator writes it.
	applyPair
)

// createAll creates the Namespaces (and, as configMaps says, a ConfigMap
// in each) with conc workers, and returns when each Namespace's create
// was sent.
func createAll(b *testing.B, kube kubernetes.Interface, names []string, conc int, configMaps pairMode) map[string]time.Time {
	b.Helper()
	ctx := b.Context()
	var mu sync.Mutex
	sent := make(map[string]time.Time, len(names))
	next := make(chan string)
	var wg sync.WaitGroup
	errs := make(chan error, conc)
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := range next {
				at := time.Now()
				if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
					errs <- err
					return
				}
				switch configMaps {
				case createPair:
					cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"owner": n}}
					if _, err := kube.CoreV1().ConfigMaps(n).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
						errs <- err
						return
					}
				case applyPair:
					cm := corev1apply.ConfigMap("settings", n).WithData(map[string]string{"owner": n})
					if _, err := kube.CoreV1().ConfigMaps(n).Apply(ctx, cm, metav1.ApplyOptions{FieldManager: generator.FieldManager, Force: true}); err != nil {
						errs <- err
						return
					}
				case namespaceOnly:
				}
				mu.Lock()
				sent[n] = at
				mu.Unlock()
			}
		}()
	}
	for _, n := range names {
		next <- n
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return sent
}

// lags are the delays from each Namespace's create to its ConfigMap seen.
func (s *seen) lags(sent map[string]time.Time) []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]time.Duration, 0, len(sent))
	for n, at := range sent {
		out = append(out, s.at[n].Sub(at))
	}
	slices.Sort(out)
	return out
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	return d[min(len(d)-1, int(q*float64(len(d))))]
}

// BenchmarkGenerate measures generate work end to end: Namespaces created
// through the API server (the webhook admits each and queues its generate
// item, acknowledged before the answer) until the informer sees each
// Namespace's generated ConfigMap, with 1 and with 3 generator replicas
// (in process), against the same Namespaces and ConfigMaps created by hand
// with plain client-go in the same run (the API server's own rate, the
// physical limit). Then the lag at a fixed rate. Everything shares the
// machine.
//
// Reported, for each replica count: client-go pairs/s measured just
// before, items/s, their fraction, and the lag p50/p99 under that burst;
// at the fixed rate the lag p50/p99. Knobs: VERDICT_GEN_ITEMS (default 1000),
// VERDICT_GEN_CONCURRENCY (client workers, default 16), VERDICT_GEN_RATE
// (creates/s of the fixed-rate phase, default 20).
//
//	go test ./internal/generator/app -run '^$' -bench Generate -benchtime 1x
func BenchmarkGenerate(b *testing.B) {
	n := benchInt(b, "VERDICT_GEN_ITEMS", 1000)
	conc := benchInt(b, "VERDICT_GEN_CONCURRENCY", 16)
	rate := benchInt(b, "VERDICT_GEN_RATE", 20)
	cp := controlplane.StartForTest(b)
	ctx := b.Context()
	rc := cp.RESTConfig()
	rc.QPS, rc.Burst = 5000, 10000
	rc.WarningHandler = rest.NoWarnings{}
	kube := kubernetes.NewForConfigOrDie(rc)
	dyn := dynamic.NewForConfigOrDie(rc)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "verdict"}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	if _, err := dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(b, benchDefaults), metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	nats := natstest.Server(b)
	startWebhook(b, cp, nats.ClientURL())

	s := &seen{at: map[string]time.Time{}}
	inf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = generator.LabelPolicyName + "=bench-defaults"
	}))
	cmInf := inf.Core().V1().ConfigMaps().Informer()
	if _, err := cmInf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: s.add}); err != nil {
		b.Fatal(err)
	}
	inf.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), cmInf.HasSynced)

	// generators runs r replicas until stop is called.
	generators := func(r int) (stop func()) {
		gctx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for range r {
			cfg := generatorapp.DefaultConfig()
			cfg.Kube.Kubeconfig = cp.KubeconfigPath()
			cfg.Kube.QPS, cfg.Kube.Burst = 5000, 10000
			cfg.NATS.URLs = []string{nats.ClientURL()}
			cfg.ProbeAddress = ""
			cfg.Worker.RetryMin, cfg.Worker.RetryMax = 100*time.Millisecond, time.Second
			cfg.Worker.ShutdownTimeout = 5 * time.Second
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := generatorapp.Run(gctx, cfg, zerolog.Nop()); err != nil && gctx.Err() == nil {
					b.Errorf("generator: %v", err)
				}
			}()
		}
		return func() { cancel(); wg.Wait() }
	}
	names := func(prefix string, k int) []string {
		out := make([]string, k)
		for i := range out {
			out[i] = fmt.Sprintf("%s-%05d", prefix, i)
		}
		return out
	}

	// Warm up: the webhook registered, one generator consuming.
	stop := generators(1)
	deadline := time.Now().Add(60 * time.Second)
	for i := 0; ; i++ {
		warm := fmt.Sprintf("gen-warm-%d", i)
		createAll(b, kube, []string{warm}, 1, namespaceOnly)
		ok := false
		for w := time.Now().Add(3 * time.Second); time.Now().Before(w) && !ok; time.Sleep(50 * time.Millisecond) {
			s.mu.Lock()
			_, ok = s.at[warm]
			s.mu.Unlock()
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("the webhook did not register within 60s")
		}
	}
	stop()

	b.ResetTimer()
	for range b.N {
		for _, r := range []int{1, 3} {
			// The API server's own rate, just before: the same Namespaces
			// and ConfigMaps by hand (names the policy does not select).
			start := time.Now()
			createAll(b, kube, names(fmt.Sprintf("plain-r%d-%d", r, time.Now().UnixNano()%1e6), n), conc, createPair)
			base := float64(n) / time.Since(start).Seconds()
			b.ReportMetric(base, fmt.Sprintf("r%d-clientgo-pairs/s", r))
			if r == 1 {
				// The same with the ConfigMap written by server-side apply:
				// the generator's own write, by hand.
				start = time.Now()
				createAll(b, kube, names(fmt.Sprintf("apply-%d", time.Now().UnixNano()%1e6), n), conc, applyPair)
				b.ReportMetric(float64(n)/time.Since(start).Seconds(), "clientgo-apply-pairs/s")
			}

			stop := generators(r)
			batch := names(fmt.Sprintf("gen-r%d-%d", r, time.Now().UnixNano()%1e6), n)
			start = time.Now()
			sent := createAll(b, kube, batch, conc, namespaceOnly)
			last := s.wait(b, batch, 10*time.Minute)
			stop()
			itemsPerSec := float64(n) / last.Sub(start).Seconds()
			lags := s.lags(sent)
			b.ReportMetric(itemsPerSec, fmt.Sprintf("r%d-items/s", r))
			b.ReportMetric(itemsPerSec/base, fmt.Sprintf("r%d-fraction", r))
			b.ReportMetric(float64(quantile(lags, 0.5).Milliseconds()), fmt.Sprintf("r%d-burst-p50-ms", r))
			b.ReportMetric(float64(quantile(lags, 0.99).Milliseconds()), fmt.Sprintf("r%d-burst-p99-ms", r))
		}

		// The lag at a fixed rate, one replica: one create every 1/rate s
		// for 10 s.
		stop := generators(1)
		batch := names(fmt.Sprintf("gen-rate-%d", time.Now().UnixNano()%1e6), 10*rate)
		sent := map[string]time.Time{}
		var mu sync.Mutex
		var wg sync.WaitGroup
		tick := time.NewTicker(time.Second / time.Duration(rate))
		for _, name := range batch {
			<-tick.C
			wg.Add(1)
			go func() {
				defer wg.Done()
				at := createAll(b, kube, []string{name}, 1, namespaceOnly)
				mu.Lock()
				sent[name] = at[name]
				mu.Unlock()
			}()
		}
		tick.Stop()
		wg.Wait()
		s.wait(b, batch, 2*time.Minute)
		stop()
		lags := s.lags(sent)
		b.ReportMetric(float64(quantile(lags, 0.5).Milliseconds()), "rate-p50-ms")
		b.ReportMetric(float64(quantile(lags, 0.99).Milliseconds()), "rate-p99-ms")
	}
}
