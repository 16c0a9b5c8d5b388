package roles

import (
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func roleBinding(ns, name, kind, role string, subjects ...rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: kind, Name: role},
		Subjects:   subjects,
	}
}

func clusterRoleBinding(name, role string, subjects ...rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   subjects,
	}
}

func user(name string) rbacv1.Subject  { return rbacv1.Subject{Kind: rbacv1.UserKind, Name: name} }
func group(name string) rbacv1.Subject { return rbacv1.Subject{Kind: rbacv1.GroupKind, Name: name} }
func sa(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
}

// TestRoles pins the rules of Kyverno's userinfo.GetRoleRef: which bindings
// give which roles and cluster roles to a request's user.
func TestRoles(t *testing.T) {
	rbs := []*rbacv1.RoleBinding{
		roleBinding("dev", "alice-edit", "Role", "editor", user("alice")),
		roleBinding("dev", "team-view", "ClusterRole", "view", group("team")),
		roleBinding("prod", "alice-admin", "ClusterRole", "admin", user("alice")),
		roleBinding("dev", "builder", "Role", "builder", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "ci"}),
		roleBinding("dev", "other-ns-sa", "Role", "deployer", sa("tools", "ci")),
		roleBinding("dev", "both", "Role", "editor", user("alice"), group("team")),
	}
	crbs := []*rbacv1.ClusterRoleBinding{
		clusterRoleBinding("alice-audit", "auditor", user("alice")),
		clusterRoleBinding("team-read", "reader", group("team"), group("other")),
		clusterRoleBinding("sa-no-ns", "nobody", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "ci"}),
		clusterRoleBinding("tools-ci", "ci-runner", sa("tools", "ci")),
	}
	rbIdx, crbIdx := newIndexer(), newIndexer()
	for _, b := range rbs {
		if err := rbIdx.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, b := range crbs {
		if err := crbIdx.Add(b); err != nil {
			t.Fatal(err)
		}
	}
	r := newFromIndexers(rbIdx, crbIdx)
	tests := map[string]struct {
		user         authenticationv1.UserInfo
		namespace    string
		roles        []string
		clusterRoles []string
	}{
		"user in dev": {
			user: authenticationv1.UserInfo{Username: "alice"}, namespace: "dev",
			roles: []string{"dev:editor"}, clusterRoles: []string{"auditor"},
		},
		"a RoleBinding to a ClusterRole counts in its namespace only": {
			user: authenticationv1.UserInfo{Username: "alice"}, namespace: "prod",
			roles: []string{"dev:editor"}, clusterRoles: []string{"admin", "auditor"},
		},
		"groups": {
			user: authenticationv1.UserInfo{Username: "bob", Groups: []string{"team", "system:authenticated"}}, namespace: "dev",
			roles: []string{"dev:editor"}, clusterRoles: []string{"reader", "view"},
		},
		"user and group in one binding counted once": {
			user: authenticationv1.UserInfo{Username: "alice", Groups: []string{"team"}}, namespace: "dev",
			roles: []string{"dev:editor"}, clusterRoles: []string{"auditor", "reader", "view"},
		},
		"a service account subject without namespace is the binding's": {
			user: authenticationv1.UserInfo{Username: "system:serviceaccount:dev:ci"}, namespace: "dev",
			roles: []string{"dev:builder"},
		},
		"a service account with its namespace": {
			user: authenticationv1.UserInfo{Username: "system:serviceaccount:tools:ci"}, namespace: "dev",
			roles: []string{"dev:deployer"}, clusterRoles: []string{"ci-runner"},
		},
		"cluster-scoped request": {
			user: authenticationv1.UserInfo{Username: "alice"}, namespace: "",
			roles: []string{"dev:editor"}, clusterRoles: []string{"auditor"},
		},
		"nobody": {user: authenticationv1.UserInfo{Username: "mallory", Groups: []string{"system:authenticated"}}, namespace: "dev"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			roles, clusterRoles := r.Roles(tc.user, tc.namespace)
			if !slices.Equal(roles, tc.roles) || !slices.Equal(clusterRoles, tc.clusterRoles) {
				t.Fatalf("roles %v cluster roles %v, want %v and %v", roles, clusterRoles, tc.roles, tc.clusterRoles)
			}
		})
	}
}

// BenchmarkRoles measures a lookup among 10,000 bindings.
func BenchmarkRoles(b *testing.B) {
	rbIdx, crbIdx := newIndexer(), newIndexer()
	for i := range 10000 {
		_ = rbIdx.Add(roleBinding(fmt.Sprintf("ns-%d", i%100), fmt.Sprintf("rb-%d", i), "Role", "r", user(fmt.Sprintf("u-%d", i))))
		_ = crbIdx.Add(clusterRoleBinding(fmt.Sprintf("crb-%d", i), "cr", group(fmt.Sprintf("g-%d", i))))
	}
	r := newFromIndexers(rbIdx, crbIdx)
	u := authenticationv1.UserInfo{Username: "u-42", Groups: []string{"g-7", "system:authenticated"}}
	b.ReportAllocs()
	for b.Loop() {
		if roles, crs := r.Roles(u, "ns-42"); len(roles) != 1 || len(crs) != 1 {
			b.Fatalf("%v %v", roles, crs)
		}
	}
}

// TestStartDoesNotWaitForever: when the bindings cannot be listed (a
// missing permission, a slow API server), Start gives up after its wait
// with ErrNotSynced, so that the webhook serves; the roles appear once
// the informers catch up.
func TestStartDoesNotWaitForever(t *testing.T) {
	synced := false
	r := newFromIndexers(newIndexer(), newIndexer())
	r.start = func(<-chan struct{}) {}
	r.synced = []cache.InformerSynced{func() bool { return synced }}
	start := time.Now()
	if err := r.Start(t.Context(), 300*time.Millisecond); !errors.Is(err, ErrNotSynced) {
		t.Fatalf("Start = %v, want ErrNotSynced", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("Start waited %s", d)
	}
	if r.Synced() {
		t.Fatal("Synced before the informers listed")
	}
	synced = true
	if err := r.Start(t.Context(), time.Second); err != nil || !r.Synced() {
		t.Fatalf("after the list: %v, synced %v", err, r.Synced())
	}
}
