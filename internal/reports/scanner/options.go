package scanner

import (
	"errors"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/client-go/metadata"

	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/platform/kyvernometrics"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
)

// ErrInvalidOption is wrapped by the errors of bad options and of a
// scanner New cannot build.
var ErrInvalidOption = errors.New("scanner: invalid option")

// Option configures New.
type Option func(*options) error

type options struct {
	interval       time.Duration
	pageSize       int64
	concurrency    int
	maxDeliver     int
	waitDeliveries uint64
	kindsTTL       time.Duration
	metadata       metadata.Interface
	reg            prometheus.Registerer
	log            *zerolog.Logger
	now            func() time.Time
	check          *apicheck.Checker
	// served: reports are served from the stream, not written
	// (WithServedReports); served holds the reporter's metrics.
	served *reporter.Metrics
	// kyverno records the scans' rule results under Kyverno's metric
	// names (WithKyvernoMetrics); nil: not recorded.
	kyverno *kyvernometrics.Metrics
	// candidates: candidate policies are evaluated (WithCandidates).
	candidates candidateOptions
}

// candidateOptions are WithCandidates'.
type candidateOptions struct {
	enabled bool
	api     policycache.API
	window  time.Duration
}

// WithCandidates evaluates the candidate policies (the policy source's
// Candidates) in the background: each on the admission log's recorded
// requests of the last window (0: the log is not read) and on the
// cluster's objects, when it is created or changed and on each tick of
// the periodic scan, writing what it would have done to its
// status.candidate through api's resources.
func WithCandidates(api policycache.API, window time.Duration) Option {
	return func(o *options) error {
		if window < 0 {
			return fmt.Errorf("%w: candidate window %s is negative", ErrInvalidOption, window)
		}
		o.candidates = candidateOptions{enabled: true, api: api, window: window}
		return nil
	}
}

// WithServedReports says that reports are served from the stream (the
// reporter's serving mode: an index of VERDICT_RESULTS answers the
// report API), so the scanner writes none: it publishes results and
// retractions and purges the results of deleted resources, which is all
// the serving replicas follow. The writer given to New may then be nil;
// m counts the results the scanner reads.
func WithServedReports(m *reporter.Metrics) Option {
	return func(o *options) error {
		if m == nil {
			return fmt.Errorf("%w: nil reporter metrics", ErrInvalidOption)
		}
		o.served = m
		return nil
	}
}

// WithChecker sets the checker results are verified with (required):
// a scan compares what it evaluates with the newest verified result of
// each resource, as the reports show it.
func WithChecker(c *apicheck.Checker) Option {
	return func(o *options) error {
		if c == nil {
			return fmt.Errorf("%w: nil checker", ErrInvalidOption)
		}
		o.check = c
		return nil
	}
}

// WithInterval sets the period of the full background scan, kept as a
// JetStream message schedule on VERDICT_SCHEDULES (its ticks are sourced
// into VERDICT_WORK). Zero: no periodic scan (policy changes still scan).
// Default 1h; at least 1s.
func WithInterval(d time.Duration) Option {
	return func(o *options) error {
		if d != 0 && d < time.Second {
			return fmt.Errorf("%w: scan interval %s (0, or at least 1s)", ErrInvalidOption, d)
		}
		o.interval = d
		return nil
	}
}

// WithPageSize sets the page size of the resource lists. Default 500.
func WithPageSize(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: scan page size %d", ErrInvalidOption, n)
		}
		o.pageSize = int64(n)
		return nil
	}
}

// WithConcurrency sets how many scan items a replica works on at
// once. Default 2.
func WithConcurrency(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: scan concurrency %d", ErrInvalidOption, n)
		}
		o.concurrency = n
		return nil
	}
}

// WithAttempts bounds the deliveries of a scan item before it is
// dead-lettered. Default 10.
func WithAttempts(n int) Option {
	return func(o *options) error {
		if n < 1 {
			return fmt.Errorf("%w: scan attempts %d", ErrInvalidOption, n)
		}
		o.maxDeliver = n
		return nil
	}
}

// WithReportWatch watches Verdict's reports (metadata only) so that a
// report the garbage collector removed with its resource gets the
// resource's results purged from the stream. nil: no watch (the periodic
// scan still purges them).
func WithReportWatch(client metadata.Interface) Option {
	return func(o *options) error {
		o.metadata = client
		return nil
	}
}

// WithRegisterer registers the scanner's metrics (verdict_scanner_*)
// on reg. Default: a private registry.
func WithRegisterer(reg prometheus.Registerer) Option {
	return func(o *options) error {
		o.reg = reg
		return nil
	}
}

// WithKyvernoMetrics records the rule results of every evaluation of a
// scan under Kyverno's metric names (kyverno_policy_results_total with
// rule_execution_cause background_scan, and its CEL kinds' families), as
// Kyverno counts its background scans. Their durations are the engine's
// rule timings: give the scanner an engine with engine.WithRuleClock.
func WithKyvernoMetrics(m *kyvernometrics.Metrics) Option {
	return func(o *options) error {
		if m == nil {
			return fmt.Errorf("%w: nil Kyverno metrics", ErrInvalidOption)
		}
		o.kyverno = m
		return nil
	}
}

// WithLogger sets the logger.
func WithLogger(l zerolog.Logger) Option {
	return func(o *options) error {
		o.log = &l
		return nil
	}
}
