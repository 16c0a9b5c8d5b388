package app_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/generator"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
)

// syncDefaults gives every new Namespace named sync-* a default-deny
// NetworkPolicy and a ConfigMap, kept in step with the policy.
const syncDefaults = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: sync-defaults}
spec:
  rules:
  - name: deny-all
    match: {any: [{resources: {kinds: [Namespace], names: ["sync-*"]}}]}
    generate:
      apiVersion: networking.k8s.io/v1
      kind: NetworkPolicy
      name: default-deny
      namespace: "{{request.object.metadata.name}}"
      synchronize: true
      data:
        spec: {podSelector: {}, policyTypes: [Ingress, Egress]}
  - name: settings
    match: {any: [{resources: {kinds: [Namespace], names: ["sync-*"]}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: settings
      namespace: "{{request.object.metadata.name}}"
      synchronize: true
      data:
        data: {tier: standard}
`

// secretPerApp: a ConfigMap labelled app=... in namespace apps gets a
// Secret of the same name; with synchronize, the Secret goes with its
// ConfigMap and with the policy.
const secretPerApp = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: secret-per-app}
spec:
  rules:
  - name: secret
    match: {any: [{resources: {kinds: [ConfigMap], namespaces: [apps], selector: {matchLabels: {app: "?*"}}}}]}
    generate:
      apiVersion: v1
      kind: Secret
      name: "{{request.object.metadata.name}}"
      namespace: apps
      synchronize: true
      data:
        stringData: {app: "{{request.object.metadata.labels.app}}"}
`

// keepOnDelete is synchronized but keeps what it made when it is deleted.
const keepOnDelete = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: keep-on-delete}
spec:
  rules:
  - name: marker
    match: {any: [{resources: {kinds: [ConfigMap], namespaces: [apps], selector: {matchLabels: {app: "?*"}}}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: "{{request.object.metadata.name}}-marker"
      namespace: apps
      synchronize: true
      orphanDownstreamOnPolicyDelete: true
      data:
        data: {kept: "yes"}
`

// quotaExisting is created after the Namespaces it applies to: with
// generateExisting they get their ResourceQuota too.
const quotaExisting = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: quota-existing}
spec:
  rules:
  - name: quota
    match: {any: [{resources: {kinds: [Namespace], names: ["old-*"]}}]}
    generate:
      generateExisting: true
      apiVersion: v1
      kind: ResourceQuota
      name: quota
      namespace: "{{request.object.metadata.name}}"
      data:
        spec: {hard: {pods: "10"}}
`

// annotateExisting is a mutate-existing policy applied to what exists
// when it is created (mutateExistingOnPolicyUpdate).
const annotateExisting = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: annotate-existing}
spec:
  mutateExistingOnPolicyUpdate: true
  rules:
  - name: annotate
    match: {any: [{resources: {kinds: [ConfigMap], names: [index], namespaces: [apps]}}]}
    mutate:
      targets:
      - {apiVersion: v1, kind: Secret, name: indexed, namespace: apps}
      patchStrategicMerge:
        metadata: {annotations: {indexed-by: "{{request.object.metadata.name}}"}}
`

// TestE2ESynchronize runs the webhook and the generator against a real
// kube-apiserver and JetStream and follows synchronized generate rules
// through the life of their triggers and policies: a new Namespace gets
// its NetworkPolicy and ConfigMap; the ConfigMap deleted comes back, and
// edited is put back; the policy's data edited changes it; the trigger
// deleted takes its downstream along (a Namespace, which has no namespace
// controller here, and a ConfigMap); the policy deleted takes what it made
// unless orphanDownstreamOnPolicyDelete; generateExisting and
// mutateExistingOnPolicyUpdate apply a new policy to what exists.
func TestE2ESynchronize(t *testing.T) {
	cp := controlplane.StartForTest(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	for _, ns := range []string{"verdict", "apps", "old-a", "old-b"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cpols := dyn.Resource(policycache.ClusterPolicies)
	for _, y := range []string{syncDefaults, secretPerApp, keepOnDelete} {
		if _, err := cpols.Create(ctx, testkit.Unstructured(t, y), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	_, probe := startStack(t, cp)

	ns, cm := firstGenerated(t, kube, "sync", "settings")
	// The other rule's item is worked on its own.
	testkit.Eventually(t, 15*time.Second, "the NetworkPolicy", func() error {
		np, err := kube.NetworkingV1().NetworkPolicies(ns.Name).Get(ctx, "default-deny", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(np.Spec.PolicyTypes) != 2 || np.Labels[generator.LabelTriggerUID] != string(ns.UID) {
			t.Fatalf("NetworkPolicy %+v", np)
		}
		return nil
	})
	settings := func(want string) func() error {
		return func() error {
			got, err := kube.CoreV1().ConfigMaps(ns.Name).Get(ctx, "settings", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.Data["tier"] != want {
				return fmt.Errorf("tier %q", got.Data["tier"])
			}
			return nil
		}
	}

	t.Run("a deleted downstream comes back", func(t *testing.T) {
		if err := kube.CoreV1().ConfigMaps(ns.Name).Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 15*time.Second, "the ConfigMap back", func() error {
			got, err := kube.CoreV1().ConfigMaps(ns.Name).Get(ctx, "settings", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got.UID == cm.UID {
				return fmt.Errorf("still the old object")
			}
			return settings("standard")()
		})
	})

	t.Run("an edited downstream is put back", func(t *testing.T) {
		got, err := kube.CoreV1().ConfigMaps(ns.Name).Get(ctx, "settings", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Data["tier"] = "hacked"
		if _, err := kube.CoreV1().ConfigMaps(ns.Name).Update(ctx, got, metav1.UpdateOptions{FieldManager: "someone"}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 15*time.Second, "the ConfigMap repaired", settings("standard"))
	})

	t.Run("the policy's data changes the downstream", func(t *testing.T) {
		pol, err := cpols.Get(ctx, "sync-defaults", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rules, _, _ := unstructured.NestedSlice(pol.Object, "spec", "rules")
		if err := unstructured.SetNestedField(rules[1].(map[string]any), "gold", "generate", "data", "data", "tier"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedSlice(pol.Object, rules, "spec", "rules"); err != nil {
			t.Fatal(err)
		}
		if _, err := cpols.Update(ctx, pol, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 20*time.Second, "the ConfigMap updated", settings("gold"))
	})

	t.Run("deleting the trigger removes its downstream", func(t *testing.T) {
		// A ConfigMap trigger: its Secret goes with it.
		app, err := kube.CoreV1().ConfigMaps("apps").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"app": "shop"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 15*time.Second, "the Secret of the app", func() error {
			_, err := kube.CoreV1().Secrets("apps").Get(ctx, "shop", metav1.GetOptions{})
			return err
		})
		if err := kube.CoreV1().ConfigMaps("apps").Delete(ctx, app.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 15*time.Second, "the Secret gone with its ConfigMap", func() error {
			if _, err := kube.CoreV1().Secrets("apps").Get(ctx, "shop", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("secret still there: %w", err)
			}
			return nil
		})
		// The Namespace: no namespace controller runs here, so what is
		// left in it after its deletion is what the generator removed.
		if err := kube.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 15*time.Second, "the Namespace's downstream removed", func() error {
			if _, err := kube.NetworkingV1().NetworkPolicies(ns.Name).Get(ctx, "default-deny", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("NetworkPolicy: %w", err)
			}
			if _, err := kube.CoreV1().ConfigMaps(ns.Name).Get(ctx, "settings", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("ConfigMap: %w", err)
			}
			return nil
		})
		if got := metric(t, probe, `verdict_generator_resources_deleted_total{kind="NetworkPolicy"}`); got != 1 {
			t.Errorf("NetworkPolicies deleted = %v, want 1", got)
		}
	})

	t.Run("deleting the policy removes its downstream unless orphaned", func(t *testing.T) {
		if _, err := kube.CoreV1().ConfigMaps("apps").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cart", Labels: map[string]string{"app": "cart"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 15*time.Second, "the Secret and the marker of the app", func() error {
			if _, err := kube.CoreV1().Secrets("apps").Get(ctx, "cart", metav1.GetOptions{}); err != nil {
				return err
			}
			_, err := kube.CoreV1().ConfigMaps("apps").Get(ctx, "cart-marker", metav1.GetOptions{})
			return err
		})
		for _, name := range []string{"secret-per-app", "keep-on-delete"} {
			if err := cpols.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		testkit.Eventually(t, 15*time.Second, "the Secret gone with its policy", func() error {
			if _, err := kube.CoreV1().Secrets("apps").Get(ctx, "cart", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("secret still there: %w", err)
			}
			return nil
		})
		// The orphaning policy's marker stays; the policyDeleted items are
		// both done by now (one per replica-seen deletion, in order).
		time.Sleep(time.Second)
		if _, err := kube.CoreV1().ConfigMaps("apps").Get(ctx, "cart-marker", metav1.GetOptions{}); err != nil {
			t.Fatalf("the orphaned marker is gone: %v", err)
		}
	})

	t.Run("generateExisting and mutateExistingOnPolicyUpdate apply to what exists", func(t *testing.T) {
		if _, err := kube.CoreV1().Secrets("apps").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "indexed"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.CoreV1().ConfigMaps("apps").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "index"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, y := range []string{quotaExisting, annotateExisting} {
			if _, err := cpols.Create(ctx, testkit.Unstructured(t, y), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		testkit.Eventually(t, 20*time.Second, "quotas in the existing Namespaces", func() error {
			for _, ns := range []string{"old-a", "old-b"} {
				if _, err := kube.CoreV1().ResourceQuotas(ns).Get(ctx, "quota", metav1.GetOptions{}); err != nil {
					return err
				}
			}
			return nil
		})
		if _, err := kube.CoreV1().ResourceQuotas("apps").Get(ctx, "quota", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a Namespace the rule does not match got a quota: %v", err)
		}
		testkit.Eventually(t, 20*time.Second, "the existing target annotated", func() error {
			s, err := kube.CoreV1().Secrets("apps").Get(ctx, "indexed", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if s.Annotations["indexed-by"] != "index" {
				return fmt.Errorf("annotations %v", s.Annotations)
			}
			return nil
		})
	})
}

// firstGenerated creates Namespaces named prefix-0, prefix-1, ... until
// one gets the ConfigMap cmName generated into it (Namespaces created
// before the webhook is registered are not seen), and returns both.
func firstGenerated(t *testing.T, kube kubernetes.Interface, prefix, cmName string) (*corev1.Namespace, *corev1.ConfigMap) {
	t.Helper()
	ctx := t.Context()
	deadline := time.Now().Add(45 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", prefix, i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for wait := time.Now().Add(3 * time.Second); time.Now().Before(wait); time.Sleep(100 * time.Millisecond) {
			if cm, err := kube.CoreV1().ConfigMaps(ns.Name).Get(ctx, cmName, metav1.GetOptions{}); err == nil {
				return ns, cm
			}
		}
	}
	t.Fatalf("no ConfigMap %s generated into a new Namespace", cmName)
	return nil, nil
}
