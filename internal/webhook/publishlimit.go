package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Without mutual TLS anyone who reaches the webhook's port can send
// reviews, and every review becomes results on VERDICT_RESULTS and perhaps
// work on VERDICT_WORK (issue 28, finding 9: fifteen seconds of forged
// reviews put 447,000 results in the stream). What such a caller makes the
// webhook publish is rate-limited here, per caller address: results over
// the limit are dropped (and counted; background scans reconcile the
// reports), work over it fails to publish (ErrPublishLimited, and
// Config.OnWorkPublishFailure decides the answer). A caller whose client
// certificate was verified (mutual TLS, --client-ca-file) is the API
// server and is never limited. The answers themselves are not limited:
// admission goes on, only what it leaves behind is bounded.

// ErrPublishLimited: a caller without a verified client certificate
// passed its rate of work items (UnverifiedWorkPerSecond).
var ErrPublishLimited = errors.New("webhook: publish rate of callers without a verified client certificate exceeded")

// caller is who sent the request being served, as the sinks see it.
type caller struct {
	verified bool   // a client certificate verified by the client CA
	addr     string // the remote IP
}

type callerKey struct{}

// withCallerOf puts each request's caller into its context, for the
// limited sinks.
func withCallerOf(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, callerOf(r))))
	})
}

func callerOf(r *http.Request) caller {
	c := caller{verified: r.TLS != nil && len(r.TLS.VerifiedChains) > 0, addr: r.RemoteAddr}
	if host, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		c.addr = host
	}
	return c
}

// limited reports whether the caller in ctx is subject to the limits:
// anyone but a verified client (a context without a caller is a call
// from inside the process, never limited).
func limited(ctx context.Context) (caller, bool) {
	c, ok := ctx.Value(callerKey{}).(caller)
	return c, ok && !c.verified
}

// Bounds of the per-caller buckets.
const (
	maxLimitedCallers = 4096        // addresses tracked at once; beyond, they share one bucket
	callerIdle        = time.Minute // a bucket unused this long is forgotten
)

// callerLimiter is a token bucket per caller address: rate tokens a
// second, up to burst. Safe for concurrent use.
type callerLimiter struct {
	rate, burst float64
	now         func() time.Time

	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

func newCallerLimiter(perSecond int, now func() time.Time) *callerLimiter {
	return &callerLimiter{rate: float64(perSecond), burst: 2 * float64(perSecond), now: now, buckets: map[string]*bucket{}}
}

// allow takes n tokens from addr's bucket, or none when it holds fewer.
func (l *callerLimiter) allow(addr string, n int) bool {
	now := l.now()
	l.mu.Lock()
	defer l.mu.Unlock()
	b, ok := l.buckets[addr]
	if !ok {
		if len(l.buckets) >= maxLimitedCallers {
			l.forgetIdle(now)
		}
		if len(l.buckets) >= maxLimitedCallers {
			addr = "" // the overflow bucket, shared
			b = l.buckets[addr]
		}
		if b == nil {
			b = &bucket{tokens: l.burst, last: now}
			l.buckets[addr] = b
		}
	}
	b.tokens = min(l.burst, b.tokens+now.Sub(b.last).Seconds()*l.rate)
	b.last = now
	if b.tokens < float64(n) {
		return false
	}
	b.tokens -= float64(n)
	return true
}

func (l *callerLimiter) forgetIdle(now time.Time) {
	for a, b := range l.buckets {
		if now.Sub(b.last) > callerIdle {
			delete(l.buckets, a)
		}
	}
}

// Labels of verdict_webhook_unverified_publish_limited_total.
const (
	limitedResults   = "results"
	limitedWork      = "work"
	limitedDecisions = "decisions"
)

// limitUnverified wraps the server's sinks with the configured limits
// (UnverifiedResultsPerSecond, UnverifiedWorkPerSecond; 0 is no limit)
// and registers their metric.
func (s *Server) limitUnverified() error {
	refused := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "verdict_webhook_unverified_publish_limited_total",
		Help: "Results and decisions dropped, and work items refused, because a caller without a verified client certificate passed its publish rate (--unverified-results-per-second, which bounds decisions too, --unverified-work-per-second).",
	}, []string{"what"})
	if err := s.registry.Register(refused); err != nil {
		return fmt.Errorf("register metrics: %w", err)
	}
	for _, w := range []string{limitedResults, limitedWork, limitedDecisions} {
		refused.WithLabelValues(w)
	}
	if n := s.cfg.UnverifiedResultsPerSecond; n > 0 {
		s.results = &limitedResultSink{next: s.results, lim: newCallerLimiter(n, time.Now), refused: refused.WithLabelValues(limitedResults)}
		if s.decisions != nil {
			s.decisionLimit, s.decisionsLimited = newCallerLimiter(n, time.Now), refused.WithLabelValues(limitedDecisions)
		}
	}
	if n := s.cfg.UnverifiedWorkPerSecond; n > 0 {
		s.work = &limitedWorkSink{next: s.work, lim: newCallerLimiter(n, time.Now), refused: refused.WithLabelValues(limitedWork)}
	}
	return nil
}

// limitedResultSink drops the results of an unverified caller past its
// rate (a review's results are taken whole or dropped whole).
type limitedResultSink struct {
	next    ResultSink
	lim     *callerLimiter
	refused prometheus.Counter
}

func (l *limitedResultSink) Publish(ctx context.Context, events []ResultEvent) {
	if c, ok := limited(ctx); ok && !l.lim.allow(c.addr, len(events)) {
		l.refused.Add(float64(len(events)))
		return
	}
	l.next.Publish(ctx, events)
}

func (l *limitedResultSink) Flush(ctx context.Context) error { return l.next.Flush(ctx) }

// limitedWorkSink refuses the work items of an unverified caller past its
// rate.
type limitedWorkSink struct {
	next    WorkSink
	lim     *callerLimiter
	refused prometheus.Counter
}

func (l *limitedWorkSink) Publish(ctx context.Context, item WorkItem) error {
	if c, ok := limited(ctx); ok && !l.lim.allow(c.addr, 1) {
		l.refused.Inc()
		return fmt.Errorf("%w: caller %s", ErrPublishLimited, c.addr)
	}
	return l.next.Publish(ctx, item)
}
