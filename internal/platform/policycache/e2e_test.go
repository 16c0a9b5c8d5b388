package policycache_test

import (
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

func TestE2ECache(t *testing.T) {
	cp := controlplane.StartForTest(t)
	cfg := cp.RESTConfig()
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := t.Context()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team", Labels: map[string]string{"env": "prod"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	loader, err := policycache.NewLoader(kube, policycache.WithTimeout(2*time.Second), policycache.WithMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(engine.WithContextLoader(loader))
	if err != nil {
		t.Fatal(err)
	}
	c := policycache.New(eng, dyn, kube, zerolog.Nop())
	if _, err := c.Set(ctx); err == nil {
		t.Fatal("set before start")
	}
	if err := c.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitSet := func(n int) *engine.Set {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for time.Now().Before(deadline) {
			s, err := c.Set(ctx)
			if err == nil && len(s.Policies)+len(s.Exceptions) == n {
				return s
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("set never held %d objects", n)
		return nil
	}
	waitSet(0)

	cpol := testkit.Unstructured(t, `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: need-labels}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {metadata: {labels: {app: "?*"}}}}
`)
	if _, err := dyn.Resource(policycache.ClusterPolicies).Create(ctx, cpol, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bad := testkit.Unstructured(t, `apiVersion: verdict.dev/v1
kind: Policy
metadata: {name: broken, namespace: team}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {a: b}, deny: {}}
`)
	if _, err := dyn.Resource(policycache.Policies).Namespace("team").Create(ctx, bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	exc := testkit.Unstructured(t, `apiVersion: verdict.dev/v1
kind: PolicyException
metadata: {name: allow, namespace: team}
spec:
  exceptions: [{policyName: need-labels, ruleNames: [r]}]
  match: {any: [{resources: {kinds: [Pod], names: [legacy-*]}}]}
`)
	if _, err := dyn.Resource(policycache.PolicyExceptions).Namespace("team").Create(ctx, exc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s := waitSet(2)
	if s.Policies[0].Name() != "need-labels" || s.Exceptions[0].Metadata.Name != "allow" {
		t.Fatalf("set: %v", s)
	}
	if ps := c.Problems(); len(ps) != 1 || ps[0].Key != "team/broken" {
		t.Fatalf("problems: %+v", ps)
	}
	select {
	case <-c.Changed():
	case <-time.After(5 * time.Second):
		t.Fatal("no change signal")
	}
	// The set evaluates: a Pod without labels fails, a legacy one is exempt.
	for name, want := range map[string]engine.Status{"web": engine.StatusFail, "legacy-db": engine.StatusSkip} {
		pod := testkit.Unstructured(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: "+name+", namespace: team}\n").Object
		resps, _ := eng.Apply(ctx, &engine.Request{Operation: engine.OpCreate, Object: pod}, s)
		if len(resps) != 1 || resps[0].Rules[0].Status != want {
			t.Fatalf("%s: %+v", name, resps)
		}
	}
	if l, err := c.NamespaceLabels(ctx, "team"); err != nil || l["env"] != "prod" {
		t.Fatalf("namespace labels %v %v", l, err)
	}
	if ns, err := c.NamespaceObject(ctx, "team"); err != nil || document.String(ns, "metadata", "name") != "team" || document.String(ns, "metadata", "labels", "env") != "prod" {
		t.Fatalf("namespace object %v %v", ns, err)
	}
	// A ValidatingPolicy (served by this version's CRDs) joins the set; one
	// of the same name as the ClusterPolicy does not take its place.
	vpol := testkit.Unstructured(t, `apiVersion: verdict.dev/v1
kind: ValidatingPolicy
metadata: {name: need-labels}
spec:
  validationActions: [Deny]
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "has(object.metadata.labels)"}]
`)
	if _, err := dyn.Resource(policycache.ValidatingPolicies).Create(ctx, vpol, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s = waitSet(3)
	if p := c.Policy("need-labels"); p == nil || p.Raw.Kind != policy.KindClusterPolicy {
		t.Fatalf("Policy(need-labels) = %+v, want the ClusterPolicy", p)
	}
	if s.Policies[0].Raw.Kind != policy.KindClusterPolicy || s.Policies[1].Raw.Kind != policy.KindValidatingPolicy {
		t.Fatalf("order: %s, %s", s.Policies[0].Raw.Kind, s.Policies[1].Raw.Kind)
	}
	if err := dyn.Resource(policycache.ValidatingPolicies).Delete(ctx, "need-labels", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSet(2)
	// Deleting removes it from the set.
	if err := dyn.Resource(policycache.ClusterPolicies).Delete(ctx, "need-labels", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitSet(1)

	// The loader reads the cluster.
	if _, err := kube.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm, err := loader.ConfigMap(ctx, "team", "cfg")
	if err != nil || document.String(cm, "data", "k") != "v" {
		t.Fatalf("configMap: %v %v", cm, err)
	}
	list, err := loader.APICall(ctx, &policy.APICall{URLPath: "/api/v1/namespaces/team/configmaps"})
	if err != nil {
		t.Fatal(err)
	}
	if items, _ := list.(map[string]any)["items"].([]any); len(items) < 1 {
		t.Fatalf("apiCall list: %v", list)
	}
	small, err := policycache.NewLoader(kube, policycache.WithTimeout(time.Second), policycache.WithMaxBytes(64))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.APICall(ctx, &policy.APICall{URLPath: "/api/v1/namespaces/team/configmaps"}); err == nil {
		t.Fatal("response over the limit accepted")
	}
}
