// Package reportertest is what the tests of internal/reports/reporter,
// internal/reports/scanner and internal/reports/app share: one real control plane
// per test binary (Main), a fresh embedded JetStream per test (NewEnv),
// projectors, builders of results, and the comparison of reports with the
// fold of the stream. Only tests import it; it holds no test doubles.
//
// It uses the reporter's exported API only, so the reporter's own tests
// that use it are external tests (package reporter_test).
package reportertest

import (
	"context"
	"flag"
	"fmt"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/queue"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"
)

// shared is the control plane Main started for the test binary; nil under
// -short.
var shared *controlplane.ControlPlane

// Main runs the tests of a package with one control plane for all of them
// (etcd, kube-apiserver and the controller manager, whose garbage
// collector removes reports with their resources) and returns the exit
// code; under -short it starts none, and the tests that need one skip.
// Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(reportertest.Main(m)) }
func Main(m *testing.M) int {
	flag.Parse()
	if testing.Short() {
		return m.Run()
	}
	ctx := context.Background()
	if _, err := controlplane.EnsureBinaries(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	cp, err := controlplane.Start(ctx, controlplane.WithControllerManager())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	shared = cp
	code := m.Run()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	return code
}

// ControlPlane is the control plane Main started: nil under -short (or
// without Main).
func ControlPlane() *controlplane.ControlPlane { return shared }

// Env is one test's world: the shared API server, a fresh JetStream with
// the streams provisioned.
type Env struct {
	T    *testing.T
	Kube kubernetes.Interface
	Dyn  dynamic.Interface
	Meta metadata.Interface
	NATS *embedded.Server
	// Conn is the test's own connection (publishing, reading the stream).
	Conn *queue.Conn
	// Check is shared by the test's projectors, scanners and rebuilds.
	Check *apicheck.Checker
	rc    *rest.Config
}

// NewEnv makes the test's Env; the test is skipped without a control plane
// (under -short).
func NewEnv(t *testing.T) *Env {
	t.Helper()
	if shared == nil {
		t.Skip("needs a real control plane; skipped under -short")
	}
	rc := shared.RESTConfig()
	rc.QPS, rc.Burst = 2000, 4000
	rc.WarningHandler = rest.NoWarnings{}
	e := &Env{T: t, Kube: kubernetes.NewForConfigOrDie(rc), Dyn: dynamic.NewForConfigOrDie(rc), Meta: metadata.NewForConfigOrDie(rc), rc: rc}
	e.Check = e.Checker()
	e.NATS = natstest.Server(t)
	e.Conn = e.Connect()
	if err := bus.Provision(t.Context(), e.Conn); err != nil {
		t.Fatal(err)
	}
	return e
}

// Checker is a checker on the shared API server (opts: WithGrace and the
// like).
func (e *Env) Checker(opts ...apicheck.Option) *apicheck.Checker {
	e.T.Helper()
	return e.CheckerAs(e.rc, opts...)
}

// CheckerAs is a checker reading with the identity of rc (As).
func (e *Env) CheckerAs(rc *rest.Config, opts ...apicheck.Option) *apicheck.Checker {
	e.T.Helper()
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kubernetes.NewForConfigOrDie(rc).Discovery()))
	c, err := apicheck.New(metadata.NewForConfigOrDie(rc), mapper, opts...)
	if err != nil {
		e.T.Fatal(err)
	}
	return c
}

// As returns the client config of a user of its own, bound to a
// ClusterRole of rules and nothing else (discovery aside, which every
// authenticated user has): a reporter whose RBAC is narrower than the
// test's. The role and its binding are removed at the end of the test.
func (e *Env) As(rules ...rbacv1.PolicyRule) *rest.Config {
	e.T.Helper()
	ctx := e.T.Context()
	role, err := e.Kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{GenerateName: "reportertest-"}, Rules: rules}, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	user := "reportertest:" + role.Name
	binding, err := e.Kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(func() {
		ctx := context.WithoutCancel(ctx)
		_ = e.Kube.RbacV1().ClusterRoleBindings().Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = e.Kube.RbacV1().ClusterRoles().Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
	groups := []string{"system:authenticated"}
	if len(rules) > 0 && len(rules[0].APIGroups) > 0 && len(rules[0].Resources) > 0 && len(rules[0].Verbs) > 0 {
		// The authorizer learns of the binding through a watch: wait.
		r := rules[0]
		controlplane.WaitAuthorized(e.T, e.Kube, user, groups, authorizationv1.ResourceAttributes{Verb: r.Verbs[0], Group: r.APIGroups[0], Resource: r.Resources[0]})
	}
	rc := rest.CopyConfig(e.rc)
	rc.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return rc
}

// Connect opens another connection to the test's JetStream, closed at the
// end of the test.
func (e *Env) Connect() *queue.Conn {
	e.T.Helper()
	c, err := bus.Connect(e.T.Context(), queue.WithURL(e.NATS.ClientURL()), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(c.Close)
	return c
}

// Namespace creates a namespace named from prefix.
func (e *Env) Namespace(prefix string) *corev1.Namespace {
	e.T.Helper()
	ns, err := e.Kube.CoreV1().Namespaces().Create(e.T.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix}}, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	return ns
}

// Replica is one running projector, with its writer and the registry of
// its metrics.
type Replica struct {
	P    *reporter.Projector
	W    *reporter.Writer
	Reg  *prometheus.Registry
	stop context.CancelFunc
	done chan error
}

// StartProjector runs a projector on conn (a coalescing window of 100ms,
// the Env's checker, then opts) until Halt or the end of the test.
func (e *Env) StartProjector(conn *queue.Conn, opts ...reporter.ProjectorOption) *Replica {
	e.T.Helper()
	reg := prometheus.NewRegistry()
	m, err := reporter.NewMetrics(reg)
	if err != nil {
		e.T.Fatal(err)
	}
	w, err := reporter.NewWriter(e.Dyn, reporter.WithWriteQPS(2000, 2000), reporter.WithMetrics(m))
	if err != nil {
		e.T.Fatal(err)
	}
	p, err := reporter.NewProjector(conn, w, append([]reporter.ProjectorOption{reporter.WithWindow(100 * time.Millisecond), reporter.WithChecker(e.Check), reporter.WithLogger(zerolog.Nop())}, opts...)...)
	if err != nil {
		e.T.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(e.T.Context()))
	r := &Replica{P: p, W: w, Reg: reg, stop: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	e.T.Cleanup(func() { r.Halt(e.T) })
	return r
}

// Halt stops the replica and waits for its drain.
func (r *Replica) Halt(t *testing.T) {
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

// Counter reads a counter (with the label value, if any) from a registry;
// of a gauge, its value; of a histogram, its sample count.
func Counter(t *testing.T, reg *prometheus.Registry, name string, label ...string) float64 {
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
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
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

// PublishBatch stores the results of one admission (one resource at one
// version) in VERDICT_RESULTS as the webhook does, one batch, and returns
// its stream sequence.
func (e *Env) PublishBatch(evs ...bus.ResultEvent) uint64 {
	e.T.Helper()
	m, err := bus.ResultBatchMessage(evs)
	if err != nil {
		e.T.Fatal(err)
	}
	ack, err := e.Conn.PublishSync(e.T.Context(), m)
	if err != nil {
		e.T.Fatal(err)
	}
	return ack.Sequence
}

// Publish stores events in VERDICT_RESULTS one message each, as a
// background scan does (and the webhook did before issue 33), and returns
// their stream sequences.
func (e *Env) Publish(evs ...bus.ResultEvent) []uint64 {
	e.T.Helper()
	seqs := make([]uint64, len(evs))
	for i, ev := range evs {
		m, err := bus.ResultMessage(ev)
		if err != nil {
			e.T.Fatal(err)
		}
		ack, err := e.Conn.PublishSync(e.T.Context(), m)
		if err != nil {
			e.T.Fatal(err)
		}
		seqs[i] = ack.Sequence
	}
	return seqs
}

// Report reads the report of the resource (nil if there is none).
func (e *Env) Report(namespace, uid string) *unstructured.Unstructured {
	e.T.Helper()
	var c dynamic.ResourceInterface = e.Dyn.Resource(model.ClusterPolicyReports)
	if namespace != "" {
		c = e.Dyn.Resource(model.PolicyReports).Namespace(namespace)
	}
	r, err := c.Get(e.T.Context(), uid, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.T.Fatal(err)
	}
	return r
}

// ListReports reads every PolicyReport of ns, by name.
func (e *Env) ListReports(ns string) map[string]*unstructured.Unstructured {
	e.T.Helper()
	list, err := e.Dyn.Resource(model.PolicyReports).Namespace(ns).List(e.T.Context(), metav1.ListOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	out := make(map[string]*unstructured.Unstructured, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].GetName()] = &list.Items[i]
	}
	return out
}

// ConsumerSettled reports nil once the reporter's durable has nothing
// pending and nothing unacknowledged.
func (e *Env) ConsumerSettled() error {
	info, err := e.Conn.JetStream().Consumer(e.T.Context(), bus.StreamResults, bus.ConsumerReporter)
	if err != nil {
		return err
	}
	ci, err := info.Info(e.T.Context())
	if err != nil {
		return err
	}
	if ci.NumPending != 0 || ci.NumAckPending != 0 || ci.NumRedelivered != 0 {
		return fmt.Errorf("consumer: %d pending, %d unacknowledged, %d redelivered", ci.NumPending, ci.NumAckPending, ci.NumRedelivered)
	}
	return nil
}

// DeadLetters reads VERDICT_DEAD, in stream order.
func (e *Env) DeadLetters() []queue.DeadLetter {
	e.T.Helper()
	var out []queue.DeadLetter
	_, err := e.Conn.Replay(e.T.Context(), bus.StreamDead, func(m queue.ReplayMsg) error {
		d, err := queue.ParseDeadLetter(m.Header, m.Data)
		if err != nil {
			return err
		}
		out = append(out, d)
		return nil
	})
	if err != nil {
		e.T.Fatal(err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Sequence < out[j].Sequence })
	return out
}
