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

// teamSettings is a synchronized GeneratingPolicy: each Namespace named
// team-* that has not opted out gets a ConfigMap named after its tier
// label.
const teamSettings = `apiVersion: verdict.dev/v1
kind: GeneratingPolicy
metadata: {name: team-settings}
spec:
  evaluation: {synchronize: {enabled: true}}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [namespaces]
  matchConditions:
  - name: teams-that-opt-in
    expression: "object.metadata.name.startsWith('team-') && object.metadata.?labels['opt-out'].orValue('') != 'true'"
  variables:
  - name: tier
    expression: "object.metadata.?labels['tier'].orValue('standard')"
  - name: settings
    expression: >-
      [{"kind": dyn("ConfigMap"), "apiVersion": dyn("v1"),
        "metadata": dyn({"name": "settings-" + string(variables.tier), "namespace": string(object.metadata.name)}),
        "data": dyn({"tier": string(variables.tier)})}]
  generate:
  - expression: generator.Apply(object.metadata.name, variables.settings)
`

// oldMarkers is a GeneratingPolicy with generateExisting, created after
// the Namespaces it applies to.
const oldMarkers = `apiVersion: verdict.dev/v1
kind: GeneratingPolicy
metadata: {name: old-markers}
spec:
  evaluation: {generateExisting: {enabled: true}}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [namespaces]
  matchConditions:
  - name: old-namespaces
    expression: "object.metadata.name.startsWith('old-')"
  generate:
  - expression: >-
      generator.Apply(object.metadata.name, [{"kind": dyn("ConfigMap"), "apiVersion": dyn("v1"),
        "metadata": dyn({"name": "marker", "namespace": string(object.metadata.name)}), "data": dyn({"seen": "yes"})}])
`

// TestE2EGeneratingPolicySynchronize follows a synchronized
// GeneratingPolicy through the real kube-apiserver, the webhook and the
// generator: its status records the kinds it generates before they are
// written; a deleted downstream is restored and an edited one put back;
// a trigger changed so that it generates another object has the old one
// removed, and one changed so that it no longer matches loses its
// downstream; a deleted trigger, and the deleted policy, take theirs
// along. A GeneratingPolicy with generateExisting applies to the
// Namespaces that exist when it is created.
func TestE2EGeneratingPolicySynchronize(t *testing.T) {
	cp := controlplane.StartForTest(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	for _, ns := range []string{"verdict", "apps", "old-a", "old-b"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gpols := dyn.Resource(policycache.GeneratingPolicies)
	if _, err := gpols.Create(ctx, testkit.Unstructured(t, teamSettings), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	startStack(t, cp)

	ns, first := firstGenerated(t, kube, "team", "settings-standard")
	// Two more triggers: one to delete, one whose policy is deleted.
	other, _ := firstGenerated(t, kube, "team-b", "settings-standard")
	last, _ := firstGenerated(t, kube, "team-c", "settings-standard")
	if first.Labels[generator.LabelPolicyKind] != "GeneratingPolicy" || first.Labels[generator.LabelTriggerUID] != string(ns.UID) {
		t.Fatalf("labels %v", first.Labels)
	}
	pol, err := gpols.Get(ctx, "team-settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kinds, _, _ := unstructured.NestedSlice(pol.Object, "status", "downstreamKinds")
	if want := []any{map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}; fmt.Sprint(kinds) != fmt.Sprint(want) {
		t.Fatalf("status.downstreamKinds = %v, want %v", kinds, want)
	}
	gone := func(ns, name string) func() error {
		return func() error {
			if _, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("ConfigMap %s/%s still there (%w)", ns, name, err)
			}
			return nil
		}
	}
	tier := func(ns, name, want string) func() error {
		return func() error {
			cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data["tier"] != want {
				return fmt.Errorf("tier %q, want %q", cm.Data["tier"], want)
			}
			return nil
		}
	}
	label := func(t *testing.T, name, key, value string) {
		t.Helper()
		n, err := kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if n.Labels == nil {
			n.Labels = map[string]string{}
		}
		n.Labels[key] = value
		if _, err := kube.CoreV1().Namespaces().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("a deleted downstream is restored", func(t *testing.T) {
		if err := kube.CoreV1().ConfigMaps(ns.Name).Delete(ctx, "settings-standard", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 20*time.Second, "the ConfigMap back", func() error {
			cm, err := kube.CoreV1().ConfigMaps(ns.Name).Get(ctx, "settings-standard", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.UID == first.UID {
				return fmt.Errorf("still the old object")
			}
			return nil
		})
	})

	t.Run("an edited downstream is put back", func(t *testing.T) {
		cm, err := kube.CoreV1().ConfigMaps(ns.Name).Get(ctx, "settings-standard", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cm.Data["tier"] = "hacked"
		cm.Annotations = map[string]string{"noted-by": "someone"}
		if _, err := kube.CoreV1().ConfigMaps(ns.Name).Update(ctx, cm, metav1.UpdateOptions{FieldManager: "someone"}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 20*time.Second, "the ConfigMap repaired", tier(ns.Name, "settings-standard", "standard"))
		// Server-side apply (useServerSideApply, always): the fields the
		// policy does not write stay as their manager left them.
		cm, err = kube.CoreV1().ConfigMaps(ns.Name).Get(ctx, "settings-standard", metav1.GetOptions{})
		if err != nil || cm.Annotations["noted-by"] != "someone" {
			t.Fatalf("another manager's annotation: %v %v", err, cm.Annotations)
		}
	})

	t.Run("what a changed trigger no longer generates is removed", func(t *testing.T) {
		label(t, ns.Name, "tier", "gold")
		testkit.Eventually(t, 20*time.Second, "the gold settings", tier(ns.Name, "settings-gold", "gold"))
		testkit.Eventually(t, 20*time.Second, "the standard settings removed", gone(ns.Name, "settings-standard"))
	})

	t.Run("a trigger that stops matching loses its downstream", func(t *testing.T) {
		label(t, ns.Name, "opt-out", "true")
		testkit.Eventually(t, 20*time.Second, "the settings removed", gone(ns.Name, "settings-gold"))
	})

	t.Run("a deleted trigger takes its downstream along", func(t *testing.T) {
		// No namespace controller runs here: what is gone from the
		// Namespace after its deletion, the generator removed.
		if err := kube.CoreV1().Namespaces().Delete(ctx, other.Name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 20*time.Second, "the deleted Namespace's settings removed", gone(other.Name, "settings-standard"))
	})

	t.Run("the deleted policy takes its downstream along", func(t *testing.T) {
		if err := gpols.Delete(ctx, "team-settings", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 20*time.Second, "the settings removed with the policy", gone(last.Name, "settings-standard"))
	})

	t.Run("generateExisting applies to what exists", func(t *testing.T) {
		if _, err := gpols.Create(ctx, testkit.Unstructured(t, oldMarkers), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		testkit.Eventually(t, 30*time.Second, "markers in the existing Namespaces", func() error {
			for _, ns := range []string{"old-a", "old-b"} {
				if _, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, "marker", metav1.GetOptions{}); err != nil {
					return err
				}
			}
			return nil
		})
		if _, err := kube.CoreV1().ConfigMaps("apps").Get(ctx, "marker", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("a Namespace the policy does not match got a marker: %v", err)
		}
	})
}
