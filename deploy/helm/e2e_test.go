package helm_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
)

// TestE2EDryRun installs the chart's CRDs into a real kube-apiserver, then
// server-side applies every object the chart renders, with the default and
// the HA values, as a dry run with strict field validation: the API server
// accepts each one as helm would send it. Then it applies the RBAC for real
// and asks the API server, with SubjectAccessReviews, what each service
// account may do.
func TestE2EDryRun(t *testing.T) {
	helmPath(t) // skip or build before the control plane starts
	cp := controlplane.StartForTest(t)
	cfg := cp.RESTConfig()
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := t.Context()

	// The release's namespace, and NATS's (its NetworkPolicy goes there).
	for _, ns := range []string{namespace, "nats"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	applyChartCRDs(t, dyn, mapper)

	for name, args := range renders {
		t.Run("dry run "+name, func(t *testing.T) {
			objs := decode(t, render(t, args...))
			for _, u := range objs {
				apply(t, dyn, mapper, u, true)
			}
			t.Logf("%d objects applied", len(objs))
		})
	}

	// The replay Job has a generated name: created (dry run), not applied.
	t.Run("replay job", func(t *testing.T) {
		objs := decode(t, render(t, "--set", "reporter.replay.enabled=true", "--show-only", "templates/reporter/replay-job.yaml"))
		if len(objs) != 1 || objs[0].GetKind() != "Job" {
			t.Fatalf("rendered %d objects", len(objs))
		}
		jobs := schema.GroupVersionResource{Group: "batch", Version: "v1", Resource: "jobs"}
		if _, err := dyn.Resource(jobs).Namespace(namespace).Create(t.Context(), objs[0], metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"}); err != nil {
			t.Error(err)
		}
	})

	t.Run("access", func(t *testing.T) {
		for _, u := range decode(t, render(t)) {
			switch u.GetKind() {
			case "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding":
				apply(t, dyn, mapper, u, false)
			}
		}
		testAccess(t, kube)
		testInformerAccess(t, cfg)
	})
}

// apply server-side applies u as helm's field manager (a dry run when
// dryRun), refusing unknown or duplicate fields.
// applyChartCRDs applies the chart's crds/ as helm installs them (create
// or update), waits until each is established, and resets mapper.
func applyChartCRDs(t *testing.T, dyn dynamic.Interface, mapper *restmapper.DeferredDiscoveryRESTMapper) {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join(chartDir, "crds"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(chartDir, "crds", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, u := range decode(t, b) {
			apply(t, dyn, mapper, u, false)
			waitEstablished(t, dyn, u.GetName())
		}
	}
	mapper.Reset()
}

func apply(t *testing.T, dyn dynamic.Interface, mapper meta.RESTMapper, u *unstructured.Unstructured, dryRun bool) {
	t.Helper()
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		t.Fatalf("%s %s: %v", gvk, u.GetName(), err)
	}
	var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		ns := u.GetNamespace()
		if ns == "" {
			ns = namespace
		}
		ri = dyn.Resource(m.Resource).Namespace(ns)
	}
	data, err := json.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: "helm", Force: &force, FieldValidation: "Strict"}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	if _, err := ri.Patch(t.Context(), u.GetName(), types.ApplyPatchType, data, opts); err != nil {
		t.Errorf("apply %s %s/%s: %v", gvk.Kind, u.GetNamespace(), u.GetName(), err)
	}
}

var apiextensionsCRDs = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func waitEstablished(t *testing.T, dyn dynamic.Interface, name string) {
	t.Helper()
	crds := dyn.Resource(apiextensionsCRDs)
	err := wait.PollUntilContextTimeout(t.Context(), 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil //nolint:nilerr // not there yet
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("CRD %s not established: %v", name, err)
	}
}

// testAccess asks the API server what each service account may do: what
// its code needs is allowed, what it must never do is denied.
func testAccess(t *testing.T, kube kubernetes.Interface) {
	type check struct {
		verb, group, resource, sub, ns, name string
		allowed                              bool
	}
	tests := map[string][]check{
		"verdict-webhook": {
			{verb: "list", group: "verdict.dev", resource: "clusterpolicies", allowed: true},
			{verb: "update", group: "verdict.dev", resource: "policies", sub: "status", ns: "team-a", name: "p", allowed: true},
			{verb: "update", group: "verdict.dev", resource: "policies", ns: "team-a", name: "p"},
			{verb: "watch", resource: "namespaces", allowed: true},
			{verb: "list", group: "rbac.authorization.k8s.io", resource: "rolebindings", allowed: true},
			{verb: "get", resource: "configmaps", ns: "team-a", name: "settings", allowed: true},
			// The registrar updates the release's configurations, by name
			// (the informer lists and watches them by name too)...
			{verb: "update", group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations", name: "verdict-validating", allowed: true},
			{verb: "watch", group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations", name: "verdict-mutating", allowed: true},
			// ...never another one, and never creates one: once uninstall
			// deletes them, nothing brings them back.
			{verb: "create", group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations"},
			{verb: "create", group: "admissionregistration.k8s.io", resource: "mutatingwebhookconfigurations"},
			{verb: "update", group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations", name: "someone-elses"},
			{verb: "delete", group: "admissionregistration.k8s.io", resource: "validatingwebhookconfigurations", name: "verdict-validating"},
			{verb: "update", resource: "secrets", ns: namespace, name: "verdict-webhook-tls", allowed: true},
			{verb: "create", resource: "secrets", ns: namespace, allowed: true},
			{verb: "get", resource: "secrets", ns: namespace, name: "some-other-secret"},
			{verb: "get", resource: "secrets", ns: "team-a", name: "verdict-webhook-tls"},
			{verb: "update", group: "coordination.k8s.io", resource: "leases", ns: namespace, name: "verdict-webhook", allowed: true},
			{verb: "update", group: "coordination.k8s.io", resource: "leases", ns: "kube-system", name: "kube-scheduler"},
			{verb: "create", resource: "pods", ns: "team-a"},
		},
		"verdict-reporter": {
			{verb: "patch", group: "wgpolicyk8s.io", resource: "policyreports", ns: "team-a", name: "r", allowed: true},
			{verb: "delete", group: "wgpolicyk8s.io", resource: "clusterpolicyreports", name: "r", allowed: true},
			{verb: "list", group: "apps", resource: "deployments", allowed: true},
			{verb: "get", resource: "pods", ns: "team-a", name: "p", allowed: true},
			{verb: "delete", resource: "pods", ns: "team-a", name: "p"},
			{verb: "update", group: "verdict.dev", resource: "clusterpolicies", name: "p"},
			// What scans list and results are checked against: the
			// built-in kinds, but no Secret unless
			// reporter.rbac.readSecrets says so.
			{verb: "get", resource: "secrets", ns: "team-a", name: "s"},
			{verb: "list", resource: "secrets"},
			{verb: "get", resource: "secrets", ns: namespace, name: "verdict-webhook-ca"},
		},
		"verdict-generator": {
			{verb: "patch", group: "networking.k8s.io", resource: "networkpolicies", ns: "team-a", name: "default-deny", allowed: true},
			{verb: "create", resource: "events", ns: "team-a", allowed: true},
			// Clone sources and triggers of the built-in kinds, but no
			// Secret unless generator.rbac.readSecrets says so.
			{verb: "get", resource: "configmaps", ns: "team-a", name: "source", allowed: true},
			{verb: "list", group: "apps", resource: "deployments", allowed: true},
			{verb: "get", resource: "secrets", ns: "team-a", name: "source"},
			{verb: "list", resource: "secrets"},
			{verb: "create", resource: "secrets", ns: "team-a"},
			{verb: "create", group: "rbac.authorization.k8s.io", resource: "rolebindings", ns: "team-a"},
			{verb: "delete", group: "wgpolicyk8s.io", resource: "policyreports", ns: "team-a", name: "r"},
		},
		"verdict-cleaner": {
			{verb: "delete", resource: "pods", ns: "team-a", name: "done", allowed: true},
			{verb: "list", group: "batch", resource: "jobs", allowed: true},
			{verb: "patch", group: "verdict.dev", resource: "clustercleanuppolicies", sub: "status", name: "c", allowed: true},
			{verb: "create", group: "events.k8s.io", resource: "events", ns: "team-a", allowed: true},
			{verb: "delete", resource: "secrets", ns: "team-a", name: "s"},
			{verb: "delete", resource: "namespaces", name: "team-a"},
			{verb: "list", resource: "secrets"},
		},
	}
	for sa, checks := range tests {
		t.Run(sa, func(t *testing.T) {
			for _, c := range checks {
				sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
					User:   "system:serviceaccount:" + namespace + ":" + sa,
					Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
					ResourceAttributes: &authorizationv1.ResourceAttributes{
						Verb: c.verb, Group: c.group, Resource: c.resource, Subresource: c.sub, Namespace: c.ns, Name: c.name,
					},
				}}
				got, err := kube.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), sar, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if got.Status.Allowed != c.allowed {
					what := strings.TrimSpace(strings.Join([]string{c.verb, c.group, c.resource, c.sub, c.ns, c.name}, " "))
					t.Errorf("%s: allowed %v, want %v (%s)", what, got.Status.Allowed, c.allowed, got.Status.Reason)
				}
			}
		})
	}
}

// testInformerAccess: as the webhook's ServiceAccount, the list by name
// that the informers of the configurations and of the certificate Secret
// send is allowed (resourceNames cover a metadata.name field selector);
// a plain list is not.
func testInformerAccess(t *testing.T, admin *rest.Config) {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":verdict-webhook",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	kube := kubernetes.NewForConfigOrDie(cfg)
	ctx := t.Context()
	byName := func(name string) metav1.ListOptions {
		return metav1.ListOptions{FieldSelector: "metadata.name=" + name}
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, byName("verdict-validating")); err != nil {
		t.Errorf("list verdict-validating by name: %v", err)
	}
	if _, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().List(ctx, byName("verdict-mutating")); err != nil {
		t.Errorf("list verdict-mutating by name: %v", err)
	}
	if _, err := kube.CoreV1().Secrets(namespace).List(ctx, byName("verdict-webhook-tls")); err != nil {
		t.Errorf("list the serving certificate Secret by name: %v", err)
	}
	if _, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list every validating configuration: %v, want forbidden", err)
	}
	if _, err := kube.CoreV1().Secrets(namespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list every Secret of the namespace: %v, want forbidden", err)
	}
}
