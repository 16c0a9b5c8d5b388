package policycache

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/policyhttp"
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
	if !strings.HasPrefix(call.URLPath, "/") {
		return nil, fmt.Errorf("apiCall urlPath %q must start with /", call.URLPath)
	}
	ctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	rc := l.kube.CoreV1().RESTClient()
	var raw []byte
	var err error
	switch strings.ToUpper(call.Method) {
	case "", "GET":
		raw, err = rc.Get().AbsPath(call.URLPath).Do(ctx).Raw()
	case "POST":
		body := map[string]any{}
		for _, d := range call.Data {
			body[d.Key] = d.Value
		}
		b, merr := json.Marshal(body)
		if merr != nil {
			return nil, merr
		}
		raw, err = rc.Post().AbsPath(call.URLPath).Body(b).Do(ctx).Raw()
	default:
		return nil, fmt.Errorf("apiCall method %q: only GET and POST", call.Method)
	}
	if err != nil {
		return nil, fmt.Errorf("apiCall %s: %w", call.URLPath, err)
	}
	if len(raw) > l.maxBytes {
		return nil, fmt.Errorf("%w: %d bytes from %s (limit %d)", ErrResponseTooLarge, len(raw), call.URLPath, l.maxBytes)
	}
	v, err := document.Decode(raw)
	if err != nil {
		return nil, fmt.Errorf("apiCall %s: response is not JSON: %w", call.URLPath, err)
	}
	return v, nil
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
