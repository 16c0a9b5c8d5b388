// Package podload creates Pods through the API server from many
// concurrent clients and records how long each creation took: the load of
// Kyverno's published admission benchmark (kyverno/kyverno
// docs/perf-testing/v1.18.1), which k6 with the xk6-kubernetes extension
// sends, written here in Go. What `loadgen apiserver` and the API-server
// benchmark of internal/webhook/app run.
//
// As k6's shared-iterations executor does, Clients workers (k6's virtual
// users) share a fixed number of iterations: each takes the next one as
// soon as its previous one ends, until none is left. Each iteration
// creates one Pod, the Pod of Kyverno's k6 script (Pod), named by the API
// server (generateName). A Pod is never scheduled: Kyverno's run on fake
// KWOK nodes, a control plane without a scheduler keeps them Pending; the
// API server's work for a CREATE is the same.
//
// How an iteration reaches the API server is the Mode; ModeK6 is what the
// k6 runs do (see there).
package podload

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// ErrInvalidConfig is wrapped by the errors of a Config that cannot run.
var ErrInvalidConfig = errors.New("podload: invalid config")

// Mode is how each iteration reaches the API server.
type Mode string

const (
	// ModeK6 sends what Kyverno's k6 script sends in an iteration
	// (`new Kubernetes()` then `create(podSpec)`, xk6-kubernetes v0.9.0
	// on client-go v0.27): its new client's REST mapper starts empty, so
	// the iteration first reads the API's discovery documents (GET /api
	// and GET /apis, aggregated discovery), then sends the CREATE.
	// client-go keeps one transport per TLS configuration for the whole
	// process, so all clients share its HTTP/2 connections to the API
	// server; k6's --no-connection-reuse and --no-vu-connection-reuse
	// apply to k6's own HTTP module only, never to client-go's. The
	// discovery answers are read to their end and not decoded: the API
	// server's work is the same, the loader, which shares the machine
	// here (Kyverno's had one of its own), spends less.
	ModeK6 Mode = "k6"
	// ModeFresh sends the CREATE alone, over a new TCP and TLS connection
	// each time (HTTP/1.1, keep-alive off): what the two k6 flags would do
	// to a request of k6's own.
	ModeFresh Mode = "fresh"
	// ModeReuse sends the CREATE alone, every client through one
	// client-go client (its HTTP/2 connections shared): the cost of the
	// CREATE itself, nothing around it.
	ModeReuse Mode = "reuse"
)

// Modes are the modes, in the order a flag lists them.
var Modes = []Mode{ModeK6, ModeFresh, ModeReuse}

// ParseMode reads a Mode's name.
func ParseMode(s string) (Mode, error) {
	for _, m := range Modes {
		if string(m) == s {
			return m, nil
		}
	}
	return "", fmt.Errorf("%w: mode %q (k6, fresh or reuse)", ErrInvalidConfig, s)
}

// Config is one run.
type Config struct {
	// REST reaches the API server as the loading user.
	REST *rest.Config
	// Namespace receives the Pods (Kyverno's script: testns).
	Namespace string
	// Clients is the number of concurrent clients (k6's VUs).
	Clients int
	// Iterations is the number of Pods created, shared among the clients.
	Iterations int
	// Mode is how an iteration reaches the API server (default ModeK6).
	Mode Mode
	// Timeout bounds one iteration (default 30 s).
	Timeout time.Duration
}

// Validate returns every problem of the configuration, each wrapping
// ErrInvalidConfig.
func (c Config) Validate() error {
	var errs []error
	if c.REST == nil {
		errs = append(errs, fmt.Errorf("%w: no REST config", ErrInvalidConfig))
	}
	if c.Namespace == "" {
		errs = append(errs, fmt.Errorf("%w: no namespace", ErrInvalidConfig))
	}
	if c.Clients < 1 || c.Iterations < 1 {
		errs = append(errs, fmt.Errorf("%w: %d clients, %d iterations: both must be positive", ErrInvalidConfig, c.Clients, c.Iterations))
	}
	if c.Mode != "" {
		if _, err := ParseMode(string(c.Mode)); err != nil {
			errs = append(errs, err)
		}
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%w: timeout %v", ErrInvalidConfig, c.Timeout))
	}
	return errors.Join(errs...)
}

// Result is what a run measured.
type Result struct {
	// Iterations holds every iteration's duration, failed ones included
	// (k6's iteration_duration): in ModeK6 discovery and the CREATE, in
	// the other modes the CREATE.
	Iterations []time.Duration
	// Creates holds the duration of every CREATE request sent, failed
	// ones included: the part an admission webhook lengthens.
	Creates []time.Duration
	// Errors counts the iterations that failed; FirstErr is one of them.
	Errors   int
	FirstErr error
	// Elapsed is the wall time of the whole run.
	Elapsed time.Duration
}

// Rate is the iterations per second of the run.
func (r *Result) Rate() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(len(r.Iterations)) / r.Elapsed.Seconds()
}

var podsResource = schema.GroupVersionResource{Version: "v1", Resource: "pods"}

// Run creates cfg.Iterations Pods from cfg.Clients concurrent clients and
// returns every iteration's latency. It stops early when ctx ends.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Mode == "" {
		cfg.Mode = ModeK6
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	rc := rest.CopyConfig(cfg.REST)
	// One client per iteration (k6 mode) never reaches client-go's
	// default limit of 5 requests a second; a shared one would: none.
	rc.QPS, rc.Burst, rc.RateLimiter = -1, 0, nil
	it, err := newIterator(cfg.Mode, rc)
	if err != nil {
		return nil, err
	}
	var (
		next atomic.Int64
		mu   sync.Mutex
		res  = &Result{Iterations: make([]time.Duration, 0, cfg.Iterations), Creates: make([]time.Duration, 0, cfg.Iterations)}
		wg   sync.WaitGroup
	)
	start := time.Now()
	for range cfg.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pod := Pod(cfg.Namespace)
			var iters, creates []time.Duration
			var errs int
			var firstErr error
			for ctx.Err() == nil && next.Add(1) <= int64(cfg.Iterations) {
				ictx, cancel := context.WithTimeout(ctx, cfg.Timeout)
				t0 := time.Now()
				create, err := it(ictx, pod)
				iters = append(iters, time.Since(t0))
				cancel()
				if create > 0 {
					creates = append(creates, create)
				}
				if err != nil {
					errs++
					if firstErr == nil {
						firstErr = err
					}
				}
			}
			mu.Lock()
			defer mu.Unlock()
			res.Iterations = append(res.Iterations, iters...)
			res.Creates = append(res.Creates, creates...)
			res.Errors += errs
			if res.FirstErr == nil {
				res.FirstErr = firstErr
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	return res, ctx.Err()
}

// iterator runs one iteration and returns how long its CREATE took (0
// when it was never sent).
type iterator func(ctx context.Context, pod *unstructured.Unstructured) (time.Duration, error)

func newIterator(mode Mode, rc *rest.Config) (iterator, error) {
	switch mode {
	case ModeReuse:
		dyn, err := dynamic.NewForConfig(rc)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pod *unstructured.Unstructured) (time.Duration, error) {
			return create(ctx, dyn.Resource(podsResource), pod)
		}, nil
	case ModeFresh:
		tlsCfg, err := rest.TLSConfigFor(rc)
		if err != nil {
			return nil, err
		}
		// No keep-alive: every request dials, and the connection closes
		// with its answer.
		tr := &http.Transport{TLSClientConfig: tlsCfg, DisableKeepAlives: true, ForceAttemptHTTP2: false}
		dyn, err := dynamic.NewForConfigAndClient(rc, &http.Client{Transport: tr})
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pod *unstructured.Unstructured) (time.Duration, error) {
			return create(ctx, dyn.Resource(podsResource), pod)
		}, nil
	default:
		hc, err := rest.HTTPClientFor(rc) // client-go's cached transport
		if err != nil {
			return nil, err
		}
		dyn, err := dynamic.NewForConfigAndClient(rc, hc)
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context, pod *unstructured.Unstructured) (time.Duration, error) {
			for _, path := range []string{"/api", "/apis"} {
				if err := discover(ctx, hc, rc.Host+path); err != nil {
					return 0, err
				}
			}
			return create(ctx, dyn.Resource(podsResource), pod)
		}, nil
	}
}

// discoveryAccept is what client-go's discovery client asks for:
// aggregated discovery (v2, else v2beta1), else the plain documents.
const discoveryAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList," +
	"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"

// discover reads one discovery document to its end, as a fresh
// discovery client does, without decoding it.
func discover(ctx context.Context, hc *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", discoveryAccept)
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		return fmt.Errorf("discovery: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("discovery: GET %s: %s", url, resp.Status)
	}
	return nil
}

func create(ctx context.Context, r dynamic.NamespaceableResourceInterface, pod *unstructured.Unstructured) (time.Duration, error) {
	t0 := time.Now()
	_, err := r.Namespace(pod.GetNamespace()).Create(ctx, pod, metav1.CreateOptions{})
	return max(time.Since(t0), time.Nanosecond), err
}

// Pod is the Pod of Kyverno's k6 script (docs/perf-testing/v1.18.1/
// scripts/k6/vpol-script.js) in namespace: restricted Pod Security
// settings, resources, and the affinity and toleration that put it on
// KWOK's fake nodes; every policy set of the benchmark admits it.
func Pod(namespace string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata": map[string]any{
			"generateName": "perf-vpol-",
			"namespace":    namespace,
			"labels":       map[string]any{"app": "perf-test", "env": "prod", "team": "platform"},
			"annotations":  map[string]any{"owner": "perf-test"},
		},
		"spec": map[string]any{
			"securityContext": map[string]any{
				"runAsNonRoot":   true,
				"runAsUser":      int64(1000),
				"seccompProfile": map[string]any{"type": "RuntimeDefault"},
			},
			"containers": []any{map[string]any{
				"name":    "busybox",
				"image":   "busybox:latest",
				"command": []any{"sh", "-c", "sleep 30"},
				"resources": map[string]any{
					"requests": map[string]any{"cpu": "1m", "memory": "8Mi"},
					"limits":   map[string]any{"memory": "32Mi"},
				},
				"securityContext": map[string]any{
					"allowPrivilegeEscalation": false,
					"capabilities":             map[string]any{"drop": []any{"ALL"}},
					"readOnlyRootFilesystem":   true,
					"runAsNonRoot":             true,
				},
			}},
			"affinity": map[string]any{"nodeAffinity": map[string]any{
				"requiredDuringSchedulingIgnoredDuringExecution": map[string]any{
					"nodeSelectorTerms": []any{map[string]any{
						"matchExpressions": []any{map[string]any{"key": "type", "operator": "In", "values": []any{"kwok"}}},
					}},
				},
			}},
			"tolerations": []any{map[string]any{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}},
		},
	}}
}

// EnsureNamespace creates the namespace and its default ServiceAccount
// when missing (a control plane without a controller manager makes no
// ServiceAccount, and the ServiceAccount admission plugin refuses Pods
// without one).
func EnsureNamespace(ctx context.Context, kube kubernetes.Interface, namespace string) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", namespace, err)
	}
	_, err = kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("service account %s/default: %w", namespace, err)
	}
	return nil
}
