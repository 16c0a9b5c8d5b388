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

// Two MutatingPolicies of Kyverno's policy library (other-mpol), with only
// their apiVersion changed: always-pull-images (an ApplyConfiguration,
// autogen on for Deployments) and add-tolerations (a JSONPatch).
const alwaysPullMPol = `
apiVersion: verdict.dev/v1
kind: MutatingPolicy
metadata:
  name: always-pull-images
spec:
  autogen:
    podControllers:
      controllers: [deployments]
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["pods"]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: |
        Object{
          spec: Object.spec{
            containers: object.spec.containers.map(container,
              Object.spec.containers{
                name: container.name,
                imagePullPolicy: "Always"
              }
            )
          }
        }
`

const addTolerationsMPol = `
apiVersion: verdict.dev/v1
kind: MutatingPolicy
metadata:
  name: add-tolerations
spec:
  matchConstraints:
    resourceRules:
      - apiGroups: [""]
        apiVersions: ["v1"]
        operations: ["CREATE", "UPDATE"]
        resources: ["pods"]
  matchConditions:
    - name: skip-if-toleration-exists
      expression: |
        !has(object.spec.tolerations) ||
        !object.spec.tolerations.exists(t, t.key == "org.com/role")
  mutations:
    - patchType: JSONPatch
      jsonPatch:
        expression: |
          !has(object.spec.tolerations) ?
            [JSONPatch{op: "add", path: "/spec/tolerations", value: [dyn({"key": "org.com/role", "operator": "Equal", "value": "service", "effect": "NoSchedule"})]}] :
            [JSONPatch{op: "add", path: "/spec/tolerations/-", value: dyn({"key": "org.com/role", "operator": "Equal", "value": "service", "effect": "NoSchedule"})}]
`

// TestE2EMutatingPolicy: through the real API server, MutatingPolicies in
// Verdict's group mutate what is stored: a Pod gets imagePullPolicy
// Always on its containers (ApplyConfiguration) and the toleration
// (JSONPatch), on top of the ClusterPolicy's label; a Deployment's pod
// template gets the pull policy (the autogen variant, registered from its
// rewritten matchConstraints); a MutatingPolicy whose CEL does not compile
// is refused at creation with the expression's path.
func TestE2EMutatingPolicy(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, mutateLabel), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	mpols := e.dyn.Resource(policycache.MutatingPolicies)
	for _, y := range []string{alwaysPullMPol, addTolerationsMPol} {
		if _, err := mpols.Create(ctx, testkit.Unstructured(t, y), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.startReplica(t, "replica-a", "", nil)
	waitEnforced(t, e.kube)

	pods := e.kube.CoreV1().Pods("team")
	var stored *corev1.Pod
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool {
		p, err := pods.Create(ctx, pod("mutated", false), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			t.Logf("create: %v", err)
			return false
		}
		stored = p
		return p.Spec.Containers[0].ImagePullPolicy == corev1.PullAlways && len(p.Spec.Tolerations) > 0
	})
	p, err := pods.Create(ctx, pod("mutated", false), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored = p
	if got := stored.Spec.Containers[0].ImagePullPolicy; got != corev1.PullAlways {
		t.Errorf("imagePullPolicy %q, want Always", got)
	}
	found := false
	for _, tol := range stored.Spec.Tolerations {
		if tol.Key == "org.com/role" && tol.Value == "service" && tol.Effect == corev1.TaintEffectNoSchedule {
			found = true
		}
	}
	if !found {
		t.Errorf("tolerations %+v lack org.com/role", stored.Spec.Tolerations)
	}
	if stored.Labels["verdict.dev/checked"] != "yes" {
		t.Errorf("labels %v: the ClusterPolicy's mutation is lost", stored.Labels)
	}

	deploy := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       pod("x", false).Spec,
			},
		},
	}
	d, err := e.kube.AppsV1().Deployments("team").Create(ctx, deploy, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := d.Spec.Template.Spec.Containers[0].ImagePullPolicy; got != corev1.PullAlways {
		t.Errorf("Deployment template imagePullPolicy %q, want Always (autogen)", got)
	}
	if len(d.Spec.Template.Spec.Tolerations) != 0 {
		t.Errorf("add-tolerations has no autogen for Deployments, but the template has %+v", d.Spec.Template.Spec.Tolerations)
	}

	broken := strings.Replace(strings.Replace(alwaysPullMPol, "name: always-pull-images", "name: broken", 1),
		`imagePullPolicy: "Always"`, `imagePullPolicy: "Always"(`, 1)
	_, err = mpols.Create(ctx, testkit.Unstructured(t, broken), metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.mutations[0].applyConfiguration.expression") || !strings.Contains(err.Error(), "Syntax error") {
		t.Fatalf("a MutatingPolicy that does not compile: %v", err)
	}
}
