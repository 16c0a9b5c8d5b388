package platform

import (
	"errors"
	"flag"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/verdict-dev/verdict/internal/platform/policyhttp"
)

// KubeConfig is how a service reaches the API server.
type KubeConfig struct {
	// Kubeconfig is a kubeconfig file; empty means in-cluster.
	Kubeconfig string
	// QPS and Burst bound all requests to the API server (client-go's
	// token bucket).
	QPS   float64
	Burst int
	// Timeout bounds one request (0: none, for watches' sake the service
	// sets deadlines itself).
	Timeout time.Duration
}

// DefaultKubeConfig returns in-cluster access at 50 QPS, burst 100.
func DefaultKubeConfig() KubeConfig { return KubeConfig{QPS: 50, Burst: 100} }

// Validate returns every problem, each wrapping ErrInvalidConfig.
func (c KubeConfig) Validate() error {
	var errs []error
	if c.QPS <= 0 || c.Burst < 1 {
		errs = append(errs, fmt.Errorf("%w: api-qps %v and api-burst %d must be positive", ErrInvalidConfig, c.QPS, c.Burst))
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%w: api-timeout %s must not be negative", ErrInvalidConfig, c.Timeout))
	}
	return errors.Join(errs...)
}

// REST returns the rest config, naming the service in the user agent.
func (c KubeConfig) REST(userAgent string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	if c.Kubeconfig == "" {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	rc.QPS, rc.Burst, rc.Timeout = float32(c.QPS), c.Burst, c.Timeout
	rc.UserAgent = userAgent
	return rc, nil
}

// Clients are the Kubernetes clients a service uses, over one rest
// config.
type Clients struct {
	REST      *rest.Config
	Kube      kubernetes.Interface
	Dynamic   dynamic.Interface
	Metadata  metadata.Interface
	Discovery discovery.DiscoveryInterface
	// Mapper maps kinds to resources through discovery, cached and
	// refreshed when a kind is not found (a CRD installed since).
	Mapper meta.ResettableRESTMapper
}

// Clients builds every client over the rest config of REST.
func (c KubeConfig) Clients(userAgent string) (*Clients, error) {
	rc, err := c.REST(userAgent)
	if err != nil {
		return nil, err
	}
	out := &Clients{REST: rc}
	if out.Kube, err = kubernetes.NewForConfig(rc); err != nil {
		return nil, err
	}
	if out.Dynamic, err = dynamic.NewForConfig(rc); err != nil {
		return nil, err
	}
	if out.Metadata, err = metadata.NewForConfig(rc); err != nil {
		return nil, err
	}
	if out.Discovery, err = discovery.NewDiscoveryClientForConfig(rc); err != nil {
		return nil, err
	}
	out.Mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(out.Discovery))
	return out, nil
}

// BindKubeFlags binds --kubeconfig, --api-qps, --api-burst and
// --api-timeout.
func BindKubeFlags(fs *flag.FlagSet, c *KubeConfig) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", c.Kubeconfig, "kubeconfig file (empty: in-cluster config)")
	fs.Float64Var(&c.QPS, "api-qps", c.QPS, "requests per second to the API server, all kinds")
	fs.IntVar(&c.Burst, "api-burst", c.Burst, "burst of requests to the API server")
	fs.DurationVar(&c.Timeout, "api-timeout", c.Timeout, "upper bound of one API request (0: none)")
}

// BindPolicyHTTPFlags binds --policy-http and its bounds: whether
// policies may call services over HTTP (CEL's http.Get and http.Post,
// apiCall entries with a service), and where not.
func BindPolicyHTTPFlags(fs *flag.FlagSet, c *policyhttp.Config) {
	fs.BoolVar(&c.Enabled, "policy-http", c.Enabled, "let policies call services over HTTP (CEL's http.Get/Post, apiCall entries with a service); off by default")
	ListFlag(fs, "policy-http-blocklist", "CIDRs, addresses and host names policies may not call, replacing the default: "+strings.Join(policyhttp.DefaultBlocklist, ",")+" (repeatable, or comma-separated; empty: block nothing)",
		func() { c.Blocklist = []string{} }, func(s string) error {
			c.Blocklist = append(c.Blocklist, s)
			return nil
		})
	StringsFlag(fs, "policy-http-allowlist", "URL prefixes (scheme://host[:port][/path]) policies may call; when set, no other (repeatable, or comma-separated)", &c.Allowlist)
	fs.BoolVar(&c.AllowNamespacedPolicies, "policy-http-namespaced", c.AllowNamespacedPolicies, "let namespaced policies (Policy, Namespaced*Policy: written by a namespace's users) call services too")
	fs.DurationVar(&c.Timeout, "policy-http-timeout", c.Timeout, "upper bound of one policy HTTP call (0: 3s)")
	fs.Int64Var(&c.MaxBytes, "policy-http-max-bytes", c.MaxBytes, "largest response body of a policy HTTP call (0: 2 MiB)")
}
