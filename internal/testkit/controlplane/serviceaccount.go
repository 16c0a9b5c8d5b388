package controlplane

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ServiceAccountKubeconfig writes a kubeconfig that authenticates as the
// ServiceAccount namespace/name with a bound token from the TokenRequest
// API (valid for ttl, at least 10 minutes), as a Pod running under that
// ServiceAccount would, and returns its path. The ServiceAccount must
// exist. A process started with it has exactly the ServiceAccount's RBAC:
// a rule missing from a Role it needs fails its requests.
func (cp *ControlPlane) ServiceAccountKubeconfig(ctx context.Context, namespace, name string, ttl time.Duration) (string, error) {
	kube, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return "", err
	}
	seconds := int64(max(ttl, 10*time.Minute) / time.Second)
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of service account %s/%s: %w", namespace, name, err)
	}
	user := "system:serviceaccount:" + namespace + ":" + name
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["verdict"] = &clientcmdapi.Cluster{Server: cp.url, CertificateAuthorityData: cp.pki.ca.certPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{Token: tr.Status.Token}
	cfg.Contexts["verdict"] = &clientcmdapi.Context{Cluster: "verdict", AuthInfo: user, Namespace: namespace}
	cfg.CurrentContext = "verdict"
	path := filepath.Join(cp.dir, fmt.Sprintf("sa-%s-%s.kubeconfig", namespace, name))
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return "", err
	}
	return path, nil
}
