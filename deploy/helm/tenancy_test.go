package helm_test

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// The tenant's attacks (issue 28, finding 1): a user who may only write
// policies and ConfigMaps in team-a steers, through labels of its own
// ConfigMaps, reads of team-b's ConfigMap, of Verdict's CA Secret, and
// writes into kube-system. Every one is a variable, so the policies are
// admitted; the engine must refuse each read when the rule runs.
const (
	tenantNamespace = "team-a"
	victimNamespace = "team-b"
	victimPassword  = "hunter2-of-team-b"

	tenantValidate = `apiVersion: verdict.dev/v1
kind: Policy
metadata: {name: steal-validate, namespace: team-a}
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: configmap
    match: {any: [{resources: {kinds: [ConfigMap], selector: {matchLabels: {attack: configmap}}}}]}
    context:
    - name: leak
      configMap: {name: db, namespace: "{{ request.object.metadata.labels.victim }}"}
    validate:
      message: "leaked {{ leak.data.password }}"
      deny: {conditions: {any: [{key: "{{ leak.data.password }}", operator: NotEquals, value: ""}]}}
  - name: apicall
    match: {any: [{resources: {kinds: [ConfigMap], selector: {matchLabels: {attack: apicall}}}}]}
    context:
    - name: leak
      apiCall: {urlPath: "/api/v1/namespaces/{{ request.object.metadata.labels.victim }}/configmaps/db", jmesPath: data.password}
    validate:
      message: "leaked {{ leak }}"
      deny: {conditions: {any: [{key: "{{ leak }}", operator: NotEquals, value: ""}]}}
  - name: ca
    match: {any: [{resources: {kinds: [ConfigMap], selector: {matchLabels: {attack: ca}}}}]}
    context:
    - name: leak
      apiCall: {urlPath: "/api/v1/namespaces/{{ request.object.metadata.labels.victim }}/secrets/verdict-webhook-ca", jmesPath: data}
    validate:
      message: "leaked {{ leak }}"
      deny: {conditions: {any: [{key: "{{ leak }}", operator: NotEquals, value: ""}]}}
`

	tenantCEL = `apiVersion: verdict.dev/v1
kind: NamespacedValidatingPolicy
metadata: {name: steal-cel, namespace: team-a}
spec:
  validationActions: [Deny]
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}
  matchConditions:
  - name: attack
    expression: "object.metadata.?labels[?'attack'].orValue('') == 'cel'"
  validations:
  - expression: "string(resource.Get('v1', 'configmaps', object.metadata.labels.victim, 'db').data.password) == ''"
    messageExpression: "'leaked ' + string(resource.Get('v1', 'configmaps', object.metadata.labels.victim, 'db').data.password)"
`

	tenantGenerate = `apiVersion: verdict.dev/v1
kind: Policy
metadata: {name: steal-generate, namespace: team-a}
spec:
  rules:
  - name: marker
    match: {any: [{resources: {kinds: [ConfigMap], selector: {matchLabels: {attack: generate}}}}]}
    generate: {apiVersion: v1, kind: ConfigMap, name: marker, namespace: team-a, data: {data: {ok: "yes"}}}
  - name: clone
    match: {any: [{resources: {kinds: [ConfigMap], selector: {matchLabels: {attack: generate}}}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: copy
      namespace: team-a
      clone: {namespace: "{{ request.object.metadata.labels.victim }}", name: db}
  - name: default
    match: {any: [{resources: {kinds: [ConfigMap], selector: {matchLabels: {attack: generate}}}}]}
    context:
    - name: leak
      apiCall:
        urlPath: "/api/v1/namespaces/{{ request.object.metadata.labels.victim }}/configmaps/db"
        jmesPath: data.password
        default: none
    generate: {apiVersion: v1, kind: ConfigMap, name: stolen, namespace: team-a, data: {data: {password: "{{ leak }}"}}}
  - name: quota
    match: {any: [{resources: {kinds: [ConfigMap], selector: {matchLabels: {attack: generate}}}}]}
    context:
    - name: created
      apiCall:
        method: POST
        urlPath: "/api/v1/namespaces/{{ request.object.metadata.labels.target }}/resourcequotas"
        data:
        - {key: apiVersion, value: v1}
        - {key: kind, value: ResourceQuota}
        - {key: metadata, value: {name: freeze}}
        - {key: spec, value: {hard: {pods: "0"}}}
    generate: {apiVersion: v1, kind: ConfigMap, name: quota, namespace: team-a, data: {data: {q: "{{ created.metadata.name }}"}}}
`

	// clusterReadsVerdictSecret is a cluster administrator's policy: it
	// may read any namespace, but never Verdict's own Secrets.
	clusterReadsVerdictSecret = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: read-verdict-ca}
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: ca
    match: {any: [{resources: {kinds: [ConfigMap], selector: {matchLabels: {attack: cluster-ca}}}}]}
    context:
    - name: leak
      apiCall: {urlPath: /api/v1/namespaces/verdict/secrets/verdict-webhook-ca, jmesPath: data}
    validate:
      message: "leaked {{ leak }}"
      deny: {conditions: {any: [{key: "{{ leak }}", operator: NotEquals, value: ""}]}}
`
)

// TestE2ETenancy runs the chart's webhook and generator as processes,
// each as its ServiceAccount with the chart's RBAC, against a real
// kube-apiserver, and lets a tenant bound only to team-a try every way a
// namespaced policy reads or writes the cluster (issue 28, finding 1): a
// literal cross-namespace field is refused when the policy is created;
// configMap and apiCall entries, CEL's resource.Get, clone, an apiCall
// default and an apiCall POST steered by the tenant's own labels are
// refused when the rule runs, and nothing of team-b, of Verdict's
// namespace or of kube-system is read or written. A ClusterPolicy may
// read other namespaces, never Verdict's Secrets.
func TestE2ETenancy(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the chart's webhook and generator on a real control plane; skipped under -short")
	}
	helmPath(t)
	bins := make(chan topoBuild, 1)
	go func() { bins <- buildServices(t.Context(), t.TempDir(), "webhook", "generator") }()

	cp := controlplane.StartForTest(t)
	ctx := t.Context()
	admin := cp.RESTConfig()
	admin.WarningHandler = rest.NoWarnings{}
	kube := kubernetes.NewForConfigOrDie(admin)
	dyn := dynamic.NewForConfigOrDie(admin)

	b := <-bins
	if b.err != nil {
		t.Fatal(b.err)
	}
	nats := natstest.Server(t)
	lb := startTopoBalancer(t)

	for _, ns := range []string{namespace, tenantNamespace, victimNamespace} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kube.CoreV1().ConfigMaps(victimNamespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "db"}, Data: map[string]string{"password": victimPassword},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	args := []string{
		"--set", "nats.credentials.secretName=", "--set", "nats.tls.caConfigMapName=",
		"--set", "nats.allowUnauthenticated=true", "--set", "nats.networkPolicy.enabled=false",
		"--set", "nats.urls[0]=" + nats.ClientURL(),
		"--set", "webhook.replicas=1", "--set", "generator.replicas=1",
		"--set", "webhook.extraArgs[0]=--webhook-url=" + lb.url(),
		"--set", "webhook.extraArgs[1]=--certificate-ips=127.0.0.1",
	}
	deployments := applyRendered(t, kube, dyn, render(t, args...))
	topo := &topology{t: t, cp: cp, kube: kube, bins: b.dir, lb: lb, replicas: map[string][]*topoReplica{}, services: []string{"webhook", "generator"}}
	for _, svc := range topo.services {
		topo.startDeployment(deployments[svc])
	}
	topo.waitReady(90 * time.Second)
	waitWebhooksRegistered(t, kube)
	topoEventually(t, 30*time.Second, "the webhook's CA Secret", func() error {
		_, err := kube.CoreV1().Secrets(namespace).Get(ctx, "verdict-webhook-ca", metav1.GetOptions{})
		return err
	})

	tenant := tenantClients(t, kube, admin)

	t.Run("literal fields refused at admission", func(t *testing.T) {
		literal := strings.Replace(tenantValidate, `"{{ request.object.metadata.labels.victim }}"}`, "team-b}", 1)
		v, err := document.Decode([]byte(literal))
		if err != nil {
			t.Fatal(err)
		}
		_, err = tenant.dyn.Resource(policycache.Policies).Namespace(tenantNamespace).Create(ctx, &unstructured.Unstructured{Object: v.(map[string]any)}, metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "spec.rules[0].context[0].configMap.namespace: is team-b") {
			t.Fatalf("a Policy reading team-b's ConfigMap by name: %v", err)
		}
	})

	createPolicy(t, tenant.dyn, policycache.Policies, tenantNamespace, tenantValidate)
	createPolicy(t, tenant.dyn, policycache.NamespacedValidatingPolicies, tenantNamespace, tenantCEL)
	createPolicy(t, tenant.dyn, policycache.Policies, tenantNamespace, tenantGenerate)
	createPolicy(t, dyn, policycache.ClusterPolicies, "", clusterReadsVerdictSecret)

	probe := func(name string, labels map[string]string) error {
		_, err := tenant.kube.CoreV1().ConfigMaps(tenantNamespace).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err
	}
	refused := map[string]struct {
		labels map[string]string
		want   string
	}{
		"configMap entry":       {labels: map[string]string{"attack": "configmap", "victim": victimNamespace}, want: "configMap entry db names namespace team-b"},
		"apiCall":               {labels: map[string]string{"attack": "apicall", "victim": victimNamespace}, want: "names namespace team-b"},
		"apiCall to the CA":     {labels: map[string]string{"attack": "ca", "victim": namespace}, want: "names namespace verdict"},
		"CEL resource.Get":      {labels: map[string]string{"attack": "cel", "victim": victimNamespace}, want: "names namespace team-b"},
		"ClusterPolicy, the CA": {labels: map[string]string{"attack": "cluster-ca"}, want: "Verdict's own Secrets"},
	}
	for name, tc := range refused {
		t.Run(name, func(t *testing.T) {
			var msg string
			topoEventually(t, 30*time.Second, "the policy in force", func() error {
				err := probe("probe", tc.labels)
				if err == nil {
					return errors.New("admitted")
				}
				// The denial lists the rules as YAML: lines folded,
				// quotes doubled.
				msg = strings.ReplaceAll(strings.Join(strings.Fields(err.Error()), " "), "''", "'")
				if !strings.Contains(msg, tc.want) {
					return err
				}
				return nil
			})
			for _, leak := range []string{victimPassword, "LS0t" /* base64 of a PEM's first dashes */} {
				if strings.Contains(msg, leak) {
					t.Fatalf("the denial leaks %q: %s", leak, msg)
				}
			}
		})
	}

	t.Run("generate", func(t *testing.T) {
		tenant.warnings.reset()
		if _, err := tenant.kube.CoreV1().ConfigMaps(tenantNamespace).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: "trigger", Labels: map[string]string{"attack": "generate", "victim": victimNamespace, "target": "kube-system"},
		}}, metav1.CreateOptions{}); err != nil {
			t.Fatalf("the trigger: %v", err)
		}
		// The rule that stays in team-a works: the generator took the
		// trigger.
		topoEventually(t, 60*time.Second, "the tenant's own ConfigMap generated", func() error {
			_, err := kube.CoreV1().ConfigMaps(tenantNamespace).Get(ctx, "marker", metav1.GetOptions{})
			return err
		})
		// The three others are refused when the webhook evaluates them:
		// the tenant is told in a warning, no work is queued, nothing is
		// written.
		warned := tenant.warnings.all()
		for rule, want := range map[string]string{
			"clone":   "the read of ConfigMap names namespace team-b",
			"default": "urlPath /api/v1/namespaces/team-b/configmaps/db names namespace team-b",
			"quota":   "apiCall refused: POST /api/v1/namespaces/kube-system/resourcequotas",
		} {
			found := false
			for _, w := range strings.Split(warned, "\n") {
				found = found || (strings.Contains(w, "steal-generate."+rule+":") && strings.Contains(w, want))
			}
			if !found {
				t.Errorf("no warning says rule %s was refused (%q):\n%s", rule, want, warned)
			}
		}
		for _, name := range []string{"copy", "stolen", "quota"} {
			if cm, err := kube.CoreV1().ConfigMaps(tenantNamespace).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Errorf("ConfigMap %s in team-a: %v %v", name, cm.Data, err)
			}
		}
		if _, err := kube.CoreV1().ResourceQuotas("kube-system").Get(ctx, "freeze", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("the tenant's ResourceQuota in kube-system: %v", err)
		}
	})
	topo.checkAlive()
}

type clients struct {
	kube     kubernetes.Interface
	dyn      dynamic.Interface
	warnings *warnings
}

// warnings records the warnings the API server sends a client (the
// webhook's among them).
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) HandleWarningHeader(_ int, _ string, msg string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, msg)
}

func (w *warnings) reset() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = nil
}

func (w *warnings) all() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return strings.Join(w.msgs, "\n")
}

// tenantClients binds the user "tenant" to what a namespace's owner is
// given: policies and ConfigMaps of team-a, nothing else, and returns
// clients acting as that user.
func tenantClients(t *testing.T, kube kubernetes.Interface, admin *rest.Config) clients {
	t.Helper()
	ctx := t.Context()
	role := &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: tenantNamespace},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"verdict.dev"}, Resources: []string{"policies", "namespacedvalidatingpolicies", "policyexceptions"}, Verbs: []string{"*"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"*"}},
		},
	}
	if _, err := kube.RbacV1().Roles(tenantNamespace).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings(tenantNamespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "tenant", Namespace: tenantNamespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "tenant"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "tenant"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	groups := []string{"system:authenticated"}
	attrs := []authorizationv1.ResourceAttributes{{Namespace: tenantNamespace, Verb: "create", Resource: "configmaps"}}
	for _, r := range role.Rules[0].Resources {
		attrs = append(attrs, authorizationv1.ResourceAttributes{Namespace: tenantNamespace, Verb: "create", Group: "verdict.dev", Resource: r})
	}
	controlplane.WaitAuthorized(t, kube, "tenant", groups, attrs...)
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "tenant", Groups: groups}
	w := &warnings{}
	cfg.WarningHandler = w
	return clients{kube: kubernetes.NewForConfigOrDie(cfg), dyn: dynamic.NewForConfigOrDie(cfg), warnings: w}
}
