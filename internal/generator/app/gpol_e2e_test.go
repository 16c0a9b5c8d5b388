package app_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/generator"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
)

// gpolDefaults is a GeneratingPolicy that shares its name with the
// ClusterPolicy addDefaults: each new Namespace gets a ConfigMap built by
// CEL, and one cloned from the templates namespace through resource.Get.
const gpolDefaults = `apiVersion: verdict.dev/v1
kind: GeneratingPolicy
metadata: {name: add-defaults}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [namespaces]
  matchConditions:
  - name: generated-namespaces
    expression: "object.metadata.name.startsWith('gen')"
  variables:
  - name: ns
    expression: "object.metadata.name"
  - name: quota
    expression: >-
      [{"kind": dyn("ConfigMap"), "apiVersion": dyn("v1"),
        "metadata": dyn({"name": "cel-defaults", "namespace": string(variables.ns)}),
        "data": dyn({"namespace": string(variables.ns), "made-by": "cel"})}]
  - name: source
    expression: resource.Get("v1", "configmaps", "templates", "shared")
  generate:
  - expression: generator.Apply(variables.ns, variables.quota)
  - expression: generator.Apply(variables.ns, [variables.source])
`

// stampSecrets is a MutatingPolicy with mutateExisting: a ConfigMap
// named dictionary annotates the Secrets labelled sync=yes of its
// namespace.
const stampSecrets = `apiVersion: verdict.dev/v1
kind: MutatingPolicy
metadata: {name: stamp-secrets}
spec:
  evaluation: {mutateExisting: {enabled: true}}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  matchConditions: [{name: dictionary, expression: "object.metadata.name == 'dictionary'"}]
  targetMatchConstraints:
    objectSelector: {matchLabels: {sync: "yes"}}
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [secrets]}]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{metadata: Object.metadata{annotations: {'stamped-by': object.metadata.namespace + '/' + request.name}}}"
`

// stampPodStatus is a MutatingPolicy whose targets are a subresource:
// a ConfigMap named stamp-status writes a message into the status of the
// Pods labelled stamp=yes, through pods/status (the API server keeps a
// status written to the Pod itself out).
const stampPodStatus = `apiVersion: verdict.dev/v1
kind: MutatingPolicy
metadata: {name: stamp-pod-status}
spec:
  evaluation: {mutateExisting: {enabled: true}}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]
  matchConditions: [{name: stamp, expression: "object.metadata.name == 'stamp-status'"}]
  targetMatchConstraints:
    objectSelector: {matchLabels: {stamp: "yes"}}
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [pods/status]}]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{status: Object.status{message: 'stamped by ' + request.name}}"
`

// TestE2EGeneratingPolicy: through the real API server, the webhook and
// the generator service, a GeneratingPolicy in Verdict's group creates
// its downstream for each new Namespace (built by CEL, and cloned through
// resource.Get), labelled with its kind. It shares its name with a
// ClusterPolicy generating something else: each item names its policy's
// kind, so neither is taken for the other. A MutatingPolicy with
// mutateExisting patches the existing Secrets a trigger's arrival
// selects.
func TestE2EGeneratingPolicy(t *testing.T) {
	cp := controlplane.StartForTest(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	for _, ns := range []string{"verdict", "templates"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	shared := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "templates", Name: "shared", Labels: map[string]string{"kind": "shared"}},
		Data: map[string]string{"motd": "hello"}}
	if _, err := kube.CoreV1().ConfigMaps("templates").Create(ctx, shared, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, addDefaults), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(policycache.GeneratingPolicies).Create(ctx, testkit.Unstructured(t, gpolDefaults), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, y := range []string{stampSecrets, stampPodStatus} {
		if _, err := dyn.Resource(policycache.MutatingPolicies).Create(ctx, testkit.Unstructured(t, y), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	startStack(t, cp)

	ns, cm := firstGenerated(t, kube, "gen", "cel-defaults")
	if cm.Data["namespace"] != ns.Name || cm.Data["made-by"] != "cel" {
		t.Errorf("data %v", cm.Data)
	}
	want := map[string]string{
		generator.LabelManagedBy: "verdict", generator.LabelPolicyName: "add-defaults",
		generator.LabelPolicyKind: "GeneratingPolicy", generator.LabelTriggerName: ns.Name, generator.LabelTriggerUID: string(ns.UID),
	}
	for k, v := range want {
		if got := cm.Labels[k]; got != v {
			t.Errorf("label %s = %q, want %q", k, got, v)
		}
	}
	testkit.Eventually(t, 15*time.Second, "the cloned ConfigMap and the ClusterPolicy's", func() error {
		clone, err := kube.CoreV1().ConfigMaps(ns.Name).Get(ctx, "shared", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if clone.Data["motd"] != "hello" || clone.Labels["kind"] != "shared" {
			return fmt.Errorf("clone %v %v", clone.Labels, clone.Data)
		}
		classic, err := kube.CoreV1().ConfigMaps(ns.Name).Get(ctx, "defaults", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if classic.Labels[generator.LabelPolicyKind] != "" || classic.Labels[generator.LabelRuleName] != "defaults-configmap" {
			return fmt.Errorf("the ClusterPolicy's ConfigMap: labels %v", classic.Labels)
		}
		return nil
	})

	// A MutatingPolicy with mutateExisting: the webhook queues the work
	// for the trigger, the generator patches the existing targets its
	// selector picks, and leaves the others.
	for name, labels := range map[string]map[string]string{"synced": {"sync": "yes"}, "unsynced": nil} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: name, Labels: labels}}
		if _, err := kube.CoreV1().Secrets(ns.Name).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kube.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "dictionary"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the synced Secret stamped", func() error {
		sec, err := kube.CoreV1().Secrets(ns.Name).Get(ctx, "synced", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if want := ns.Name + "/dictionary"; sec.Annotations["stamped-by"] != want {
			return fmt.Errorf("annotations %v, want stamped-by %s", sec.Annotations, want)
		}
		return nil
	})
	if sec, err := kube.CoreV1().Secrets(ns.Name).Get(ctx, "unsynced", metav1.GetOptions{}); err != nil || sec.Annotations["stamped-by"] != "" {
		t.Errorf("the Secret the selector leaves out: %v %v", err, sec.Annotations)
	}

	// A subresource target: the Pod's status is written through
	// pods/status.
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "stamped", Labels: map[string]string{"stamp": "yes"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/app:1"}}},
	}
	// (No controller makes the namespace's default ServiceAccount here.)
	if _, err := kube.CoreV1().ServiceAccounts(ns.Name).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Pods(ns.Name).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(ns.Name).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "stamp-status"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 20*time.Second, "the Pod's status stamped", func() error {
		p, err := kube.CoreV1().Pods(ns.Name).Get(ctx, "stamped", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Message != "stamped by stamp-status" {
			return fmt.Errorf("status message %q", p.Status.Message)
		}
		return nil
	})
}
