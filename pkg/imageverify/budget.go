package imageverify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
)

// ErrResponseBudget: the registry answered one verification with more
// bytes than its budget (WithMaxResponseBytes). A registry is whoever the
// image names, and a signature or attestation image may have a thousand
// layers of cosign's 128 MiB each: without a bound, one hostile image
// could fill the webhook's memory.
var ErrResponseBudget = errors.New("registry responses exceed the verification's budget")

// DefaultMaxResponseBytes is the budget of one verification by default.
const DefaultMaxResponseBytes = 32 << 20

// WithTransport is the HTTP transport of every registry call, through
// which the verifier counts each verification's response bytes against
// its budget (WithMaxResponseBytes). Without it, registry calls use the
// remote options' transport (WithRemoteOptions) and are not counted.
func WithTransport(rt http.RoundTripper) Option {
	return func(v *Verifier) error {
		if rt == nil {
			return errors.New("imageverify: nil transport")
		}
		v.transport = budgetTransport{next: rt}
		return nil
	}
}

// WithMaxResponseBytes bounds the bytes the registries may answer one
// verification (or digest resolution) with, through WithTransport's
// transport. Default DefaultMaxResponseBytes.
func WithMaxResponseBytes(n int64) Option {
	return func(v *Verifier) error {
		if n < 1 {
			return fmt.Errorf("imageverify: max response bytes %d: must be positive", n)
		}
		v.maxResponseBytes = n
		return nil
	}
}

type budgetKey struct{}

// budget is what is left of one verification's response bytes.
type budget struct {
	limit int64
	left  atomic.Int64
}

// withBudget gives ctx a fresh budget of n bytes.
func withBudget(ctx context.Context, n int64) context.Context {
	b := &budget{limit: n}
	b.left.Store(n)
	return context.WithValue(ctx, budgetKey{}, b)
}

// budgetTransport counts the response bodies of requests whose context
// carries a budget.
type budgetTransport struct{ next http.RoundTripper }

func (t budgetTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || resp.Body == nil {
		return resp, err
	}
	if b, ok := req.Context().Value(budgetKey{}).(*budget); ok {
		resp.Body = &countedBody{ReadCloser: resp.Body, b: b}
	}
	return resp, nil
}

type countedBody struct {
	io.ReadCloser
	b *budget
}

func (c *countedBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	if c.b.left.Add(-int64(n)) < 0 {
		return n, fmt.Errorf("%w (%d bytes)", ErrResponseBudget, c.b.limit)
	}
	return n, err
}
