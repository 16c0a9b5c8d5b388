package app_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/verdict-dev/verdict/internal/cleaner"
	cleanerapp "github.com/verdict-dev/verdict/internal/cleaner/app"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// benchCleanup deletes every ConfigMap labelled bench=doomed, once a
// second.
const benchCleanup = `apiVersion: verdict.dev/v1
kind: ClusterCleanupPolicy
metadata: {name: bench-cleanup}
spec:
  schedule: "@every 1s"
  match:
    any:
    - resources:
        kinds: [ConfigMap]
        selector: {matchLabels: {bench: doomed}}
`

// BenchmarkCleanup measures the cleaner's deletions per second: N
// ConfigMaps a cleanup policy selects, deleted by one cleaner (in
// process) from its first deletion to its last, against the same number
// deleted with plain client-go (16 workers) in the same run. Everything
// shares the machine. Knob: VERDICT_CLEANUP_ITEMS (default 1000).
//
//	go test ./internal/cleaner/app -run '^$' -bench Cleanup -benchtime 1x
func BenchmarkCleanup(b *testing.B) {
	n := 1000
	if s := os.Getenv("VERDICT_CLEANUP_ITEMS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			b.Fatalf("VERDICT_CLEANUP_ITEMS=%q", s)
		}
		n = v
	}
	cp := controlplane.StartForTest(b)
	ctx := b.Context()
	rc := cp.RESTConfig()
	rc.QPS, rc.Burst = 5000, 10000
	rc.WarningHandler = rest.NoWarnings{}
	kube := kubernetes.NewForConfigOrDie(rc)
	dyn := dynamic.NewForConfigOrDie(rc)
	for _, ns := range []string{"verdict", "bench"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
	nats := natstest.Server(b)

	// Deletions seen by an informer, by name.
	var mu sync.Mutex
	deleted := map[string]time.Time{}
	inf := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace("bench"))
	cmInf := inf.Core().V1().ConfigMaps().Informer()
	if _, err := cmInf.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			mu.Lock()
			deleted[cm.Name] = time.Now()
			mu.Unlock()
		}
	}}); err != nil {
		b.Fatal(err)
	}
	inf.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), cmInf.HasSynced)

	create := func(prefix string, labels map[string]string) []string {
		names := make([]string, n)
		next := make(chan int)
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					names[i] = fmt.Sprintf("%s-%05d", prefix, i)
					cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names[i], Labels: labels}}
					if _, err := kube.CoreV1().ConfigMaps("bench").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		for i := range n {
			next <- i
		}
		close(next)
		wg.Wait()
		return names
	}
	span := func(names []string, d time.Duration) (first, last time.Time) {
		deadline := time.Now().Add(d)
		for {
			mu.Lock()
			missing := 0
			first, last = time.Time{}, time.Time{}
			for _, name := range names {
				at, ok := deleted[name]
				switch {
				case !ok:
					missing++
				case first.IsZero() || at.Before(first):
					first = at
				}
				if ok && at.After(last) {
					last = at
				}
			}
			mu.Unlock()
			if missing == 0 {
				return first, last
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d of %d ConfigMaps not deleted within %s", missing, len(names), d)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	b.ResetTimer()
	for range b.N {
		// Plain client-go deletes.
		plain := create(fmt.Sprintf("plain-%d", time.Now().UnixNano()%1e6), map[string]string{"bench": "plain"})
		start := time.Now()
		next := make(chan string)
		var wg sync.WaitGroup
		for range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for name := range next {
					if err := kube.CoreV1().ConfigMaps("bench").Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
						b.Error(err)
					}
				}
			}()
		}
		for _, name := range plain {
			next <- name
		}
		close(next)
		wg.Wait()
		base := float64(n) / time.Since(start).Seconds()
		b.ReportMetric(base, "clientgo-deletes/s")

		// The cleaner: the policy created once the ConfigMaps exist.
		doomed := create(fmt.Sprintf("doomed-%d", time.Now().UnixNano()%1e6), map[string]string{"bench": "doomed"})
		cctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() {
			cfg := cleanerapp.DefaultConfig()
			cfg.Kube.Kubeconfig = cp.KubeconfigPath()
			cfg.Kube.QPS, cfg.Kube.Burst = 5000, 10000
			cfg.NATS.URLs = []string{nats.ClientURL()}
			cfg.ProbeAddress = ""
			done <- cleanerapp.Run(cctx, cfg, zerolog.Nop())
		}()
		v, err := document.Decode([]byte(benchCleanup))
		if err != nil {
			b.Fatal(err)
		}
		pol := &unstructured.Unstructured{Object: v.(map[string]any)}
		if _, err := dyn.Resource(cleaner.ClusterCleanupPolicies).Create(ctx, pol, metav1.CreateOptions{}); err != nil {
			b.Fatal(err)
		}
		first, last := span(doomed, 10*time.Minute)
		rate := float64(n) / last.Sub(first).Seconds()
		b.ReportMetric(rate, "cleaner-deletes/s")
		b.ReportMetric(rate/base, "cleaner-fraction")
		if err := dyn.Resource(cleaner.ClusterCleanupPolicies).Delete(ctx, "bench-cleanup", metav1.DeleteOptions{}); err != nil {
			b.Fatal(err)
		}
		stop()
		if err := <-done; err != nil && cctx.Err() == nil {
			b.Fatal(err)
		}
	}
}
