package reporter

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/verdict-dev/verdict/internal/controlplane"
	"github.com/verdict-dev/verdict/internal/events"
	"github.com/verdict-dev/verdict/internal/verify"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// shared is one control plane for the end-to-end tests of this package;
// nil under -short.
var shared *controlplane.ControlPlane

func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" { // a replica of TestE2EKillReplicas
		os.Exit(reporterChild())
	}
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run())
	}
	ctx := context.Background()
	if _, err := controlplane.EnsureBinaries(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	// The garbage collector removes reports with their resources.
	cp, err := controlplane.Start(ctx, controlplane.WithControllerManager())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = cp
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// env is one test's world: the shared API server, a fresh JetStream.
type env struct {
	t     *testing.T
	kube  kubernetes.Interface
	dyn   dynamic.Interface
	meta  metadata.Interface
	nats  *queue.Embedded
	conn  *queue.Conn
	check *verify.Checker // shared by the test's projectors, scanners and rebuilds
}

func newEnv(t *testing.T) *env {
	t.Helper()
	if shared == nil {
		t.Skip("needs a real control plane; skipped under -short")
	}
	rc := shared.RESTConfig()
	rc.QPS, rc.Burst = 2000, 4000
	rc.WarningHandler = rest.NoWarnings{}
	e := &env{t: t, kube: kubernetes.NewForConfigOrDie(rc), dyn: dynamic.NewForConfigOrDie(rc), meta: metadata.NewForConfigOrDie(rc)}
	e.check = e.checker()
	ctx := t.Context()
	var err error
	e.nats, err = queue.RunEmbedded(ctx, queue.EmbeddedConfig{StoreDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.nats.Shutdown)
	e.conn = e.connect()
	if err := e.conn.Provision(ctx); err != nil {
		t.Fatal(err)
	}
	return e
}

// checker is a checker on the shared API server (opts: WithGrace and the
// like).
func (e *env) checker(opts ...verify.Option) *verify.Checker {
	e.t.Helper()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.kube.Discovery()))
	c, err := verify.New(e.meta, mapper, opts...)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (e *env) connect() *queue.Conn {
	e.t.Helper()
	c, err := queue.Connect(e.t.Context(), queue.WithURL(e.nats.ClientURL()), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(c.Close)
	return c
}

func (e *env) namespace(prefix string) *corev1.Namespace {
	e.t.Helper()
	ns, err := e.kube.CoreV1().Namespaces().Create(e.t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return ns
}

// replica is one running projector.
type replica struct {
	p    *Projector
	w    *Writer
	reg  *prometheus.Registry
	stop context.CancelFunc
	done chan error
}

func (e *env) startProjector(conn *queue.Conn, opts ...ProjectorOption) *replica {
	e.t.Helper()
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	if err != nil {
		e.t.Fatal(err)
	}
	w, err := NewWriter(e.dyn, WithWriteQPS(2000, 2000), WithMetrics(m))
	if err != nil {
		e.t.Fatal(err)
	}
	p, err := NewProjector(conn, w, append([]ProjectorOption{WithWindow(100 * time.Millisecond), WithChecker(e.check), WithLogger(zerolog.Nop())}, opts...)...)
	if err != nil {
		e.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(e.t.Context()))
	r := &replica{p: p, w: w, reg: reg, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	e.t.Cleanup(func() { r.halt(e.t) })
	return r
}

// halt stops the replica and waits for its drain.
func (r *replica) halt(t *testing.T) {
	t.Helper()
	r.stop()
	select {
	case err, ok := <-r.done:
		if ok && err != nil {
			t.Errorf("projector: %v", err)
		}
		if ok {
			close(r.done)
		}
	case <-time.After(45 * time.Second):
		t.Error("projector did not stop")
	}
}

// counter reads a counter (with the label value, if any) from a registry.
func counter(t *testing.T, reg *prometheus.Registry, name string, label ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if len(label) > 0 && !hasLabel(m, label[0]) {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Histogram != nil:
				sum += float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return sum
}

func hasLabel(m *dto.Metric, v string) bool {
	for _, l := range m.GetLabel() {
		if l.GetValue() == v {
			return true
		}
	}
	return false
}

// publish stores events in VERDICT_RESULTS the way the webhook does, and
// returns their stream sequences.
func (e *env) publish(evs ...events.ResultEvent) []uint64 {
	e.t.Helper()
	seqs := make([]uint64, len(evs))
	for i, ev := range evs {
		m, err := events.ResultMessage(ev)
		if err != nil {
			e.t.Fatal(err)
		}
		ack, err := e.conn.PublishSync(e.t.Context(), m)
		if err != nil {
			e.t.Fatal(err)
		}
		seqs[i] = ack.Sequence
	}
	return seqs
}

// expected folds the stream: every resource's report as it should be
// (every message of every subject, Fold keeping the newest of each policy;
// the tests publish results of real objects only, so no check is needed).
func (e *env) expected() map[string]Report {
	e.t.Helper()
	m, err := NewMetrics(nil)
	if err != nil {
		e.t.Fatal(err)
	}
	byUID, _, err := readResults(e.t.Context(), e.conn, m, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	out := map[string]Report{}
	for uid, rs := range byUID {
		rep, err := Fold(uid, rs)
		if err != nil {
			e.t.Fatal(err)
		}
		out[uid] = rep
	}
	return out
}

// report reads the report of the resource (nil if there is none).
func (e *env) report(namespace, uid string) *unstructured.Unstructured {
	e.t.Helper()
	var c dynamic.ResourceInterface = e.dyn.Resource(ClusterPolicyReports)
	if namespace != "" {
		c = e.dyn.Resource(PolicyReports).Namespace(namespace)
	}
	r, err := c.Get(e.t.Context(), uid, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

// matches says why the report differs from the fold, or nil.
func matches(got *unstructured.Unstructured, want Report) error {
	switch {
	case want.Object == nil && got == nil:
		return nil
	case want.Object == nil:
		return fmt.Errorf("report %s exists, want none", got.GetName())
	case got == nil:
		return fmt.Errorf("no report for %s", want.Name())
	}
	if got.GetKind() != want.Object.GetKind() || got.GetNamespace() != want.Object.GetNamespace() || got.GetName() != want.Object.GetName() {
		return fmt.Errorf("report %s %s/%s, want %s %s/%s", got.GetKind(), got.GetNamespace(), got.GetName(),
			want.Object.GetKind(), want.Object.GetNamespace(), want.Object.GetName())
	}
	if !sameReport(got, want.Object) {
		a, _ := json.Marshal(reportContent(got))
		b, _ := json.Marshal(reportContent(want.Object))
		return fmt.Errorf("report %s:\n got %s\nwant %s", got.GetName(), a, b)
	}
	return nil
}

// eventually polls f until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// consumerSettled reports nil once the durable has nothing pending and
// nothing unacknowledged.
func (e *env) consumerSettled() error {
	info, err := e.conn.JetStream().Consumer(e.t.Context(), queue.StreamResults, queue.ConsumerReporter)
	if err != nil {
		return err
	}
	ci, err := info.Info(e.t.Context())
	if err != nil {
		return err
	}
	if ci.NumPending != 0 || ci.NumAckPending != 0 || ci.NumRedelivered != 0 {
		return fmt.Errorf("consumer: %d pending, %d unacknowledged, %d redelivered", ci.NumPending, ci.NumAckPending, ci.NumRedelivered)
	}
	return nil
}

// deadLetters reads VERDICT_DEAD.
func (e *env) deadLetters() []queue.DeadLetter {
	e.t.Helper()
	var out []queue.DeadLetter
	_, err := e.conn.Replay(e.t.Context(), queue.StreamDead, func(m queue.ReplayMsg) error {
		d, err := queue.ParseDeadLetter(m.Header, m.Data)
		if err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		e.t.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sequence < out[j].Sequence })
	return out
}

var errNotYet = errors.New("not yet")
