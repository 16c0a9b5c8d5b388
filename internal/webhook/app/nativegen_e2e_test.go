package app_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
	"github.com/verdict-dev/verdict/internal/webhook/nativegen"
)

// generatedVPol asks to be enforced by the API server: no autogen for
// Pod controllers, no Kyverno function.
const generatedVPol = `
apiVersion: verdict.dev/v1
kind: ValidatingPolicy
metadata:
  name: require-owner
spec:
  validationActions: [Deny]
  autogen:
    podControllers: {controllers: []}
    validatingAdmissionPolicy: {enabled: true}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  validations:
  - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
    messageExpression: "'the label owner is required on ' + object.metadata.name"
`

// kyvernoOnlyVPol asks too, but calls a function of Kyverno's.
const kyvernoOnlyVPol = `
apiVersion: verdict.dev/v1
kind: ValidatingPolicy
metadata:
  name: hashed-names
spec:
  validationActions: [Audit]
  autogen:
    podControllers: {controllers: []}
    validatingAdmissionPolicy: {enabled: true}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  validations:
  - expression: "sha256(object.metadata.name) != ''"
`

// TestE2EGeneratedAdmissionPolicy: with the generation enabled, a
// ValidatingPolicy that asks for it becomes a ValidatingAdmissionPolicy
// and binding in the real API server (owned by the policy, labelled,
// skipping the excluded namespaces), its status says generated, and
// Verdict's webhooks leave it out; with every webhook replica stopped,
// the API server still denies a Pod without the label, with the
// policy's message, and admits one with it, and denies nothing in
// kube-system. A policy calling one of Kyverno's functions is not
// generated and its status says why. Turning the request off deletes the
// generated policy.
func TestE2EGeneratedAdmissionPolicy(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	// newEnv's ClusterPolicies register webhooks for Pods that fail
	// closed: without them, the stopped webhook is out of the picture.
	for _, name := range []string{"disallow-privileged", "require-team-label"} {
		if err := e.dyn.Resource(policycache.ClusterPolicies).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	vpols := e.dyn.Resource(policycache.ValidatingPolicies)
	for _, y := range []string{generatedVPol, kyvernoOnlyVPol} {
		if _, err := vpols.Create(ctx, testkit.Unstructured(t, y), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	r := e.startReplica(t, "replica-a", "", func(c *webhookapp.Config) { c.GenerateAdmissionPolicies = true })

	vaps := e.dyn.Resource(policycache.ValidatingAdmissionPolicies)
	testkit.Eventually(t, 60*time.Second, "the generated policy and its status", func() error {
		vap, err := vaps.Get(ctx, "require-owner", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if vap.GetLabels()[nativegen.LabelGeneratedFrom] != "require-owner" || len(vap.GetOwnerReferences()) != 1 || vap.GetOwnerReferences()[0].Kind != "ValidatingPolicy" {
			return fmt.Errorf("labels %v, owners %v", vap.GetLabels(), vap.GetOwnerReferences())
		}
		if _, err := e.dyn.Resource(policycache.ValidatingAdmissionPolicyBindings).Get(ctx, "require-owner", metav1.GetOptions{}); err != nil {
			return err
		}
		return statusIs(ctx, e, "require-owner", true, "enforced by the API server")
	})
	testkit.Eventually(t, 30*time.Second, "the other policy's status", func() error {
		return statusIs(ctx, e, "hashed-names", false, "not generated: the API server could not evaluate it")
	})
	if _, err := vaps.Get(ctx, "hashed-names", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a ValidatingAdmissionPolicy for a policy the API server cannot evaluate: %v", err)
	}
	// Verdict's webhooks leave the generated policy out (the TTL label's
	// guard, on every resource, is called only for objects with the
	// label).
	testkit.Eventually(t, 30*time.Second, "no webhook for Pods", func() error {
		cfg, err := e.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, "verdict-validating", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, w := range cfg.Webhooks {
			for _, rule := range w.Rules {
				for _, res := range rule.Resources {
					if res == "pods" {
						return fmt.Errorf("webhook %s still receives pods", w.Name)
					}
				}
			}
		}
		return nil
	})

	r.stop(t)
	pods := e.kube.CoreV1().Pods("team")
	testkit.Eventually(t, 30*time.Second, "the API server enforces the policy alone", func() error {
		_, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "unowned"},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
		}, metav1.CreateOptions{})
		switch {
		case err == nil:
			_ = pods.Delete(ctx, "unowned", metav1.DeleteOptions{})
			return errors.New("admitted")
		case !strings.Contains(err.Error(), "the label owner is required on unowned"):
			return fmt.Errorf("refused with %w", err)
		}
		return nil
	})
	if _, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "owned", Labels: map[string]string{"owner": "team"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a Pod with the label: %v", err)
	}
	if _, err := e.kube.CoreV1().ServiceAccounts("kube-system").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().Pods("kube-system").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "system-unowned"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a Pod in kube-system, which no Verdict policy reaches: %v", err)
	}

	// The policy no longer asks: the generated one goes. (The change
	// passes Verdict's policy webhook: once the new replica leads, it
	// points the webhooks at itself.)
	e.startReplica(t, "replica-b", "", func(c *webhookapp.Config) { c.GenerateAdmissionPolicies = true })
	testkit.Eventually(t, 60*time.Second, "the request turned off", func() error {
		cur, err := vpols.Get(ctx, "require-owner", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := unstructured.SetNestedField(cur.Object, false, "spec", "autogen", "validatingAdmissionPolicy", "enabled"); err != nil {
			return err
		}
		_, err = vpols.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	})
	testkit.Eventually(t, 60*time.Second, "the generated policy deleted", func() error {
		if _, err := vaps.Get(ctx, "require-owner", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%w)", err)
		}
		return statusIs(ctx, e, "require-owner", false, "not generated: autogen.validatingAdmissionPolicy.enabled is not true")
	})
}

// statusIs checks a ValidatingPolicy's status.generated and the message
// of its ValidatingAdmissionPolicyGenerated condition.
func statusIs(ctx context.Context, e *env, name string, generated bool, message string) error {
	u, err := e.dyn.Resource(policycache.ValidatingPolicies).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	got, _, _ := unstructured.NestedBool(u.Object, "status", "generated")
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == nativegen.ConditionGenerated {
			msg, _ := m["message"].(string)
			if got != generated || !strings.Contains(msg, message) {
				return fmt.Errorf("generated %v, message %q; want %v, %q", got, msg, generated, message)
			}
			return nil
		}
	}
	return fmt.Errorf("no %s condition in %v", nativegen.ConditionGenerated, u.Object["status"])
}
