package controlplane

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// ErrNotReady is wrapped when a component exits or does not become ready
// during Start; the error carries the end of the component's log.
var ErrNotReady = errors.New("controlplane: not ready")

const (
	serviceClusterIPRange = "10.96.0.0/16"
	serviceAccountIssuer  = "https://kubernetes.default.svc.cluster.local"
	pollInterval          = 100 * time.Millisecond
	startAttempts         = 3 // a port taken between its probe and its use costs one more attempt
)

// ControlPlane is a running etcd, kube-apiserver and optionally
// kube-controller-manager. Stop it when done (StartForTest does).
type ControlPlane struct {
	cfg  config
	dir  string
	bin  string
	pki  *pki
	url  string
	rest *rest.Config

	etcdURL string

	kubeconfigPath string

	etcd, apiServer, controllerManager *process

	stopOnce sync.Once
	stopErr  error
}

// Start brings a control plane up on loopback and returns once the
// apiserver is ready, Verdict's CRDs are Established and, with
// WithControllerManager, the controllers run. ctx bounds start-up only (and
// a build of the binaries); the control plane runs until Stop.
func Start(ctx context.Context, opts ...Option) (*ControlPlane, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, err
		}
	}
	bin, err := ensureBinaries(ctx, &cfg)
	if err != nil {
		return nil, err
	}
	for attempt := 1; ; attempt++ {
		cp, err := start(ctx, cfg, bin)
		if err == nil {
			return cp, nil
		}
		if !errors.Is(err, errPortInUse) || attempt == startAttempts {
			return nil, err
		}
	}
}

var errPortInUse = errors.New("port in use")

func start(ctx context.Context, cfg config, bin string) (cp *ControlPlane, err error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.startTimeout)
	defer cancel()

	dir, err := os.MkdirTemp(cfg.rootDir, "verdict-controlplane-")
	if err != nil {
		return nil, fmt.Errorf("controlplane: temp dir: %w", err)
	}
	cp = &ControlPlane{cfg: cfg, dir: dir, bin: bin}
	defer func() {
		if err != nil {
			if stopErr := cp.Stop(); stopErr != nil {
				err = errors.Join(err, stopErr)
			}
			cp = nil
		}
	}()

	if cp.pki, err = newPKI(filepath.Join(dir, "pki")); err != nil {
		return cp, fmt.Errorf("controlplane: certificates: %w", err)
	}
	if err := cp.startEtcd(ctx); err != nil {
		return cp, err
	}
	if err := cp.startAPIServer(ctx); err != nil {
		return cp, err
	}
	var crdsFast time.Time
	if cfg.installCRDs {
		if crdsFast, err = cp.installCRDs(ctx); err != nil {
			return cp, cp.apiServer.withLog(err)
		}
	}
	if cfg.controllerManager {
		if err := cp.startControllerManager(ctx); err != nil {
			return cp, err
		}
	}
	// The first creates of custom objects right after their CRDs are
	// Established take two seconds; wait that out here (overlapping the
	// controller manager's start) rather than surprise the first test.
	if err := sleepUntil(ctx, crdsFast); err != nil {
		return cp, fmt.Errorf("controlplane: %w", err)
	}
	return cp, nil
}

// waitFor polls ready until it returns true, p exits, or ctx ends.
func waitFor(ctx context.Context, p *process, what string, ready func(context.Context) (bool, error)) error {
	var lastErr error
	for {
		if done, _ := p.exited(); done {
			err := fmt.Errorf("%w: %s exited while waiting for %s", ErrNotReady, p.name, what)
			if p.portInUse() {
				err = fmt.Errorf("%w (%w)", err, errPortInUse)
			}
			return p.withLog(err)
		}
		ok, err := ready(ctx)
		if ok {
			return nil
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-ctx.Done():
			err := fmt.Errorf("%w: %s waiting for %s: %w", ErrNotReady, p.name, what, ctx.Err())
			if lastErr != nil {
				err = fmt.Errorf("%w (last error: %s)", err, lastErr.Error())
			}
			return p.withLog(err)
		case <-time.After(pollInterval):
		}
	}
}

func (cp *ControlPlane) logPath(name string) string { return filepath.Join(cp.dir, name+".log") }

func (cp *ControlPlane) startEtcd(ctx context.Context) error {
	clientPort, err := FreePort()
	if err != nil {
		return err
	}
	peerPort, err := FreePort()
	if err != nil {
		return err
	}
	clientURL := "http://" + hostPort(clientPort)
	cp.etcdURL = clientURL
	peerURL := "http://" + hostPort(peerPort)
	args := []string{
		"--name=verdict",
		"--data-dir=" + filepath.Join(cp.dir, "etcd"),
		"--listen-client-urls=" + clientURL,
		"--advertise-client-urls=" + clientURL,
		"--listen-peer-urls=" + peerURL,
		"--initial-advertise-peer-urls=" + peerURL,
		"--initial-cluster=verdict=" + peerURL,
		"--initial-cluster-state=new",
		"--unsafe-no-fsync", // throw-away data: durability buys nothing, fsync costs seconds
		"--logger=zap",
		"--log-level=warn",
	}
	args = append(args, cp.cfg.etcdArgs...)
	if cp.etcd, err = startProcess("etcd", filepath.Join(cp.bin, binEtcd), cp.logPath("etcd"), args); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	client := &http.Client{Timeout: 2 * time.Second}
	return waitFor(ctx, cp.etcd, clientURL+"/health", func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, clientURL+"/health", nil)
		if err != nil {
			return false, err
		}
		resp, err := client.Do(req)
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
}

func (cp *ControlPlane) startAPIServer(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	cp.url = "https://" + hostPort(port)
	p := cp.pki
	args := []string{
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(cp.dir, "apiserver"),
		"--tls-cert-file=" + p.apiServerCert,
		"--tls-private-key-file=" + p.apiServerKey,
		"--client-ca-file=" + p.caCert,
		"--requestheader-client-ca-file=" + p.frontProxyCACert,
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-uid-headers=X-Remote-Uid",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + p.frontProxyCert,
		"--proxy-client-key-file=" + p.frontProxyKey,
		"--authorization-mode=Node,RBAC",
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + p.saPub,
		"--service-account-signing-key-file=" + p.saKey,
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		"--etcd-servers=" + cp.etcdURL,
		"--allow-privileged=true",
		// The reconciler would publish 127.0.0.1 as the endpoint of the
		// kubernetes Service, which validation refuses (loopback), and log
		// the refusal forever. Clients here use the kubeconfig.
		"--endpoint-reconciler-type=none",
		"--profiling=false",
		// Admission webhooks get the apiserver's client certificate, so a
		// webhook can require mutual TLS.
		"--admission-control-config-file=" + filepath.Join(cp.dir, "admission.yaml"),
	}
	args = append(args, cp.cfg.apiServerArgs...)

	if err := cp.writeKubeconfigs(); err != nil {
		return fmt.Errorf("controlplane: kubeconfig: %w", err)
	}
	if err := cp.writeAdmissionConfig(); err != nil {
		return fmt.Errorf("controlplane: admission configuration: %w", err)
	}
	if cp.apiServer, err = startProcess("kube-apiserver", filepath.Join(cp.bin, binAPIServer), cp.logPath("kube-apiserver"), args); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}
	client, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return fmt.Errorf("controlplane: client: %w", err)
	}
	return waitFor(ctx, cp.apiServer, "/readyz", func(ctx context.Context) (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		_, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(rctx)
		return err == nil, err
	})
}

func (cp *ControlPlane) writeKubeconfigs() error {
	p := cp.pki
	cp.rest = &rest.Config{
		Host: cp.url,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:   p.ca.certPEM,
			CertData: p.admin.certPEM,
			KeyData:  p.admin.keyPEM,
		},
		QPS:       100,
		Burst:     200,
		UserAgent: "verdict-controlplane",
	}
	cp.kubeconfigPath = filepath.Join(cp.dir, "admin.kubeconfig")
	if err := writeKubeconfig(cp.kubeconfigPath, cp.url, p.ca.certPEM, "verdict-admin", p.admin); err != nil {
		return err
	}
	return writeKubeconfig(filepath.Join(cp.dir, "controller-manager.kubeconfig"), cp.url, p.ca.certPEM,
		"system:kube-controller-manager", p.kcm)
}

// writeAdmissionConfig tells the webhook admission plugins to present the
// webhook client certificate to every webhook ("*" matches any server).
func (cp *ControlPlane) writeAdmissionConfig() error {
	kubeconfig := filepath.Join(cp.dir, "webhook-client.kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.AuthInfos["*"] = &clientcmdapi.AuthInfo{ClientCertificateData: cp.pki.webhookClient.certPEM, ClientKeyData: cp.pki.webhookClient.keyPEM}
	if err := clientcmd.WriteToFile(*cfg, kubeconfig); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n")
	for _, plugin := range []string{"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"} {
		fmt.Fprintf(&b, "- name: %s\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: %q\n", plugin, kubeconfig)
	}
	return os.WriteFile(filepath.Join(cp.dir, "admission.yaml"), []byte(b.String()), 0o600)
}

func writeKubeconfig(path, server string, caPEM []byte, user string, kp *keyPair) error {
	const name = "verdict"
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters[name] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: caPEM}
	cfg.AuthInfos[user] = &clientcmdapi.AuthInfo{ClientCertificateData: kp.certPEM, ClientKeyData: kp.keyPEM}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: user, Namespace: metav1.NamespaceDefault}
	cfg.CurrentContext = name
	return clientcmd.WriteToFile(*cfg, path)
}

func (cp *ControlPlane) startControllerManager(ctx context.Context) error {
	port, err := FreePort()
	if err != nil {
		return err
	}
	p := cp.pki
	kubeconfig := filepath.Join(cp.dir, "controller-manager.kubeconfig")
	args := []string{
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--cert-dir=" + filepath.Join(cp.dir, "controller-manager"),
		"--tls-cert-file=" + p.kcmServeCert,
		"--tls-private-key-file=" + p.kcmServeKey,
		"--client-ca-file=" + p.caCert,
		"--root-ca-file=" + p.caCert,
		"--service-account-private-key-file=" + p.saKey,
		"--use-service-account-credentials=true",
		"--cluster-signing-cert-file=" + p.caCert,
		"--cluster-signing-key-file=" + p.caKey,
		"--service-cluster-ip-range=" + serviceClusterIPRange,
		// Every default controller; the cloud ones have no cloud to talk to.
		"--controllers=*,-service-lb-controller,-node-route-controller,-cloud-node-lifecycle-controller",
		"--leader-elect=false",
		// Each controller fetches its own service-account token at start;
		// at the default 20 requests per second the last ones start about
		// five seconds late.
		"--kube-api-qps=200",
		"--kube-api-burst=400",
		"--profiling=false",
	}
	args = append(args, cp.cfg.controllerMgrArgs...)
	if cp.controllerManager, err = startProcess("kube-controller-manager",
		filepath.Join(cp.bin, binControllerManager), cp.logPath("kube-controller-manager"), args); err != nil {
		return fmt.Errorf("controlplane: %w", err)
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(p.ca.certPEM)
	httpClient := &http.Client{
		Timeout:   2 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}},
	}
	defer httpClient.CloseIdleConnections()
	healthz := "https://" + hostPort(port) + "/healthz"
	if err := waitFor(ctx, cp.controllerManager, healthz, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, healthz, nil)
		if err != nil {
			return false, err
		}
		resp, err := httpClient.Do(req)
		if err != nil {
			return false, err
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	}); err != nil {
		return err
	}

	// Healthy is not yet working: the service-account controller creating
	// default/default shows the controllers run with their own credentials,
	// and that Pods can be created in the default namespace.
	client, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return fmt.Errorf("controlplane: client: %w", err)
	}
	return waitFor(ctx, cp.controllerManager, "service account default/default", func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, err
	})
}

// RESTConfig returns a copy of the admin (system:masters) client
// configuration.
func (cp *ControlPlane) RESTConfig() *rest.Config { return rest.CopyConfig(cp.rest) }

// KubeconfigPath is the admin kubeconfig, for kubectl and child processes
// (KUBECONFIG=...). It is removed by Stop.
func (cp *ControlPlane) KubeconfigPath() string { return cp.kubeconfigPath }

// WebhookClientCAFile is the CA of the client certificate the apiserver
// presents to admission webhooks: a webhook requiring mutual TLS trusts it
// (webhook.Config.ClientCAFile).
func (cp *ControlPlane) WebhookClientCAFile() string { return cp.pki.webhookClientCACert }

// CACertPEM is the cluster CA: it signs the apiserver's serving certificate
// and the client certificates the apiserver trusts.
func (cp *ControlPlane) CACertPEM() []byte { return append([]byte(nil), cp.pki.ca.certPEM...) }

// URL is the apiserver's address, https://127.0.0.1:<port>.
func (cp *ControlPlane) URL() string { return cp.url }

// Dir is the temporary directory holding the PKI, kubeconfigs, etcd data and
// the components' logs (<component>.log).
func (cp *ControlPlane) Dir() string { return cp.dir }

// Stop ends every component (SIGTERM, then SIGKILL after the stop timeout),
// waits for each to be reaped, and removes the temporary directory unless
// it is to be kept. It is safe to call more than once.
func (cp *ControlPlane) Stop() error {
	cp.stopOnce.Do(func() {
		var errs []error
		// Dependents first: the controllers need the apiserver, the
		// apiserver needs etcd.
		for _, p := range []*process{cp.controllerManager, cp.apiServer, cp.etcd} {
			if p == nil {
				continue
			}
			if err := p.stop(cp.cfg.stopTimeout); err != nil {
				errs = append(errs, err)
			}
		}
		if !cp.cfg.keepDir {
			if err := os.RemoveAll(cp.dir); err != nil {
				errs = append(errs, err)
			}
		}
		if len(errs) > 0 {
			cp.stopErr = fmt.Errorf("controlplane: stop: %w", errors.Join(errs...))
		}
	})
	return cp.stopErr
}

// processes lists the components started, for diagnostics and tests.
func (cp *ControlPlane) processes() []*process {
	var out []*process
	for _, p := range []*process{cp.etcd, cp.apiServer, cp.controllerManager} {
		if p != nil {
			out = append(out, p)
		}
	}
	return out
}
