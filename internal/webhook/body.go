package webhook

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"os"
	"sync/atomic"
	"time"
)

// Bodies are read before a request takes an evaluation slot (issue 28,
// finding 3: eight connections that sent a byte a second held every slot),
// within the request's deadline, by at most Config.MaxConcurrentBodyReads
// requests at once, into buffers that grow with what arrives (a declared
// length is not allocated up front past firstBodyChunk) and that together
// hold at most Config.MaxBodyBytesInFlight.

// firstBodyChunk is what a body's buffer starts at when its length is
// declared larger: an admission review is a few KiB, and a client that
// declares megabytes gets them allocated only as it sends them.
const firstBodyChunk = 64 << 10

// Reasons of verdict_webhook_refused_reviews_total for bodies.
const (
	// refusedBodyTimeout: the body did not arrive before the request's
	// deadline (408).
	refusedBodyTimeout = "bodyTimeout"
	// refusedBodyReaders: MaxConcurrentBodyReads bodies were being read
	// (429).
	refusedBodyReaders = "bodyReaders"
	// refusedBodyBytes: the bodies being read or evaluated hold
	// MaxBodyBytesInFlight (429).
	refusedBodyBytes = "bodyBytes"
)

// bodies bounds the bodies being read and held.
type bodies struct {
	limit    int64
	readers  chan struct{}
	inFlight atomic.Int64
	budget   int64
	refused  func(reason string)
}

// bodyKey holds a request's body in its context, once withBody read it.
type bodyKey struct{}

// withBody reads the request's body before the handlers after it run
// (the evaluation slot among them) and gives it to them in the context.
func (b *bodies) withBody() Decorator {
	return func(next Handler) Handler {
		return func(ctx context.Context, r *http.Request) (*Reply, error) {
			select {
			case b.readers <- struct{}{}:
			default:
				b.refused(refusedBodyReaders)
				return nil, httpError(ErrOverloaded, nil, "%d request bodies are being read", cap(b.readers))
			}
			body, held, err := b.read(ctx, r)
			<-b.readers
			defer b.inFlight.Add(-held)
			if err != nil {
				return nil, err
			}
			return next(context.WithValue(ctx, bodyKey{}, body), r)
		}
	}
}

// bodyFrom is the body withBody read.
func bodyFrom(ctx context.Context) ([]byte, error) {
	body, ok := ctx.Value(bodyKey{}).([]byte)
	if !ok {
		return nil, httpError(ErrInternal, nil, "no request body read")
	}
	return body, nil
}

// read checks the method and the content type and reads at most b.limit
// bytes before ctx's deadline; it returns the body and the bytes it
// charged to the budget (to give back once the request is done).
func (b *bodies) read(ctx context.Context, r *http.Request) (body []byte, held int64, err error) {
	if r.Method != http.MethodPost {
		return nil, 0, httpError(ErrMethodNotAllowed, nil, "method %s not allowed, use POST", r.Method)
	}
	// The API server's own header, as it writes it, needs no parsing.
	if ct := r.Header.Get("Content-Type"); ct != contentTypeJSON {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || mt != contentTypeJSON {
			return nil, 0, httpError(ErrUnsupportedMediaType, nil, "content type %q is not %s", ct, contentTypeJSON)
		}
	}
	if r.ContentLength > b.limit {
		return nil, 0, httpError(ErrRequestTooLarge, nil, "request body of %d bytes exceeds the limit of %d", r.ContentLength, b.limit)
	}
	if dl, ok := ctx.Deadline(); ok {
		if a, ok := ctx.Value(answerKey{}).(*answer); ok {
			// The connection's reads end at the deadline; net/http sets
			// the next request's own before reading it.
			_ = http.NewResponseController(a.w).SetReadDeadline(dl)
		}
	}
	// A declared length is read into one buffer of that size when it is
	// small (the API server declares it); a larger or undeclared one grows
	// as it arrives.
	want := b.limit + 1
	if r.ContentLength > 0 {
		want = r.ContentLength
	}
	body, held, err = b.grow(nil, min(want, firstBodyChunk), 0)
	for err == nil {
		var n int
		n, err = r.Body.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		switch {
		case err != nil:
		case int64(len(body)) > b.limit:
			err = errTooLarge
		case len(body) == cap(body) && int64(len(body)) < want:
			body, held, err = b.grow(body, min(want, 2*int64(cap(body))), held)
		case len(body) == cap(body):
			// As much as declared: one more read finds the end.
			var one [1]byte
			if n, _ = r.Body.Read(one[:]); n > 0 {
				err = errTooLarge
			} else {
				err = io.EOF
			}
		}
	}
	switch {
	case errors.Is(err, io.EOF):
	case errors.Is(err, errTooLarge):
		return nil, held, httpError(ErrRequestTooLarge, nil, "request body exceeds the limit of %d bytes", b.limit)
	case errors.Is(err, errBodyBudget):
		b.refused(refusedBodyBytes)
		return nil, held, httpError(ErrOverloaded, nil, "request bodies being read and evaluated hold %d bytes", b.budget)
	case errors.Is(err, os.ErrDeadlineExceeded) || ctx.Err() != nil:
		b.refused(refusedBodyTimeout)
		return nil, held, httpError(ErrRequestTimeout, err, "%d bytes of the request body arrived before the request's deadline", len(body))
	default:
		return nil, held, httpError(ErrBadRequest, err, "read request body")
	}
	if r.ContentLength > 0 && int64(len(body)) != r.ContentLength {
		return nil, held, httpError(ErrBadRequest, io.ErrUnexpectedEOF, "read request body: %d of %d bytes", len(body), r.ContentLength)
	}
	if len(body) == 0 {
		return nil, held, httpError(ErrBadRequest, nil, "empty request body")
	}
	return body, held, nil
}

var (
	errTooLarge   = errors.New("body over the limit")
	errBodyBudget = errors.New("body budget spent")
)

// grow returns buf with capacity size, charging the difference to the
// budget (held is what buf holds already; the result, what the new one
// does).
func (b *bodies) grow(buf []byte, size, held int64) ([]byte, int64, error) {
	more := size - int64(cap(buf))
	if b.inFlight.Add(more) > b.budget {
		b.inFlight.Add(-more)
		return buf, held, errBodyBudget
	}
	out := make([]byte, len(buf), size)
	copy(out, buf)
	return out, held + more, nil
}

// withAnswerBy answers the request by its context's deadline whatever
// the handlers after it do: they run with a deadline a little earlier (so
// that what notices it still answers in time), and if they have not
// returned by the deadline a timer answers 504, which the API server takes
// as the webhook's failure (its failurePolicy decides), while they go on
// to their end (keeping the evaluation slot). The handlers run on the
// request's own goroutine: a goroutine per request doubled the round
// trip's latency.
func withAnswerBy() Decorator {
	return func(next Handler) Handler {
		return func(ctx context.Context, r *http.Request) (*Reply, error) {
			dl, ok := ctx.Deadline()
			a, hasAnswer := ctx.Value(answerKey{}).(*answer)
			if !ok || !hasAnswer {
				return next(ctx, r)
			}
			left := time.Until(dl)
			hctx, cancel := context.WithDeadline(ctx, dl.Add(-evaluationGrace(left)))
			defer cancel()
			late := func() error {
				return httpError(ErrDeadline, nil, "evaluation not finished within the request's deadline (%s)", left.Round(time.Millisecond))
			}
			t := time.AfterFunc(left, func() { a.send(errorReply(late()), true) })
			reply, err := next(hctx, r)
			if !t.Stop() && a.sentEarly() {
				// Answered already: what the handlers decided went nowhere.
				return nil, late()
			}
			return reply, err
		}
	}
}

// evaluationGrace is how long before the answer's deadline (left from
// now) the evaluation's own ends: time for an engine that notices its
// deadline between two steps to answer before the fallback does.
func evaluationGrace(left time.Duration) time.Duration {
	return min(250*time.Millisecond, left/8)
}

// answerMarginOf is what is kept, out of a request's timeout d, to send
// its answer: the API server's clock started before ours.
func answerMarginOf(d time.Duration) time.Duration {
	return min(250*time.Millisecond, d/10)
}
