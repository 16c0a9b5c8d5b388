package app_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/platform/policyhttp"
	"github.com/verdict-dev/verdict/internal/testkit"
	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
)

// replicaLimit reads its limit from a params ConfigMap in the
// Deployment's namespace (validate.cel paramKind and paramRef); a
// namespace without one refuses Deployments (parameterNotFoundAction
// Deny).
const replicaLimit = `
apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: replica-limit}
spec:
  background: false
  rules:
  - name: replicas
    match: {any: [{resources: {kinds: [Deployment], operations: [CREATE, UPDATE]}}]}
    validate:
      failureAction: Enforce
      cel:
        paramKind: {apiVersion: v1, kind: ConfigMap}
        paramRef: {name: replica-limit, parameterNotFoundAction: Deny}
        expressions:
        - expression: "object.spec.replicas <= int(params.data.max)"
          messageExpression: "'at most ' + params.data.max + ' replicas here'"
`

// frozenNamespace refuses ConfigMaps in a namespace labelled frozen (the
// Namespace read with resource.Get), and ConfigMaps named like a Secret of
// their namespace (read with resource.List).
const frozenNamespace = `
apiVersion: verdict.dev/v1
kind: ValidatingPolicy
metadata: {name: frozen-namespace}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [configmaps]
  validations:
  - expression: "resource.Get('v1', 'namespaces', '', object.metadata.namespace).metadata.?labels.frozen.orValue('') != 'true'"
    message: the namespace is frozen
  - expression: "!resource.List('v1', 'secrets', object.metadata.namespace).items.exists(s, s.metadata.name == object.metadata.name)"
    messageExpression: "'a Secret is named ' + object.metadata.name"
`

// externalCheck asks a service whether a ConfigMap labelled check may be
// created (CEL's http.Get), and tries the cloud metadata service for one
// labelled metadata.
const externalCheck = `
apiVersion: verdict.dev/v1
kind: ValidatingPolicy
metadata: {name: external-check}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE]
      resources: [configmaps]
  matchConditions:
  - name: labelled
    expression: "has(object.metadata.labels) && 'check' in object.metadata.labels"
  validations:
  - expression: "object.metadata.labels.check != 'service' || http.Get('URL/allow/' + object.metadata.name).allowed"
    messageExpression: "'the service refuses ' + object.metadata.name"
  - expression: "object.metadata.labels.check != 'metadata' || http.Get('http://169.254.169.254/latest/meta-data/') != null"
`

// TestE2EPolicyReads: through the real API server, policies read the
// cluster from the webhook: a validate.cel rule's params (a ConfigMap in
// the resource's namespace; none there is a denial under Deny), a
// ValidatingPolicy's resource.Get and resource.List, and, with policies'
// HTTP calls enabled, a service through http.Get, never the metadata
// service.
func TestE2EPolicyReads(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, replicaLimit), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(policycache.ValidatingPolicies).Create(ctx, testkit.Unstructured(t, frozenNamespace), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	limit := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "replica-limit", Namespace: "team"}, Data: map[string]string{"max": "2"}}
	if _, err := e.kube.CoreV1().ConfigMaps("team").Create(ctx, limit, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	svc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, `{"allowed": %t}`, r.URL.Path == "/allow/approved")
	}))
	defer svc.Close()
	if _, err := e.dyn.Resource(policycache.ValidatingPolicies).Create(ctx, testkit.Unstructured(t, strings.Replace(externalCheck, "URL", svc.URL, 1)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startReplica(t, "replica-a", "", func(c *webhookapp.Config) {
		// The test's service is on loopback: keep only link-local (the
		// metadata services) blocked.
		c.PolicyHTTP = policyhttp.Config{Enabled: true, Blocklist: []string{"169.254.0.0/16"}}
	})
	waitEnforced(t, e.kube)

	deploy := func(ns string, replicas int32) *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To(replicas),
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec:       pod("x", false).Spec,
				},
			},
		}
	}
	dryRun := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	deployments := e.kube.AppsV1().Deployments("team")
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool {
		_, err := deployments.Create(ctx, deploy("team", 3), dryRun)
		return err != nil && strings.Contains(err.Error(), "at most 2 replicas here")
	})
	if _, err := deployments.Create(ctx, deploy("team", 2), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a Deployment within the limit: %v", err)
	}
	// The limit is read at each admission: raised, it admits.
	limit.Data["max"] = "5"
	if _, err := e.kube.CoreV1().ConfigMaps("team").Update(ctx, limit, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	bigger := deploy("team", 3)
	bigger.Name = "bigger"
	testkit.EventuallyTrue(t, 10*time.Second, "the condition", func() bool {
		_, err := deployments.Create(ctx, bigger, dryRun)
		return err == nil
	})
	if _, err := e.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nolimit"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err := e.kube.AppsV1().Deployments("nolimit").Create(ctx, deploy("nolimit", 1), dryRun)
	if err == nil || !strings.Contains(err.Error(), "error in parameterized resource") || !strings.Contains(err.Error(), `"nolimit/replica-limit"`) {
		t.Fatalf("a Deployment in a namespace without params: %v", err)
	}

	cms := e.kube.CoreV1().ConfigMaps("team")
	cm := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"}}
	}
	if _, err := cms.Create(ctx, cm("settings"), dryRun); err != nil {
		t.Fatalf("a ConfigMap before any Secret: %v", err)
	}
	labelled := func(name, check string) *corev1.ConfigMap {
		c := cm(name)
		c.Labels = map[string]string{"check": check}
		return c
	}
	if _, err := cms.Create(ctx, labelled("approved", "service"), dryRun); err != nil {
		t.Fatalf("a ConfigMap the service allows: %v", err)
	}
	if _, err := cms.Create(ctx, labelled("refused", "service"), dryRun); err == nil || !strings.Contains(err.Error(), "the service refuses refused") {
		t.Fatalf("a ConfigMap the service refuses: %v", err)
	}
	if _, err := cms.Create(ctx, labelled("creds", "metadata"), dryRun); err == nil || !strings.Contains(err.Error(), "169.254.0.0/16, on the blocklist") {
		t.Fatalf("a call to the metadata service: %v", err)
	}
	secrets := e.kube.CoreV1().Secrets("team")
	if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: "team"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, cm("settings"), dryRun); err == nil || !strings.Contains(err.Error(), "a Secret is named settings") {
		t.Fatalf("a ConfigMap named like a Secret (resource.List): %v", err)
	}
	if _, err := cms.Create(ctx, cm("other"), dryRun); err != nil {
		t.Fatalf("a ConfigMap named like no Secret: %v", err)
	}
	ns, err := e.kube.CoreV1().Namespaces().Get(ctx, "team", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Labels["frozen"] = "true"
	if _, err := e.kube.CoreV1().Namespaces().Update(ctx, ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, cm("other"), dryRun); err == nil || !strings.Contains(err.Error(), "the namespace is frozen") {
		t.Fatalf("a ConfigMap in a frozen namespace (resource.Get): %v", err)
	}
}
