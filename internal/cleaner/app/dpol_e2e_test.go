package app_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/cleaner"
	cleanerapp "github.com/verdict-dev/verdict/internal/cleaner/app"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/internal/testkit/testproc"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// oldCRDs is a ClusterCleanupPolicy run while the cluster serves no
// DeletingPolicy kinds.
const oldCRDs = `apiVersion: verdict.dev/v1
kind: ClusterCleanupPolicy
metadata: {name: old-crds}
spec:
  schedule: "@every 2s"
  match: {any: [{resources: {kinds: [ConfigMap], selector: {matchLabels: {old-crds: "true"}}}}]}
`

// dpolCluster deletes, cluster-wide, the ConfigMaps, Pods, Endpoints and
// people (a custom resource whose plural is no guess from its kind)
// labelled dpol=cluster whose state label is done and that are not
// pinned; it also names a resource no one serves.
const dpolCluster = `apiVersion: verdict.dev/v1
kind: DeletingPolicy
metadata: {name: dpol-cluster}
spec:
  schedule: "@every 2s"
  matchConstraints:
    objectSelector: {matchLabels: {dpol: cluster}}
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      resources: [configmaps, pods, endpoints]
      operations: ["*"]
    - apiGroups: [e2e.example.com]
      apiVersions: [v1]
      resources: [people]
      operations: ["*"]
    - apiGroups: [example.com]
      apiVersions: [v1]
      resources: [widgets]
      operations: ["*"]
  conditions:
  - name: done
    expression: "object.metadata.labels.state == 'done'"
  - name: not-pinned
    expression: "!has(object.metadata.annotations) || !('pinned' in object.metadata.annotations)"
`

// dpolNamespaced deletes, in dpol-b only, the ConfigMaps labelled
// ndpol=true whose state is done, in the foreground.
const dpolNamespaced = `apiVersion: verdict.dev/v1
kind: NamespacedDeletingPolicy
metadata: {name: dpol-ns, namespace: dpol-b}
spec:
  schedule: "@every 2s"
  deletionPropagationPolicy: Foreground
  matchConstraints:
    objectSelector: {matchLabels: {ndpol: "true"}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], resources: [configmaps], operations: ["*"]}
  conditions:
  - {name: done, expression: "object.metadata.labels.state == 'done'"}
`

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// people is a custom resource whose plural is not the one guessed from
// its kind (Person: persons): a DeletingPolicy names it by its plural.
var people = schema.GroupVersionResource{Group: "e2e.example.com", Version: "v1", Resource: "people"}

const peopleCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: people.e2e.example.com}
spec:
  group: e2e.example.com
  names: {kind: Person, listKind: PersonList, plural: people, singular: person}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// TestE2EDeletingPolicy runs one cleaner (in process) against a real
// kube-apiserver and JetStream:
//   - started on a cluster whose CRDs predate the DeletingPolicy kinds, it
//     runs (a ClusterCleanupPolicy deletes), warning that the kinds are
//     not served;
//   - once the CRDs are installed it watches the kinds without a restart;
//   - a DeletingPolicy deletes, cluster-wide, exactly the ConfigMaps, Pods,
//     Endpoints and people (a plural no guess from the kind Person gives:
//     the resource is judged as discovery serves it) it selects for which
//     every condition holds, and leaves the others; its ticks are
//     processed (no status to write) and the resource it names that is
//     not served is counted;
//   - a NamespacedDeletingPolicy deletes in its own namespace only, with
//     its deletionPropagationPolicy (Foreground: with no garbage
//     collector, the ConfigMap stays with the foregroundDeletion
//     finalizer).
func TestE2EDeletingPolicy(t *testing.T) {
	cp := controlplane.StartForTest(t)
	ctx := t.Context()
	rc := cp.RESTConfig()
	rc.WarningHandler = rest.NoWarnings{} // v1 Endpoints are deprecated
	kube := kubernetes.NewForConfigOrDie(rc)
	dyn := dynamic.NewForConfigOrDie(rc)

	// A custom resource, served before the cleaner first lists the kinds.
	if _, err := dyn.Resource(crdGVR).Create(ctx, testkit.Unstructured(t, peopleCRD), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// CRDs older than the DeletingPolicy kinds.
	dpolCRDs := []string{"deletingpolicies.verdict.dev", "namespaceddeletingpolicies.verdict.dev"}
	for _, name := range dpolCRDs {
		if err := dyn.Resource(crdGVR).Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	served := func(resource string) bool {
		list, err := kube.Discovery().ServerResourcesForGroupVersion("verdict.dev/v1")
		return err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource })
	}
	testkit.Eventually(t, 30*time.Second, "the DeletingPolicy kinds gone, people served", func() error {
		if served("deletingpolicies") || served("namespaceddeletingpolicies") {
			return fmt.Errorf("still served")
		}
		if _, err := dyn.Resource(people).Namespace("default").List(ctx, metav1.ListOptions{}); err != nil {
			return err
		}
		return nil
	})

	for ns, env := range map[string]string{"dpol-a": "dev", "dpol-b": "dev", "old": "dev"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"env": env}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// No controller manager: the Pods' namespace needs its service
	// account made by hand.
	if _, err := kube.CoreV1().ServiceAccounts("dpol-a").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	nats := natstest.Server(t)
	var logs testproc.LogBuffer
	probe := testkit.FreeAddr(t)
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		cfg := cleanerapp.DefaultConfig()
		cfg.Kube.Kubeconfig = cp.KubeconfigPath()
		cfg.NATS.URLs = []string{nats.ClientURL()}
		cfg.ProbeAddress = probe
		cfg.Resync = 2 * time.Second // how soon a newly installed kind is watched
		cfg.Worker.RetryMin, cfg.Worker.RetryMax, cfg.Worker.ShutdownTimeout = 100*time.Millisecond, time.Second, 5*time.Second
		done <- cleanerapp.Run(cctx, cfg, zerolog.New(&logs))
	}()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && cctx.Err() == nil {
			t.Errorf("cleaner: %v", err)
		}
		if t.Failed() {
			t.Logf("cleaner log:\n%s", logs.String())
		}
	})
	probes := []string{probe}
	conn, err := bus.Connect(ctx, queue.WithURL(nats.ClientURL()), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)

	configMap := func(ns, name string, labels, annotations map[string]string) *corev1.ConfigMap {
		t.Helper()
		cm, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	gone := func(what string, get func() (metav1.Object, error)) {
		t.Helper()
		testkit.Eventually(t, 20*time.Second, what+" deleted", func() error {
			o, err := get()
			switch {
			case apierrors.IsNotFound(err):
				return nil
			case err != nil:
				return err
			case o.GetDeletionTimestamp() != nil:
				return nil
			}
			return fmt.Errorf("still there")
		})
	}
	getCM := func(ns, name string) func() (metav1.Object, error) {
		return func() (metav1.Object, error) { return kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}) }
	}

	// The cleaner runs on the old CRDs, and says what it does not run.
	if _, err := dyn.Resource(cleaner.ClusterCleanupPolicies).Create(ctx, testkit.Unstructured(t, oldCRDs), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	configMap("old", "old-1", map[string]string{"old-crds": "true"}, nil)
	gone("old/old-1", getCM("old", "old-1"))
	for _, kind := range []string{"DeletingPolicy", "NamespacedDeletingPolicy"} {
		if log := logs.String(); !strings.Contains(log, `"kind":"`+kind+`"`) || !strings.Contains(log, "policyKindNotServed") {
			t.Errorf("no warning that %s is not served", kind)
		}
	}
	if err := dyn.Resource(cleaner.ClusterCleanupPolicies).Delete(ctx, "old-crds", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}

	// The CRDs are installed: the cleaner watches the new kinds.
	if err := controlplane.InstallCRDs(ctx, dyn); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the DeletingPolicy kinds watched", func() error {
		if n := strings.Count(logs.String(), "policyKindWatched"); n != 2 {
			return fmt.Errorf("%d kinds watched", n)
		}
		return nil
	})

	cluster := map[string]string{"dpol": "cluster", "state": "done"}
	running := map[string]string{"dpol": "cluster", "state": "running"}
	pod := func(name string, labels map[string]string) *corev1.Pod {
		t.Helper()
		p, err := kube.CoreV1().Pods("dpol-a").Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	doomedCMs := []*corev1.ConfigMap{configMap("dpol-a", "c-done", cluster, nil), configMap("dpol-b", "c-done", cluster, nil)}
	keptCMs := []*corev1.ConfigMap{
		configMap("dpol-a", "c-running", running, nil),                                                // condition done is false
		configMap("dpol-a", "c-pinned", cluster, map[string]string{"pinned": "yes"}),                  // condition not-pinned is false
		configMap("dpol-a", "c-unselected", map[string]string{"state": "done"}, nil),                  // objectSelector
		configMap("dpol-a", "n-done", map[string]string{"ndpol": "true", "state": "done"}, nil),       // the namespaced policy's, in another namespace
		configMap("dpol-b", "n-running", map[string]string{"ndpol": "true", "state": "running"}, nil), // condition false
	}
	nsDoomed := configMap("dpol-b", "n-done", map[string]string{"ndpol": "true", "state": "done"}, nil)
	doomedPod, keptPod := pod("p-done", cluster), pod("p-running", running)
	// The cleaner deletes what the API serves, deprecated kinds included.
	endpoints := &corev1.Endpoints{ObjectMeta: metav1.ObjectMeta{Name: "e-done", Labels: cluster}} //nolint:staticcheck // v1 Endpoints are deprecated, still served
	ep, err := kube.CoreV1().Endpoints("dpol-a").Create(ctx, endpoints, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	person := func(name string, labels map[string]string) {
		t.Helper()
		u := testkit.Unstructured(t, fmt.Sprintf("{apiVersion: e2e.example.com/v1, kind: Person, metadata: {name: %s, namespace: dpol-a}}", name))
		u.SetLabels(labels)
		for {
			_, err := dyn.Resource(people).Namespace("dpol-a").Create(ctx, u, metav1.CreateOptions{})
			if err == nil {
				return
			}
			if !apierrors.IsNotFound(err) || ctx.Err() != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // the CRD's first creates
		}
	}
	person("ann", cluster)
	person("bob", running)
	secret, err := kube.CoreV1().Secrets("dpol-a").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s-done", Labels: cluster}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	clusterPol, err := dyn.Resource(cleaner.DeletingPolicies).Create(ctx, testkit.Unstructured(t, dpolCluster), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(cleaner.NamespacedDeletingPolicies).Namespace("dpol-b").Create(ctx, testkit.Unstructured(t, dpolNamespaced), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the policies' schedules", func() error {
		for _, key := range []string{"DeletingPolicy/dpol-cluster", "NamespacedDeletingPolicy/dpol-b/dpol-ns"} {
			s, err := conn.GetSchedule(ctx, bus.WorkCleanup, key)
			if err != nil {
				return fmt.Errorf("%s: %w", key, err)
			}
			if s.Spec != "@every 2s" {
				return fmt.Errorf("%s: spec %q", key, s.Spec)
			}
		}
		return nil
	})

	for _, cm := range doomedCMs {
		gone(cm.Namespace+"/"+cm.Name, getCM(cm.Namespace, cm.Name))
	}
	gone("the Pod p-done", func() (metav1.Object, error) {
		return kube.CoreV1().Pods("dpol-a").Get(ctx, doomedPod.Name, metav1.GetOptions{})
	})
	gone("the Endpoints e-done", func() (metav1.Object, error) {
		return kube.CoreV1().Endpoints("dpol-a").Get(ctx, ep.Name, metav1.GetOptions{})
	})
	gone("the Person ann", func() (metav1.Object, error) {
		return dyn.Resource(people).Namespace("dpol-a").Get(ctx, "ann", metav1.GetOptions{})
	})
	// Foreground: the apiserver marks it and adds the finalizer the
	// garbage collector would remove (there is none here).
	testkit.Eventually(t, 20*time.Second, "dpol-b/n-done deleted in the foreground", func() error {
		got, err := kube.CoreV1().ConfigMaps("dpol-b").Get(ctx, nsDoomed.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got.DeletionTimestamp == nil || !slices.Contains(got.Finalizers, metav1.FinalizerDeleteDependents) {
			return fmt.Errorf("deletionTimestamp %v, finalizers %v", got.DeletionTimestamp, got.Finalizers)
		}
		return nil
	})

	// Two more ticks of each: what is kept stays kept.
	ticks := func(policy, outcome string) float64 {
		return metric(probes, fmt.Sprintf(`verdict_cleaner_ticks_total{outcome=%q,policy=%q,reason=`, outcome, policy))
	}
	before := ticks("dpol-cluster", "processed")
	testkit.Eventually(t, 15*time.Second, "two more ticks", func() error {
		if n := ticks("dpol-cluster", "processed") - before; n < 2 {
			return fmt.Errorf("%v more ticks", n)
		}
		return nil
	})
	for _, cm := range keptCMs {
		if got, err := kube.CoreV1().ConfigMaps(cm.Namespace).Get(ctx, cm.Name, metav1.GetOptions{}); err != nil || got.UID != cm.UID || got.DeletionTimestamp != nil {
			t.Errorf("%s/%s was deleted: %v", cm.Namespace, cm.Name, err)
		}
	}
	if got, err := kube.CoreV1().Pods("dpol-a").Get(ctx, keptPod.Name, metav1.GetOptions{}); err != nil || got.UID != keptPod.UID || got.DeletionTimestamp != nil {
		t.Errorf("the Pod p-running was deleted: %v", err)
	}
	if _, err := dyn.Resource(people).Namespace("dpol-a").Get(ctx, "bob", metav1.GetOptions{}); err != nil {
		t.Errorf("the Person bob was deleted: %v", err)
	}
	if got, err := kube.CoreV1().Secrets("dpol-a").Get(ctx, secret.Name, metav1.GetOptions{}); err != nil || got.UID != secret.UID {
		t.Errorf("the Secret s-done (a resource the policy does not name) was deleted: %v", err)
	}

	// Counted: each deletion once, by kind; the ticks processed, never
	// retried (there is no status to write); the unserved resource.
	for kind, want := range map[string]float64{"ConfigMap": 2, "Pod": 1, "Endpoints": 1, "Person": 1} {
		if n := metric(probes, fmt.Sprintf(`verdict_cleaner_deletions_total{kind=%q,outcome="deleted",policy="dpol-cluster"}`, kind)); n != want {
			t.Errorf("%v %s deletions counted, want %v", n, kind, want)
		}
	}
	if n := metric(probes, `verdict_cleaner_deletions_total{kind="ConfigMap",outcome="deleted",policy="dpol-b/dpol-ns"}`); n != 1 {
		t.Errorf("%v deletions by the namespaced policy, want 1", n)
	}
	for _, p := range []string{"dpol-cluster", "dpol-b/dpol-ns"} {
		if r, d := ticks(p, "retried"), ticks(p, "deadLettered"); r != 0 || d != 0 {
			t.Errorf("%s: %v ticks retried, %v dead-lettered", p, r, d)
		}
	}
	if n := metric(probes, `verdict_cleaner_kinds_not_served_total{kind="example.com/v1/widgets",policy="dpol-cluster"}`); n < 1 {
		t.Errorf("the unserved example.com/v1/widgets not counted")
	}
	if !strings.Contains(logs.String(), `"kind":"example.com/v1/widgets"`) {
		t.Errorf("the unserved resource is not named in the log")
	}
	if n := metric(probes, `verdict_cleaner_evaluation_errors_total{policy="dpol-cluster"}`); n != 0 {
		t.Errorf("%v evaluation errors", n)
	}

	// A PolicyApplied Event per deletion, about the DeletingPolicy.
	evs, err := kube.EventsV1().Events(metav1.NamespaceDefault).List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=dpol-cluster"})
	if err != nil {
		t.Fatal(err)
	}
	related := map[string]bool{}
	for _, ev := range evs.Items {
		if ev.Reason == cleaner.EventReasonApplied && ev.Related != nil && ev.Regarding.UID == clusterPol.GetUID() &&
			ev.Regarding.Kind == "DeletingPolicy" && ev.Regarding.APIVersion == "verdict.dev/v1" {
			related[ev.Related.Kind+" "+ev.Related.Namespace+"/"+ev.Related.Name] = true
		}
	}
	for _, want := range []string{"ConfigMap dpol-a/c-done", "ConfigMap dpol-b/c-done", "Pod dpol-a/p-done", "Endpoints dpol-a/e-done", "Person dpol-a/ann"} {
		if !related[want] {
			t.Errorf("no PolicyApplied Event about %s (got %v)", want, related)
		}
	}

	// Deleting the policy removes its schedule.
	if err := dyn.Resource(cleaner.DeletingPolicies).Delete(ctx, "dpol-cluster", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 10*time.Second, "the schedule removed", func() error {
		if _, err := conn.GetSchedule(ctx, bus.WorkCleanup, "DeletingPolicy/dpol-cluster"); err == nil {
			return fmt.Errorf("schedule still there")
		}
		return nil
	})
}
