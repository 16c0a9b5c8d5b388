package controlplane

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/verdict-dev/verdict/internal/testkit"
)

// UserRESTConfig returns a client configuration that authenticates as
// user in groups with a client certificate from the cluster CA, as
// kubeadm's kubeconfigs do. Unlike RESTConfig's admin (system:masters),
// such a user is subject to RBAC and to API Priority and Fairness: bind
// it to what it needs. kubeadm 1.29 and later give admin.conf's user the
// group kubeadm:cluster-admins, bound to cluster-admin.
func (cp *ControlPlane) UserRESTConfig(user string, groups ...string) (*rest.Config, error) {
	kp, err := cp.pki.ca.issue(certRequest{commonName: user, organizations: groups, client: true})
	if err != nil {
		return nil, fmt.Errorf("controlplane: client certificate of %s: %w", user, err)
	}
	cfg := rest.CopyConfig(cp.rest)
	cfg.CertData, cfg.KeyData = kp.certPEM, kp.keyPEM
	return cfg, nil
}

// PIDs are the process ids of the running components, by name: etcd,
// kube-apiserver and, when started, kube-controller-manager. A benchmark
// reads their CPU time and memory from /proc.
func (cp *ControlPlane) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range cp.processes() {
		out[p.name] = p.pid()
	}
	return out
}

// WaitAuthorized waits until the API server's authorizer allows user, in
// groups, every one of attrs. RBAC objects reach the authorizer through a
// watch, so a request sent right after a Role or binding was created may
// still be refused; a test that binds a user and then acts as it waits
// here first.
func WaitAuthorized(t testing.TB, kube kubernetes.Interface, user string, groups []string, attrs ...authorizationv1.ResourceAttributes) {
	t.Helper()
	for _, a := range attrs {
		what := strings.Join(slices.DeleteFunc([]string{user, a.Verb, a.Group, a.Resource, a.Subresource, a.Namespace, a.Name}, func(s string) bool { return s == "" }), " ")
		testkit.Eventually(t, 30*time.Second, "RBAC allowing "+what, func() error {
			sar, err := kube.AuthorizationV1().SubjectAccessReviews().Create(t.Context(), &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: user, Groups: groups, ResourceAttributes: &a,
			}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			if !sar.Status.Allowed {
				return testkit.ErrNotYet
			}
			return nil
		})
	}
}
