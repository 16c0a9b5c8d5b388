package app_test

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
)

// A tenant's Policy in team: no ConfigMap named forbidden-*.
const tenantForbidden = `apiVersion: verdict.dev/v1
kind: Policy
metadata: {name: no-forbidden, namespace: team}
spec:
  validationFailureAction: Enforce
  webhookTimeoutSeconds: 30
  rules:
  - name: r
    match: {any: [{resources: {kinds: [ConfigMap], names: [forbidden-*]}}]}
    validate: {message: "team forbids it", deny: {}}
`

// A tenant's PolicyException in other, naming privileged Pods anywhere.
const tenantException = `apiVersion: verdict.dev/v1
kind: PolicyException
metadata: {name: privileged-anywhere, namespace: other}
spec:
  exceptions: [{policyName: disallow-privileged, ruleNames: [privileged-containers]}]
  match: {any: [{resources: {kinds: [Pod], names: [priv-*]}}]}
`

// TestE2ETenantStaysInItsNamespace runs the webhook service against the
// real API server with a tenant's Policy in team and another tenant's
// PolicyException in other: the Policy is enforced in team through its
// own webhook and nowhere else; the exception exempts privileged Pods in
// other and not in team.
func TestE2ETenantStaysInItsNamespace(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "other"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.kube.CoreV1().ServiceAccounts("other").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(policycache.Policies).Namespace("team").Create(ctx, testkit.Unstructured(t, tenantForbidden), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(policycache.PolicyExceptions).Namespace("other").Create(ctx, testkit.Unstructured(t, tenantException), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startReplica(t, "replica-a", "", nil)
	waitEnforced(t, e.kube)
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	configMap := func(ns string) error {
		_, err := e.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "forbidden-1"}}, dryRun)
		return err
	}
	privileged := func(ns string) error {
		p := pod("priv-1", true)
		p.Namespace = ns
		_, err := e.kube.CoreV1().Pods(ns).Create(ctx, p, dryRun)
		return err
	}
	// The tenant's webhook is registered and its Policy enforced in team.
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool {
		err := configMap("team")
		return err != nil && strings.Contains(err.Error(), "team forbids it")
	})
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool { return privileged("other") == nil })
	if err := configMap("other"); err != nil {
		t.Errorf("the tenant's Policy reached another namespace: %v", err)
	}
	if err := privileged("team"); err == nil || !strings.Contains(err.Error(), "Privileged mode is disallowed") {
		t.Errorf("another namespace's exception exempted a privileged Pod in team: %v", err)
	}
}
