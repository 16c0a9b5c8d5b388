package webhook

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/platform/kyvernometrics"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
)

// Outcome labels how a request ended, in metrics and logs.
type Outcome string

// Outcomes.
const (
	OutcomeAllowed Outcome = "allowed"
	OutcomeWarned  Outcome = "warned"
	OutcomeDenied  Outcome = "denied"
	OutcomePatched Outcome = "patched"
	OutcomeOK      Outcome = "ok"
	OutcomeUnready Outcome = "unready"
	// OutcomeRejected: the request could not be read (4xx).
	OutcomeRejected Outcome = "rejected"
	// OutcomeError: the server failed (5xx), panics included.
	OutcomeError Outcome = "error"
	// OutcomeSkipped: the request is for an excluded namespace or
	// resource (admissionfilter) and was admitted without evaluation.
	OutcomeSkipped Outcome = "skipped"
	// OutcomeOverloaded: no evaluation slot freed up in time (429).
	OutcomeOverloaded Outcome = "overloaded"
	// OutcomeTimedOut: the evaluation overran the request's deadline and
	// the request was answered 504 without it.
	OutcomeTimedOut Outcome = "timeout"
)

const (
	contentTypeJSON = "application/json"
	contentTypeText = "text/plain; charset=utf-8"
)

// Reply is what a Handler answers.
type Reply struct {
	// Code is the HTTP status; 0 means 200.
	Code        int
	ContentType string
	Body        []byte
	// Outcome labels the request in metrics and logs.
	Outcome Outcome
	// sent, when set, runs once this reply went out as the answer (not
	// when an early answer, the deadline's, took its place): what is
	// recorded of an answer is what the caller got, after it got it.
	sent func()
}

// Handler serves one request of one endpoint. Every endpoint has this
// signature; an error is answered as a metav1.Status with the code of the
// *Error it wraps (500 for any other error).
type Handler func(ctx context.Context, r *http.Request) (*Reply, error)

// Decorator wraps a Handler with one concern (panics, timeouts, metrics,
// logging).
type Decorator func(Handler) Handler

// decorate wraps h so that the first decorator is the outermost.
func decorate(h Handler, ds ...Decorator) Handler {
	for i := len(ds) - 1; i >= 0; i-- {
		h = ds[i](h)
	}
	return h
}

// httpHandler adapts a Handler to net/http. The request's answer is
// written once: by withAnswerBy at the deadline, or here.
func httpHandler(h Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		a := &answer{w: w}
		ctx := context.WithValue(r.Context(), answerKey{}, a)
		reply, err := h(ctx, r.WithContext(ctx))
		switch {
		case err != nil:
			reply = errorReply(err)
		case reply == nil:
			reply = errorReply(httpError(ErrInternal, nil, "handler returned no reply"))
		}
		if a.send(reply, false) && reply.sent != nil {
			reply.sent()
		}
	})
}

// answer is a request's ResponseWriter, written once. Whoever sends the
// answer holds its lock while writing, so that ServeHTTP, which sends it
// or waits to, never returns while another goroutine (withAnswerBy's
// timer) still writes.
type answer struct {
	w  http.ResponseWriter
	mu sync.Mutex
	// sent: the answer went out; early: withAnswerBy sent it, before the
	// handler returned.
	sent, early bool
	// review and allowed are the decoded admission request and whether
	// its decision allowed it, kept by admissionHandler for withMetrics
	// only when Kyverno's metrics are on (Config.KyvernoMetrics).
	review  *review
	allowed bool
}

// answerKey holds the request's *answer in its context.
type answerKey struct{}

// send writes reply unless an answer went out already, and reports
// whether it did; early flushes it at once (the handler still runs).
func (a *answer) send(reply *Reply, early bool) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.sent {
		return false
	}
	a.sent, a.early = true, early
	hdr := a.w.Header()
	if reply.ContentType != "" {
		hdr.Set("Content-Type", reply.ContentType)
	}
	if early {
		// The handler still holds the connection (HTTP/1.1 serves one
		// request at a time on it): the client must not send another.
		hdr.Set("Connection", "close")
	}
	// Declared, so that an answer over net/http's 2 KiB buffer goes out
	// whole rather than chunked.
	hdr.Set("Content-Length", strconv.Itoa(len(reply.Body)))
	code := reply.Code
	if code == 0 {
		code = http.StatusOK
	}
	a.w.WriteHeader(code)
	_, _ = a.w.Write(reply.Body)
	if early {
		_ = http.NewResponseController(a.w).Flush()
	}
	return true
}

// sentEarly reports whether withAnswerBy sent the answer.
func (a *answer) sentEarly() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.early
}

// outcomeOf is the outcome of a finished request.
func outcomeOf(reply *Reply, err error) Outcome {
	if err != nil {
		return errorOutcome(err)
	}
	if reply == nil {
		return OutcomeError
	}
	if reply.Outcome != "" {
		return reply.Outcome
	}
	return OutcomeOK
}

// withRecover turns a panic into a 500 and counts it; the server keeps
// serving.
func withRecover(m *metrics, endpoint string) Decorator {
	// At 0 from the start: an alert on its increase then fires at the
	// first panic.
	m.panics.WithLabelValues(endpoint)
	return func(next Handler) Handler {
		return func(ctx context.Context, r *http.Request) (reply *Reply, err error) {
			defer func() {
				if rec := recover(); rec != nil {
					m.panics.WithLabelValues(endpoint).Inc()
					logFrom(ctx).Error().Str(logkey.Panic, fmt.Sprint(rec)).Bytes(logkey.Stack, debug.Stack()).Msg("panic recovered")
					reply, err = nil, httpError(ErrInternal, nil, "internal error: panic while serving %s", endpoint)
				}
			}()
			return next(ctx, r)
		}
	}
}

// withTimeout bounds the request's context by max, lowered by the API
// server's ?timeout= parameter when it sends one, less the margin kept to
// send the answer (answerMarginOf): the context's deadline is when the
// answer goes out.
func withTimeout(max time.Duration) Decorator {
	return func(next Handler) Handler {
		return func(ctx context.Context, r *http.Request) (*Reply, error) {
			d := max
			if s := r.URL.Query().Get("timeout"); s != "" {
				if t, err := time.ParseDuration(s); err == nil && t > 0 && t < d {
					d = t
				}
			}
			ctx, cancel := context.WithTimeout(ctx, d-answerMarginOf(d))
			defer cancel()
			return next(ctx, r.WithContext(ctx))
		}
	}
}

// withConcurrencyLimit lets at most cap(slots) requests past it at once
// (they share slots across endpoints). A request waits for a slot at most
// queueTimeout (or until its context ends) and is then answered
// ErrOverloaded at once: a flood is answered quickly, never queued
// without limit, and the API server applies the webhook's failurePolicy.
func withConcurrencyLimit(slots chan struct{}, queueTimeout time.Duration, m *metrics) Decorator {
	return func(next Handler) Handler {
		return func(ctx context.Context, r *http.Request) (*Reply, error) {
			select {
			case slots <- struct{}{}:
			default:
				t := time.NewTimer(queueTimeout)
				select {
				case slots <- struct{}{}:
					t.Stop()
				case <-t.C:
					m.overloaded.Inc()
					return nil, httpError(ErrOverloaded, nil, "%d evaluations running, none finished within %s", cap(slots), queueTimeout)
				case <-ctx.Done():
					t.Stop()
					m.overloaded.Inc()
					return nil, httpError(ErrOverloaded, ctx.Err(), "%d evaluations running", cap(slots))
				}
			}
			m.inFlight.Inc()
			var once sync.Once
			release := func() {
				once.Do(func() {
					m.inFlight.Dec()
					<-slots
				})
			}
			defer release()
			return next(context.WithValue(ctx, slotKey{}, release), r)
		}
	}
}

// slotKey holds, in a request's context, the function that gives its
// evaluation slot back.
type slotKey struct{}

// releaseSlot gives the request's evaluation slot back before the
// request is answered: for a request whose evaluation is done and which
// only waits on I/O (JetStream acknowledging its generate work, seconds
// during a stream leader election), so that the wait does not starve the
// evaluations of other requests, Pods included. It may be called more
// than once, and on a context without a slot.
func releaseSlot(ctx context.Context) {
	if release, ok := ctx.Value(slotKey{}).(func()); ok {
		release()
	}
}

// withMetrics counts requests by outcome and observes their latency;
// with Kyverno's metrics on, it also records each answered admission
// review under Kyverno's names (an error answer counts as not allowed).
func withMetrics(m *metrics, endpoint string) Decorator {
	webhook := kyvernometrics.Validating
	if strings.HasPrefix(endpoint, "mutate") {
		webhook = kyvernometrics.Mutating
	}
	return func(next Handler) Handler {
		return func(ctx context.Context, r *http.Request) (*Reply, error) {
			start := time.Now()
			reply, err := next(ctx, r)
			took := time.Since(start)
			m.latency.WithLabelValues(endpoint).Observe(took.Seconds())
			m.requests.WithLabelValues(endpoint, string(outcomeOf(reply, err))).Inc()
			if m.kyverno != nil {
				if a, ok := ctx.Value(answerKey{}).(*answer); ok && a.review != nil {
					req := a.review.req
					m.kyverno.Admission(webhook, req.Kind.Kind, req.Namespace, string(req.Operation), err == nil && a.allowed, took)
				}
			}
			return reply, err
		}
	}
}

// withLogger puts a logger for the endpoint into the context and logs the
// end of every request: errors and denials at info or above, the rest at
// debug.
func withLogger(base zerolog.Logger, endpoint string) Decorator {
	return func(next Handler) Handler {
		return func(ctx context.Context, r *http.Request) (*Reply, error) {
			l := base.With().Str(logkey.Endpoint, endpoint).Logger()
			ctx = l.WithContext(ctx)
			start := time.Now()
			reply, err := next(ctx, r.WithContext(ctx))
			outcome := outcomeOf(reply, err)
			var ev *zerolog.Event
			switch outcome {
			case OutcomeError:
				ev = logFrom(ctx).Error().Err(err)
			case OutcomeRejected:
				ev = logFrom(ctx).Info().Err(err)
			case OutcomeDenied:
				ev = logFrom(ctx).Info()
			default:
				ev = logFrom(ctx).Debug()
			}
			ev.Str(logkey.Outcome, string(outcome)).Dur(logkey.Duration, time.Since(start)).Msg("request served")
			return reply, err
		}
	}
}
