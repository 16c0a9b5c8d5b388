package controlplane

import (
	"fmt"

	"k8s.io/client-go/rest"
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
