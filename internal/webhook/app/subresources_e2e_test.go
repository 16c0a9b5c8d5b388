package app_test

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
)

// Kyverno's sample policies for exec, scale and delete, with only their
// apiVersion changed.
const (
	denyExecByLabel = `
apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata:
  name: deny-exec-by-pod-label
spec:
  background: false
  rules:
  - name: deny-exec-by-label
    match:
      any:
      - resources:
          kinds: [Pod/exec]
    context:
    - name: podexeclabel
      apiCall:
        urlPath: "/api/v1/namespaces/{{request.namespace}}/pods/{{request.name}}"
        jmesPath: "metadata.labels.exec || ''"
    preconditions:
      all:
      - key: "{{ request.operation || 'BACKGROUND' }}"
        operator: Equals
        value: CONNECT
    validate:
      failureAction: Enforce
      message: Exec'ing into Pods protected with the label exec=false is forbidden.
      deny:
        conditions:
          all:
          - key: "{{ podexeclabel }}"
            operator: Equals
            value: "false"
`
	limitScale = `
apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata:
  name: limit-scale
spec:
  background: false
  rules:
  - name: at-most-four
    match:
      any:
      - resources:
          kinds: [Deployment/scale]
    validate:
      failureAction: Enforce
      message: "{{ request.name }} may not run more than 4 replicas, not {{ request.object.spec.replicas }}"
      deny:
        conditions:
          any:
          - key: "{{ request.object.spec.replicas }}"
            operator: GreaterThan
            value: 4
`
	keepProtected = `
apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata:
  name: keep-protected
spec:
  background: false
  rules:
  - name: no-delete
    match:
      any:
      - resources:
          kinds: [ConfigMap]
    preconditions:
      all:
      - key: "{{ request.operation || 'BACKGROUND' }}"
        operator: Equals
        value: DELETE
    validate:
      failureAction: Enforce
      message: "{{ request.oldObject.metadata.name }} is protected"
      deny:
        conditions:
          any:
          - key: "{{ request.oldObject.metadata.labels.protected || '' }}"
            operator: Equals
            value: "true"
`
)

// TestE2ESubresourcesAndDelete: through the real API server, a policy on
// Pod/exec denies an exec into a labelled Pod (the API server asks the
// webhook before it would reach a kubelet; the rule reads the Pod through
// request.namespace and request.name), a policy on Deployment/scale
// denies scaling beyond its limit, and a DELETE of a labelled object is
// denied with the rule's message; the same requests on other objects go
// through.
func TestE2ESubresourcesAndDelete(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	for _, y := range []string{denyExecByLabel, limitScale, keepProtected} {
		if _, err := e.dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, y), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	e.startReplica(t, "replica-a", "", nil)
	waitEnforced(t, e.kube)

	pods := e.kube.CoreV1().Pods("team")
	locked := pod("locked", false)
	locked.Labels = map[string]string{"exec": "false"}
	for _, p := range []*corev1.Pod{locked, pod("open", false)} {
		if _, err := pods.Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	exec := func(name string) error {
		return e.kube.CoreV1().RESTClient().Post().Namespace("team").Resource("pods").Name(name).SubResource("exec").
			Param("command", "sh").Param("stdout", "true").Do(ctx).Error()
	}
	const execDenied = "Exec'ing into Pods protected with the label exec=false is forbidden"
	// The registrar adds pods/exec (CONNECT) once the policy is in.
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool {
		err := exec("locked")
		return err != nil && strings.Contains(err.Error(), execDenied)
	})
	if err := exec("locked"); err == nil || !strings.Contains(err.Error(), "deny-exec-by-pod-label") {
		t.Fatalf("denial does not name the policy: %v", err)
	}
	// The other Pod gets past admission: the API server then fails to
	// reach a kubelet (there is none), for its own reasons.
	if err := exec("open"); err != nil && strings.Contains(err.Error(), "deny-exec-by-pod-label") {
		t.Fatalf("exec into an unlabelled Pod denied by the policy: %v", err)
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
	if _, err := e.kube.AppsV1().Deployments("team").Create(ctx, deploy, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scale := func(n int32) error {
		s := &autoscalingv1.Scale{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team"}, Spec: autoscalingv1.ScaleSpec{Replicas: n}}
		_, err := e.kube.AppsV1().Deployments("team").UpdateScale(ctx, "web", s, metav1.UpdateOptions{})
		return err
	}
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool {
		err := scale(10)
		return err != nil && strings.Contains(err.Error(), "web may not run more than 4 replicas, not 10")
	})
	if err := scale(3); err != nil {
		t.Fatalf("scaling to 3 refused: %v", err)
	}
	if d, err := e.kube.AppsV1().Deployments("team").Get(ctx, "web", metav1.GetOptions{}); err != nil || *d.Spec.Replicas != 3 {
		t.Fatalf("deployment after scaling to 3: %v", err)
	}

	cms := e.kube.CoreV1().ConfigMaps("team")
	for name, labels := range map[string]map[string]string{"keep": {"protected": "true"}, "temp": nil} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool {
		err := cms.Delete(ctx, "keep", metav1.DeleteOptions{})
		return err != nil && strings.Contains(err.Error(), "keep is protected")
	})
	if err := cms.Delete(ctx, "temp", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("deleting an unprotected ConfigMap refused: %v", err)
	}
	if _, err := cms.Get(ctx, "keep", metav1.GetOptions{}); err != nil {
		t.Fatalf("the protected ConfigMap is gone: %v", err)
	}
}
