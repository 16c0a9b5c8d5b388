package scanner_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// TestE2EScanOfAKindItMayNotRead: a policy validating Pods and Secrets,
// scanned by a reporter that may read Pods but not Secrets (the chart's
// default: reporter.rbac.readSecrets off). The scan says so, in
// verdict_scanner_skipped_total{reason="forbidden"} and a warning, scans
// the Pods and finishes; a stored result of a Secret (an admission's) is
// left as it is, neither retracted nor purged. Before, the list of
// Secrets failed the whole scan item, which was retried and then
// dead-lettered, and no Pod was scanned after it.
func TestE2EScanOfAKindItMayNotRead(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := e.Namespace("scan-forbidden-").Name
	pod := createPod(e, ns, "app", nil)
	secret, err := e.Kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	name := "labels-" + ns
	pol := createPolicy(e, fmt.Sprintf(`apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata:
  name: %[1]s
spec:
  validationFailureAction: Audit
  background: true
  rules:
  - name: require-label
    match:
      any:
      - resources: {kinds: [Pod, Secret], namespaces: [%[2]s]}
    validate:
      message: "label app is required"
      pattern: {metadata: {labels: {app: "?*"}}}
`, name, ns))
	// The Secret's admission result, from before.
	admitted := bus.ResultEvent{
		Resource: reportertest.RefOf("v1", "Secret", secret),
		Policy:   bus.PolicyRef{Key: name, UID: string(pol.GetUID()), ResourceVersion: pol.GetResourceVersion()},
		Rules:    reportertest.Rules(engine.StatusFail), Timestamp: time.Now().UTC(), Admission: true, RequestUID: "admission",
	}
	e.Publish(admitted)

	rc := e.As(
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch"}},
	)
	e.Check = e.CheckerAs(rc)
	r := startScannerWith(e, dynamic.NewForConfigOrDie(rc))
	testkit.Eventually(t, 30*time.Second, "the policy scanned, Secrets skipped", func() error {
		done := reportertest.Counter(t, r.reg, "verdict_scanner_items_total", "done")
		skipped := reportertest.Counter(t, r.reg, "verdict_scanner_skipped_total", "forbidden")
		if _, ok := policyResults(e, name)[string(pod.UID)]; !ok || done < 1 || skipped < 1 {
			return fmt.Errorf("Pod's result %v, %v items done, %v kinds skipped as forbidden", ok, done, skipped)
		}
		return nil
	})
	got := policyResults(e, name)[string(secret.UID)]
	if got.Retracted != "" || !got.Admission || got.RequestUID != "admission" {
		t.Errorf("the Secret's stored result became %+v; want the admission's, untouched", got)
	}
	if n := reportertest.Counter(t, r.reg, "verdict_scanner_items_total", "retry"); n != 0 {
		t.Errorf("%v scan items retried", n)
	}
}
