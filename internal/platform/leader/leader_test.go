package leader_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/platform/leader"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
)

// Short timings, so that a fail-over waiting for the lease (8 s) and one
// bounded by the release (a retry, 0.3 s) are far apart.
func config(identity string) leader.Config {
	return leader.Config{Namespace: "verdict", Name: "test", Identity: identity, LeaseDuration: 8 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: 300 * time.Millisecond}
}

// candidate runs leader.Run for one identity and records its terms.
type candidate struct {
	cancel  context.CancelFunc
	done    chan struct{}
	leading atomic.Bool
}

// tracker counts the candidates leading at once.
type tracker struct {
	mu      sync.Mutex
	now     int
	overlap bool
	// started receives each candidate as it starts a term.
	started chan *candidate
}

func newTracker() *tracker { return &tracker{started: make(chan *candidate, 16)} }

func (tr *tracker) enter() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.now++
	if tr.now > 1 {
		tr.overlap = true
	}
}

func (tr *tracker) leave() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.now--
}

// run starts a candidate whose work, once its term ends, goes on for
// linger before it returns (writes still in flight).
func run(t *testing.T, client kubernetes.Interface, identity string, tr *tracker, linger time.Duration) *candidate {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	c := &candidate{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(c.done)
		err := leader.Run(ctx, client, config(identity), func(lctx context.Context) {
			tr.enter()
			c.leading.Store(true)
			tr.started <- c
			<-lctx.Done()
			time.Sleep(linger)
			c.leading.Store(false)
			tr.leave()
		})
		if err != nil {
			t.Errorf("%s: %v", identity, err)
		}
	}()
	t.Cleanup(func() { cancel(); <-c.done })
	return c
}

func setup(t *testing.T) kubernetes.Interface {
	t.Helper()
	cp := controlplane.StartForTest(t)
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	if _, err := client.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "verdict"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return client
}

// next returns the next candidate to start leading.
func (tr *tracker) next(t *testing.T) *candidate {
	t.Helper()
	select {
	case c := <-tr.started:
		return c
	case <-time.After(20 * time.Second):
		t.Fatal("no candidate starts leading")
		return nil
	}
}

// TestOneLeaderAndAHandOverBoundedByTheRelease: of two candidates one
// leads; when its context ends, its Run returns only once its work has
// returned (which lingers 500 ms) and the Lease is released, the other
// candidate starts leading only after that work returned (no overlap),
// and it takes over within a few retries, far sooner than the 8 s lease.
func TestOneLeaderAndAHandOverBoundedByTheRelease(t *testing.T) {
	client := setup(t)
	tr := newTracker()
	a := run(t, client, "a", tr, 500*time.Millisecond)
	b := run(t, client, "b", tr, 500*time.Millisecond)
	first := tr.next(t)
	second := b
	if first == b {
		second = a
	}
	// A second later, still one leader.
	time.Sleep(time.Second)
	if second.leading.Load() {
		t.Fatal("both candidates lead")
	}

	stop := time.Now()
	first.cancel()
	select {
	case <-first.done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
	returned := time.Since(stop)
	if first.leading.Load() {
		t.Error("Run returned while its work was still running")
	}
	if returned < 500*time.Millisecond {
		t.Errorf("Run returned %s after its context ended, before its work (500 ms)", returned)
	}
	lease, err := client.CoordinationV1().Leases("verdict").Get(t.Context(), "test", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" && *h != "a" && *h != "b" {
		t.Errorf("holder %q", *h)
	}
	if c := tr.next(t); c != second {
		t.Fatal("the candidate that left leads again")
	}
	if took := time.Since(stop); took > 4*time.Second {
		t.Errorf("fail-over took %s: the lease (8 s) was waited for, not its release", took)
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.overlap {
		t.Error("two candidates led at once during the hand-over")
	}
}

// TestRunReturnsWhenNeverLeading: a candidate that never takes the
// Lease returns when its context ends, without waiting for a work it
// never started.
func TestRunReturnsWhenNeverLeading(t *testing.T) {
	client := setup(t)
	tr := newTracker()
	a := run(t, client, "a", tr, 0)
	tr.next(t)
	b := run(t, client, "b", tr, 0)
	time.Sleep(time.Second)
	b.cancel()
	select {
	case <-b.done:
	case <-time.After(5 * time.Second):
		t.Fatal("a candidate that never led did not return")
	}
	if !a.leading.Load() {
		t.Error("the leader stopped leading when the other candidate left")
	}
}

func TestValidate(t *testing.T) {
	tests := map[string]leader.Config{
		"no identity":                 {Namespace: "v", Name: "l"},
		"renew deadline past lease":   {Namespace: "v", Name: "l", Identity: "a", LeaseDuration: time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: time.Millisecond},
		"retry past the renew window": {Namespace: "v", Name: "l", Identity: "a", LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 2 * time.Second},
	}
	for name, cfg := range tests {
		t.Run(name, func(t *testing.T) {
			if err := cfg.WithDefaults().Validate(); !errors.Is(err, leader.ErrInvalidConfig) {
				t.Fatalf("%v, want ErrInvalidConfig", err)
			}
		})
	}
	if err := (leader.Config{Namespace: "v", Name: "l", Identity: "a"}).WithDefaults().Validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
}
