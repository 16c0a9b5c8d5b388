package app_test

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
)

// A ValidatingPolicy of Kyverno's policy library (require-labels from
// other-vpol), with only its apiVersion changed.
const requireTeamVPol = `
apiVersion: verdict.dev/v1
kind: ValidatingPolicy
metadata:
  name: require-team
spec:
  validationActions: [Deny]
  evaluation:
    background: {enabled: true}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [pods]
  matchConditions:
  - name: not-probes
    expression: "!object.metadata.name.startsWith('probe-')"
  - name: namespace-not-exempt
    expression: "namespaceObject.metadata.?annotations['policy.example.com/exempt'].orValue('') != 'true'"
  validations:
  - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
    messageExpression: "'the label team is required on ' + object.metadata.name"
`

// celException is a PolicyException of policies.kyverno.io, apiVersion
// changed.
const celException = `
apiVersion: verdict.dev/v1
kind: PolicyException
metadata:
  name: exempt-by-name
  namespace: team
spec:
  policyRefs:
  - name: require-team
    kind: ValidatingPolicy
  matchConditions:
  - name: by-name
    expression: "object.metadata.name == 'exempted'"
`

// TestE2EValidatingPolicy: through the real API server, a ValidatingPolicy
// in Verdict's group denies a Pod without the label (with its message)
// and admits one with it, admits it in a namespace whose annotation (read
// through namespaceObject) exempts it, denies a Deployment whose pod template lacks it
// (its autogen variant, registered from the rewritten matchConstraints),
// admits a Pod a CEL PolicyException exempts, and a ValidatingPolicy (or
// a PolicyException) whose CEL does not compile is refused at creation
// with the expression's path and CEL's error.
func TestE2EValidatingPolicy(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	vpols := e.dyn.Resource(policycache.ValidatingPolicies)
	if _, err := vpols.Create(ctx, testkit.Unstructured(t, requireTeamVPol), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startReplica(t, "replica-a", "", nil)
	waitEnforced(t, e.kube)

	pods := e.kube.CoreV1().Pods("team")
	const denied = "Policy require-team failed: the label team is required on unlabelled"
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool {
		_, err := pods.Create(ctx, pod("unlabelled", false), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), denied)
	})
	if _, err := pods.Create(ctx, pod("unlabelled", false), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "require-team") {
		t.Fatalf("denial does not name the policy: %v", err)
	}
	// The namespace's annotations reach the policy as namespaceObject:
	// in an exempt namespace, the same Pod is admitted.
	exempt := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "exempt", Annotations: map[string]string{"policy.example.com/exempt": "true"}}}
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, exempt, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// No controller manager: the Pods' ServiceAccount is made by hand.
	if _, err := e.kube.CoreV1().ServiceAccounts("exempt").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool {
		p := pod("unlabelled", false)
		p.Namespace = "exempt"
		_, err := e.kube.CoreV1().Pods("exempt").Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil
	})
	labelled := pod("labelled", false)
	labelled.Labels = map[string]string{"team": "payments"}
	if _, err := pods.Create(ctx, labelled, metav1.CreateOptions{}); err != nil {
		t.Fatalf("labelled Pod refused: %v", err)
	}

	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
				Spec:       pod("x", false).Spec,
			},
		},
	}
	_, err := e.kube.AppsV1().Deployments("team").Create(ctx, deploy, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "the label team is required on web") {
		t.Fatalf("Deployment without the label in its template: %v", err)
	}
	deploy.Spec.Template.Labels["team"] = "payments"
	if _, err := e.kube.AppsV1().Deployments("team").Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatalf("labelled Deployment refused: %v", err)
	}

	// A PolicyException of the CEL shape (Kyverno's policies.kyverno.io
	// one, with Verdict's apiVersion) exempts the Pods its condition
	// selects from the ValidatingPolicy it names; one whose condition
	// does not compile is refused.
	excs := e.dyn.Resource(policycache.PolicyExceptions).Namespace("team")
	if _, err := excs.Create(ctx, testkit.Unstructured(t, celException), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool {
		_, err := pods.Create(ctx, pod("exempted", false), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err == nil
	})
	if _, err := pods.Create(ctx, pod("not-exempted", false), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}); err == nil || !strings.Contains(err.Error(), "require-team") {
		t.Fatalf("a Pod the exception does not select: %v", err)
	}
	badExc := strings.Replace(strings.Replace(celException, "name: exempt-by-name", "name: broken-exception", 1), "object.metadata.name == 'exempted'", "object.metadata.name ==", 1)
	if _, err := excs.Create(ctx, testkit.Unstructured(t, badExc), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "spec.matchConditions[0].expression") {
		t.Fatalf("a PolicyException whose condition does not compile: %v", err)
	}

	broken := strings.Replace(strings.Replace(requireTeamVPol, "name: require-team", "name: broken", 1),
		`"has(object.metadata.labels) && 'team' in object.metadata.labels"`, `"object.metadata.labels.all(k, k"`, 1)
	_, err = vpols.Create(ctx, testkit.Unstructured(t, broken), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.validations[0].expression") || !strings.Contains(err.Error(), "Syntax error") {
		t.Fatalf("a ValidatingPolicy that does not compile: %v", err)
	}
}
