// Package roles resolves the RBAC roles and cluster roles that an
// admission request's user holds, for match and exclude blocks that name
// roles or clusterRoles. The API server does not send them: like Kyverno's
// webhook, Verdict reads them off the RoleBindings and ClusterRoleBindings
// whose subjects name the user, one of the user's groups, or (for a
// service account's username) the service account:
//
//   - a RoleBinding to a Role gives the role "namespace:name";
//   - a RoleBinding to a ClusterRole gives that cluster role, but only for
//     requests in the binding's namespace;
//   - a ClusterRoleBinding to a ClusterRole gives that cluster role.
//
// The bindings come from informers, indexed by subject, so a lookup costs a
// few map reads however many bindings the cluster has.
package roles

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// bySubject is the name of the bindings' index by subject.
const bySubject = "subject"

// serviceAccountPrefix starts the username of a service account.
const serviceAccountPrefix = "system:serviceaccount:"

// Resolver answers which roles and cluster roles a user holds.
type Resolver struct {
	roleBindings        cache.Indexer
	clusterRoleBindings cache.Indexer
	synced              []cache.InformerSynced
	start               func(stop <-chan struct{})
}

// New returns a Resolver over informers of the cluster's RoleBindings and
// ClusterRoleBindings; Start runs them.
func New(kube kubernetes.Interface) (*Resolver, error) {
	factory := informers.NewSharedInformerFactory(kube, 0)
	rb := factory.Rbac().V1().RoleBindings().Informer()
	crb := factory.Rbac().V1().ClusterRoleBindings().Informer()
	for _, inf := range []cache.SharedIndexInformer{rb, crb} {
		if err := inf.AddIndexers(cache.Indexers{bySubject: subjectKeys}); err != nil {
			return nil, fmt.Errorf("roles: index bindings by subject: %w", err)
		}
	}
	return &Resolver{
		roleBindings:        rb.GetIndexer(),
		clusterRoleBindings: crb.GetIndexer(),
		synced:              []cache.InformerSynced{rb.HasSynced, crb.HasSynced},
		start:               factory.Start,
	}, nil
}

// newFromIndexers returns a Resolver over indexers filled by the caller
// (indexed with subjectKeys).
func newFromIndexers(roleBindings, clusterRoleBindings cache.Indexer) *Resolver {
	return &Resolver{roleBindings: roleBindings, clusterRoleBindings: clusterRoleBindings}
}

// newIndexer returns an empty indexer of bindings, indexed by subject.
func newIndexer() cache.Indexer {
	return cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{bySubject: subjectKeys})
}

// ErrNotSynced is returned by Start when the bindings were not listed in
// time; the informers go on and the roles appear once they are.
var ErrNotSynced = errors.New("roles: RoleBindings and ClusterRoleBindings not listed yet")

// Start runs the informers until ctx ends and returns once they have
// listed every binding, or after wait (ErrNotSynced), or when ctx ends.
// The webhook does not wait longer: it must serve whatever its
// dependencies do, and until the bindings are listed a user simply holds
// no roles. (Listing needs the list and watch permissions on both kinds
// of binding.)
func (r *Resolver) Start(ctx context.Context, wait time.Duration) error {
	r.start(ctx.Done())
	wctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if !cache.WaitForCacheSync(wctx.Done(), r.synced...) {
		if err := ctx.Err(); err != nil {
			return err
		}
		return ErrNotSynced
	}
	return nil
}

// Synced reports whether every binding has been listed.
func (r *Resolver) Synced() bool {
	for _, s := range r.synced {
		if !s() {
			return false
		}
	}
	return true
}

// Roles returns the roles ("namespace:name") and cluster roles the user
// holds for a request in namespace ("" for a cluster-scoped resource),
// each sorted and without repeats.
func (r *Resolver) Roles(user authenticationv1.UserInfo, namespace string) (roles, clusterRoles []string) {
	keys := userKeys(user)
	for _, key := range keys {
		objs, _ := r.roleBindings.ByIndex(bySubject, key)
		for _, o := range objs {
			rb, ok := o.(*rbacv1.RoleBinding)
			if !ok || !bindsUser(rb.Subjects, user, rb.Namespace) {
				continue
			}
			switch rb.RoleRef.Kind {
			case "Role":
				roles = append(roles, rb.Namespace+":"+rb.RoleRef.Name)
			case "ClusterRole":
				if rb.Namespace == namespace {
					clusterRoles = append(clusterRoles, rb.RoleRef.Name)
				}
			}
		}
		objs, _ = r.clusterRoleBindings.ByIndex(bySubject, key)
		for _, o := range objs {
			crb, ok := o.(*rbacv1.ClusterRoleBinding)
			if ok && crb.RoleRef.Kind == "ClusterRole" && bindsUser(crb.Subjects, user, "") {
				clusterRoles = append(clusterRoles, crb.RoleRef.Name)
			}
		}
	}
	return sortedSet(roles), sortedSet(clusterRoles)
}

// subjectKeys indexes a binding by each of its subjects.
func subjectKeys(obj any) ([]string, error) {
	var subjects []rbacv1.Subject
	namespace := ""
	switch b := obj.(type) {
	case *rbacv1.RoleBinding:
		subjects, namespace = b.Subjects, b.Namespace
	case *rbacv1.ClusterRoleBinding:
		subjects = b.Subjects
	default:
		return nil, nil
	}
	keys := make([]string, 0, len(subjects))
	for _, s := range subjects {
		if k := subjectKey(s, namespace); k != "" {
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// subjectKey is the index key of one subject of a binding in namespace
// ("" for a ClusterRoleBinding), or "" for a subject no user can be.
func subjectKey(s rbacv1.Subject, namespace string) string {
	switch s.Kind {
	case rbacv1.UserKind:
		return "user:" + s.Name
	case rbacv1.GroupKind:
		return "group:" + s.Name
	case rbacv1.ServiceAccountKind:
		ns := s.Namespace
		if ns == "" {
			// A service account subject without a namespace is the
			// binding's; a cluster binding has none to give.
			ns = namespace
		}
		if ns == "" {
			return ""
		}
		return "user:" + serviceAccountPrefix + ns + ":" + s.Name
	}
	return ""
}

// userKeys are the index keys under which a binding of the user is found.
func userKeys(user authenticationv1.UserInfo) []string {
	keys := make([]string, 0, 1+len(user.Groups))
	keys = append(keys, "user:"+user.Username)
	for _, g := range user.Groups {
		keys = append(keys, "group:"+g)
	}
	return keys
}

// bindsUser reports whether one of the subjects (of a binding in
// namespace) is the user: the index finds candidates, this decides, so a
// binding found under two keys is still counted for what it binds.
func bindsUser(subjects []rbacv1.Subject, user authenticationv1.UserInfo, namespace string) bool {
	for _, s := range subjects {
		key := subjectKey(s, namespace)
		switch {
		case key == "":
		case strings.HasPrefix(key, "user:") && key[len("user:"):] == user.Username:
			return true
		case strings.HasPrefix(key, "group:") && slices.Contains(user.Groups, key[len("group:"):]):
			return true
		}
	}
	return false
}

// sortedSet sorts names and drops repeats (a binding found under several
// of the user's keys, or two bindings to one role).
func sortedSet(names []string) []string {
	if len(names) == 0 {
		return nil
	}
	slices.Sort(names)
	return slices.Compact(names)
}
