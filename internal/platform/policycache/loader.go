package policycache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/verdict-dev/verdict/internal/platform/kubeutil"

	"github.com/verdict-dev/verdict/internal/platform/policyhttp"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// ErrResponseTooLarge is returned for an apiCall answer above the limit.
var ErrResponseTooLarge = errors.New("apiCall response too large")

// ErrInvalidOption wraps every error from an invalid Loader option.
var ErrInvalidOption = errors.New("invalid loader option")

// Defaults of a Loader's bounds.
const (
	// DefaultTimeout bounds each configMap read and apiCall.
	DefaultTimeout = 3 * time.Second
	// DefaultMaxBytes is the largest apiCall response accepted: 2 MiB.
	DefaultMaxBytes = 2 << 20
)

// Loader serves rule context entries from the cluster: configMap entries
// and apiCall entries (GET or POST on the API server's paths), each with a
// timeout and a response size limit, and, when the operator turned them
// on (WithHTTP), apiCall entries with a service and CEL's http calls
// through policyhttp's guarded client. globalReference and imageRegistry
// entries are not available yet.
type Loader struct {
	kube     kubernetes.Interface
	http     *policyhttp.Client
	timeout  time.Duration
	maxBytes int
	// protected is Verdict's namespace, whose Secrets no apiCall reads.
	protected kubeutil.Protected
}

// LoaderOption configures a Loader.
type LoaderOption func(*Loader) error

// WithTimeout bounds each call to the API server, within the deadline of
// the evaluation that asks for it. The default is DefaultTimeout.
func WithTimeout(d time.Duration) LoaderOption {
	return func(l *Loader) error {
		if d <= 0 {
			return fmt.Errorf("%w: timeout must be positive, got %s", ErrInvalidOption, d)
		}
		l.timeout = d
		return nil
	}
}

// WithMaxBytes bounds the size of an apiCall response; a larger one is an
// error wrapping ErrResponseTooLarge. The default is DefaultMaxBytes.
func WithMaxBytes(n int) LoaderOption {
	return func(l *Loader) error {
		if n <= 0 {
			return fmt.Errorf("%w: response size limit must be positive, got %d", ErrInvalidOption, n)
		}
		l.maxBytes = n
		return nil
	}
}

// WithHTTP sets the client of service calls (apiCall entries with a
// service, CEL's http.Get and http.Post); nil, the default, refuses them
// with policyhttp.ErrDisabled.
func WithHTTP(c *policyhttp.Client) LoaderOption {
	return func(l *Loader) error {
		l.http = c
		return nil
	}
}

// WithProtectedNamespace refuses apiCalls that would read the Secrets of
// Verdict's namespace ns (kube.Protected): by name, by list, or among
// every namespace's.
func WithProtectedNamespace(ns string) LoaderOption {
	return func(l *Loader) error {
		l.protected = kubeutil.Protected(ns)
		return nil
	}
}

// NewLoader returns a Loader reading from kube.
func NewLoader(kube kubernetes.Interface, opts ...LoaderOption) (*Loader, error) {
	if kube == nil {
		return nil, fmt.Errorf("%w: nil kubernetes client", ErrInvalidOption)
	}
	l := &Loader{kube: kube, timeout: DefaultTimeout, maxBytes: DefaultMaxBytes}
	for _, o := range opts {
		if err := o(l); err != nil {
			return nil, err
		}
	}
	return l, nil
}

var _ engine.ContextLoader = (*Loader)(nil)

// ConfigMap reads a ConfigMap.
func (l *Loader) ConfigMap(ctx context.Context, namespace, name string) (map[string]any, error) {
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	cm, err := l.kube.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("configMap %s/%s: %w", namespace, name, err)
	}
	b, err := json.Marshal(cm)
	if err != nil {
		return nil, err
	}
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, err
	}
	return out, nil
}

// APICall performs a GET or POST on the API server.
func (l *Loader) APICall(ctx context.Context, call *policy.APICall) (any, error) {
	if call.Service != nil {
		return l.serviceCall(ctx, call)
	}
	// The engine sends paths it cleaned and checked (policy.ConfineAPICall);
	// parsing again here keeps this loader safe on its own.
	p, err := policy.ParseAPIPath(call.URLPath)
	if err != nil {
		return nil, err
	}
	if err := l.protected.Check(p.Group, p.Resource, p.Namespace); err != nil {
		return nil, fmt.Errorf("apiCall %s: %w", p.Clean, err)
	}
	if p.Watch || strings.Contains(p.Clean, "watch=") {
		// A watch streams events, not one answer: nothing to read whole,
		// or to filter.
		return nil, fmt.Errorf("%w: apiCall %s: a watch is not an answer", policy.ErrAPICallRefused, p.Clean)
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	rc := l.kube.CoreV1().RESTClient()
	var req *rest.Request
	switch strings.ToUpper(call.Method) {
	case "", "GET":
		req = rc.Get()
	case "POST":
		body := map[string]any{}
		for _, d := range call.Data {
			body[d.Key] = d.Value
		}
		b, merr := json.Marshal(body)
		if merr != nil {
			return nil, merr
		}
		req = rc.Post().Body(b)
	default:
		return nil, fmt.Errorf("apiCall method %q: only GET and POST", call.Method)
	}
	raw, err := l.readLimited(ctx, req.RequestURI(p.Clean), p.Clean)
	if err != nil {
		return nil, err
	}
	v, err := document.Decode(raw)
	if err == nil && p.Namespace == "" {
		v = l.protected.FilterList(p.Group, p.Resource, v)
	}
	if err != nil {
		return nil, fmt.Errorf("apiCall %s: response is not JSON: %w", call.URLPath, err)
	}
	return v, nil
}

// readLimited reads the answer to req without holding more than the
// size limit: a larger answer is ErrResponseTooLarge, whatever its size.
func (l *Loader) readLimited(ctx context.Context, req *rest.Request, path string) ([]byte, error) {
	body, err := req.Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("apiCall %s: %w", path, err)
	}
	defer func() { _ = body.Close() }() // read only: nothing to lose
	raw, err := io.ReadAll(io.LimitReader(body, int64(l.maxBytes)+1))
	if err != nil {
		return nil, fmt.Errorf("apiCall %s: %w", path, err)
	}
	if len(raw) > l.maxBytes {
		return nil, fmt.Errorf("%w: more than %d bytes from %s", ErrResponseTooLarge, l.maxBytes, path)
	}
	return raw, nil
}

// serviceCall performs an apiCall on a service (CEL's http calls come
// this way too): GET, or POST with the data as a JSON object; the answer
// must be JSON.
func (l *Loader) serviceCall(ctx context.Context, call *policy.APICall) (any, error) {
	method := strings.ToUpper(call.Method)
	var body []byte
	switch method {
	case "", "GET":
		method = "GET"
	case "POST":
		m := make(map[string]any, len(call.Data))
		for _, d := range call.Data {
			m[d.Key] = d.Value
		}
		b, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		body = b
	default:
		return nil, fmt.Errorf("apiCall method %q: only GET and POST", call.Method)
	}
	headers := map[string]string{}
	for _, h := range call.Service.Headers {
		if m, ok := h.(map[string]any); ok {
			k, _ := m["key"].(string)
			v, _ := m["value"].(string)
			if k != "" {
				headers[k] = v
			}
		}
	}
	raw, err := l.http.Do(ctx, method, call.Service.URL, call.Service.CABundle, body, headers)
	if err != nil {
		return nil, fmt.Errorf("apiCall service: %w", err)
	}
	v, err := document.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("apiCall %s: response is not JSON: %w", call.Service.URL, err)
	}
	return v, nil
}

// GlobalReference is not available yet.
func (l *Loader) GlobalReference(context.Context, string) (any, error) {
	return nil, engine.ErrNotAvailable
}

// ImageData is not available yet.
func (l *Loader) ImageData(context.Context, string) (any, error) {
	return nil, engine.ErrNotAvailable
}
