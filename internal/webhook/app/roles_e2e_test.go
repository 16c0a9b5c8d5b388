package app_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
)

// denyByRole denies ConfigMaps written by holders of the cluster role
// cm-restricted, or of the role team:cm-writer.
const denyByRole = `
apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata:
  name: deny-by-role
spec:
  validationFailureAction: Enforce
  background: false
  rules:
  - name: restricted-cluster-role
    match:
      any:
      - resources:
          kinds: [ConfigMap]
        clusterRoles: [cm-restricted]
    validate:
      message: "holders of cm-restricted may not write ConfigMaps"
      deny: {}
  - name: restricted-role
    match:
      any:
      - resources:
          kinds: [ConfigMap]
        roles: ["team:cm-writer"]
    validate:
      message: "holders of team:cm-writer may not write ConfigMaps"
      deny: {}
`

// TestE2ERoles: a rule matching a clusterRole applies to a user bound to
// it (the request made through impersonation, so the API server sends
// that user) and not to another user with the same permissions through
// another role; a rule matching a namespaced role applies to its holder.
func TestE2ERoles(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	rbac := e.kube.RbacV1()
	writeConfigMaps := []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create", "get", "delete"}}}
	for _, name := range []string{"cm-restricted", "cm-free"} {
		if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: writeConfigMaps}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for user, role := range map[string]string{"alice": "cm-restricted", "bob": "cm-free"} {
		crb := &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: user + "-" + role},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
		}
		if _, err := rbac.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := rbac.Roles("team").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "cm-writer"}, Rules: writeConfigMaps}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "carol-cm-writer"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "cm-writer"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "carol"}},
	}
	if _, err := rbac.RoleBindings("team").Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, denyByRole), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, user := range []string{"alice", "bob", "carol"} {
		controlplane.WaitAuthorized(t, e.kube, user, []string{"system:authenticated"}, authorizationv1.ResourceAttributes{Namespace: "team", Verb: "create", Resource: "configmaps"})
	}
	e.startReplica(t, "replica-a", "", nil)
	waitEnforced(t, e.kube)

	as := func(user string) kubernetes.Interface {
		rc := rest.CopyConfig(e.cp.RESTConfig())
		rc.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
		return kubernetes.NewForConfigOrDie(rc)
	}
	create := func(user string, i int) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: fmt.Sprintf("%s-%d", user, i)}}
		_, err := as(user).CoreV1().ConfigMaps("team").Create(ctx, cm, metav1.CreateOptions{})
		return err
	}
	// The policy reaches the webhook configuration and the policy cache.
	var err error
	for i := 0; ; i++ {
		err = create("alice", i)
		if err != nil && strings.Contains(err.Error(), "holders of cm-restricted may not write ConfigMaps") {
			break
		}
		if i > 100 {
			t.Fatalf("alice's ConfigMap was not denied by her cluster role: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if !strings.Contains(err.Error(), "deny-by-role") || !strings.Contains(err.Error(), "restricted-cluster-role") {
		t.Fatalf("denial does not name the policy and rule: %v", err)
	}
	if err := create("bob", 0); err != nil {
		t.Fatalf("bob (cm-free) was refused: %v", err)
	}
	err = create("carol", 0)
	if err == nil || !strings.Contains(err.Error(), "holders of team:cm-writer may not write ConfigMaps") {
		t.Fatalf("carol's ConfigMap was not denied by her role: %v", err)
	}
	// A binding made now counts at once (informers, not a start-up list).
	crb := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bob-cm-restricted"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cm-restricted"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "bob"}},
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 15*time.Second, "the condition", func() bool {
		err := create("bob", int(time.Now().UnixNano()%1_000_000))
		return err != nil && strings.Contains(err.Error(), "holders of cm-restricted")
	})
}
