package reportserver_test

import (
	"strings"
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

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/reports/reportindex"
	"github.com/verdict-dev/verdict/internal/reports/reportserver"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
)

// TestE2EServeDenials (issue 34): the admission log's recent denials are
// served through the real kube-apiserver as decisions.verdict.dev
// AdmissionDenials, read-only, and the API server's RBAC decides who
// reads them: a user allowed to list them in team-a sees team-a's and
// is refused team-b's and every namespace's; allowed and cluster-scoped
// decisions are not served.
func TestE2EServeDenials(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.WithoutCRDs())
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())

	denials := reportserver.NewDenials(0, 0)
	gv := reportserver.Decisions
	serveThroughAggregator(t, cp, reportserver.Config{Denials: denials}, reportindex.New(), gv)
	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	now := time.Now().UTC()
	decision := func(uid, ns, name, outcome string) bus.Decision {
		return bus.Decision{RequestUID: uid, Webhook: "validate-cluster", Operation: "CREATE", Outcome: outcome,
			Resource: bus.DecisionResource{Version: "v1", Kind: "Pod", Resource: "pods", Namespace: ns, Name: name},
			User:     bus.DecisionUser{Username: "someone"}, Message: "blocked",
			Findings: []bus.Finding{{Policy: "disallow-privileged", Rule: "privileged", Action: bus.ActionDeny, Message: "no"}}, Time: now}
	}
	denials.Add(decision("r1", "team-a", "web", bus.DecisionDenied), 1)
	denials.Add(decision("r2", "team-a", "db", bus.DecisionDenied), 2)
	denials.Add(decision("r2", "team-a", "db", bus.DecisionDenied), 3) // the same, delivered again
	denials.Add(decision("r3", "team-b", "secret-stuff", bus.DecisionDenied), 4)
	denials.Add(decision("r4", "team-a", "ok", bus.DecisionAllowed), 5)
	denials.Add(decision("r5", "", "everyone-admin", bus.DecisionDenied), 6)

	res := gv.WithResource("admissiondenials")
	var all *unstructured.UnstructuredList
	testkit.Eventually(t, 60*time.Second, "the denials served", func() error {
		var err error
		all, err = dyn.Resource(res).List(ctx, metav1.ListOptions{})
		return err
	})
	if len(all.Items) != 3 {
		t.Fatalf("%d denials served to the administrator, want 3", len(all.Items))
	}
	first := all.Items[0]
	if first.GetNamespace() != "team-a" || first.Object["requestUid"] != "r1" || first.Object["message"] != "blocked" || !strings.HasPrefix(first.GetName(), "pod.web.") {
		t.Fatalf("denial %v", first.Object)
	}
	if _, err := dyn.Resource(res).Namespace("team-a").Get(ctx, first.GetName(), metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}

	// alice may read team-a's denials, nothing else.
	if _, err := kube.RbacV1().Roles("team-a").Create(ctx, &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "denials"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{gv.Group}, Resources: []string{"admissiondenials"}, Verbs: []string{"get", "list"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings("team-a").Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "alice"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "denials"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	groups := []string{"system:authenticated"}
	controlplane.WaitAuthorized(t, kube, "alice", groups, authorizationv1.ResourceAttributes{Namespace: "team-a", Verb: "list", Group: gv.Group, Resource: "admissiondenials"})
	cfg := rest.CopyConfig(cp.RESTConfig())
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: groups}
	alice := dynamic.NewForConfigOrDie(cfg)
	mine, err := alice.Resource(res).Namespace("team-a").List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(mine.Items) != 2 {
		t.Fatalf("alice sees %d of team-a's denials, want 2", len(mine.Items))
	}
	if _, err := alice.Resource(res).Namespace("team-b").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("alice listing team-b's denials: %v, want forbidden", err)
	}
	if _, err := alice.Resource(res).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("alice listing every namespace's denials: %v, want forbidden", err)
	}
	other := all.Items[2]
	if _, err := alice.Resource(res).Namespace("team-b").Get(ctx, other.GetName(), metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("alice reading a team-b denial by name: %v, want forbidden", err)
	}
	// Read-only.
	if err := dyn.Resource(res).Namespace("team-a").Delete(ctx, first.GetName(), metav1.DeleteOptions{}); !apierrors.IsMethodNotSupported(err) {
		t.Fatalf("delete: %v, want method not supported", err)
	}
}
