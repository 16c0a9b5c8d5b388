package registrar_test

import (
	"context"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
	"github.com/verdict-dev/verdict/internal/platform/leader"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/webhook/registrar"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// staticSource is a PolicySource over a fixed, replaceable list.
type staticSource struct {
	mu      sync.Mutex
	p       []*engine.Policy
	changed chan struct{}
}

func (s *staticSource) Policies() []*engine.Policy {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.p
}
func (s *staticSource) Changed() <-chan struct{} { return s.changed }
func (s *staticSource) set(p []*engine.Policy) {
	s.mu.Lock()
	s.p = p
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

func compile(t *testing.T, y string) *engine.Policy {
	t.Helper()
	eng, err := engine.New()
	if err != nil {
		t.Fatal(err)
	}
	docs, err := policy.Parse([]byte(y), "test")
	if err != nil {
		t.Fatal(err)
	}
	cp, err := eng.Compile(docs.Policies[0])
	if err != nil {
		t.Fatal(err)
	}
	return cp
}

const podPolicy = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: pods}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`

const cmPolicy = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: cms}
spec:
  failurePolicy: Ignore
  rules:
  - name: m
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    mutate: {patchStrategicMerge: {metadata: {labels: {+(a): b}}}}
`

func TestE2ERegistrarReconcile(t *testing.T) {
	cp := controlplane.StartForTest(t)
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ctx := t.Context()
	src := &staticSource{p: []*engine.Policy{compile(t, podPolicy)}, changed: make(chan struct{}, 1)}
	opts := registrar.Options{URL: "https://127.0.0.1:9443", CABundle: cp.CACertPEM(), Filter: admissionfilter.New([]string{"verdict"}, nil)}
	reg := registrar.New(client, registrar.NewDiscoveryResolver(client.Discovery()), src, opts)

	res, err := reg.Reconcile(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !res.MutatingChanged || !res.ValidatingChanged {
		t.Fatalf("first reconcile should create both configurations: %+v", res)
	}
	// Nothing changed: nothing is written (the read-back object equals
	// what was built, defaults included).
	for i := 0; i < 3; i++ {
		res, err = reg.Reconcile(ctx)
		if err != nil || res.MutatingChanged || res.ValidatingChanged {
			t.Fatalf("reconcile %d without change wrote: %+v %v", i, res, err)
		}
	}
	val, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, registrar.DefaultValidatingName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv := val.ResourceVersion
	if len(val.Webhooks) != 2 || val.Webhooks[0].Name != "validate-fail.verdict.dev" {
		t.Fatalf("webhooks: %d", len(val.Webhooks))
	}

	// A policy change is a real difference.
	src.set([]*engine.Policy{compile(t, podPolicy), compile(t, cmPolicy)})
	if res, err = reg.Reconcile(ctx); err != nil || !res.MutatingChanged {
		t.Fatalf("after adding a mutate policy: %+v %v", res, err)
	}
	mut, err := client.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, registrar.DefaultMutatingName, metav1.GetOptions{})
	if err != nil || len(mut.Webhooks) != 1 || mut.Webhooks[0].Rules[0].Resources[0] != "configmaps" {
		t.Fatalf("mutating configuration: %v %+v", err, mut)
	}

	// Someone edits the validating configuration: restored.
	val, _ = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, registrar.DefaultValidatingName, metav1.GetOptions{})
	val.Webhooks = val.Webhooks[:1]
	if _, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Update(ctx, val, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if res, err = reg.Reconcile(ctx); err != nil || !res.ValidatingChanged {
		t.Fatalf("edit not restored: %+v %v", res, err)
	}
	// Someone deletes it: recreated.
	if err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, registrar.DefaultValidatingName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if res, err = reg.Reconcile(ctx); err != nil || !res.ValidatingChanged {
		t.Fatalf("deletion not restored: %+v %v", res, err)
	}
	val, err = client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, registrar.DefaultValidatingName, metav1.GetOptions{})
	if err != nil || val.ResourceVersion == rv || len(val.Webhooks) != 2 {
		t.Fatalf("after restore: %v", err)
	}
}

// TestE2ERegistrarLeaderFailover runs two replicas campaigning for the
// Lease: the leader writes the configurations; when it dies the other
// takes the Lease and restores a deleted configuration.
func TestE2ERegistrarLeaderFailover(t *testing.T) {
	cp := controlplane.StartForTest(t)
	client := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ctx := t.Context()
	if _, err := client.CoreV1().Namespaces().Create(ctx, &nsObj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	opts := registrar.Options{URL: "https://127.0.0.1:9443", CABundle: cp.CACertPEM()}
	type replica struct {
		cancel context.CancelFunc
		done   chan struct{}
		leads  chan string
	}
	start := func(id string) *replica {
		rctx, cancel := context.WithCancel(ctx)
		r := &replica{cancel: cancel, done: make(chan struct{}), leads: make(chan string, 8)}
		src := &staticSource{p: []*engine.Policy{compile(t, podPolicy)}, changed: make(chan struct{}, 1)}
		reg := registrar.New(client, registrar.NewDiscoveryResolver(client.Discovery()), src, opts)
		go func() {
			defer close(r.done)
			_ = leader.Run(rctx, client, leader.Config{
				Namespace: "verdict", Name: "verdict-registrar", Identity: id,
				LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond,
			}, func(lctx context.Context) {
				r.leads <- id
				poke := registrar.WatchConfigurations(lctx, client, opts)
				_ = reg.Loop(lctx, poke, 5*time.Second)
			})
		}()
		return r
	}
	a := start("a")
	select {
	case <-a.leads:
	case <-time.After(20 * time.Second):
		t.Fatal("replica a never led")
	}
	b := start("b")
	testkit.EventuallyTrue(t, 10*time.Second, "the condition", func() bool {
		_, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, registrar.DefaultValidatingName, metav1.GetOptions{})
		return err == nil
	})
	// The leader dies (its context ends; the Lease is released).
	a.cancel()
	<-a.done
	select {
	case <-b.leads:
	case <-time.After(20 * time.Second):
		t.Fatal("replica b never took the lease")
	}
	if err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, registrar.DefaultValidatingName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 10*time.Second, "the condition", func() bool {
		v, err := client.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, registrar.DefaultValidatingName, metav1.GetOptions{})
		return err == nil && len(v.Webhooks) == 2
	})
	b.cancel()
	<-b.done
}

var nsObj = namespace("verdict")
