package webhook

import (
	"errors"
	"fmt"
	"runtime"
	"time"

	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
)

// WorkFailureMode is what the webhook answers when generate work cannot be
// made durable in time.
type WorkFailureMode string

// Work failure modes.
const (
	// WorkFailureDeny denies the request: nothing is admitted that the
	// generator does not know about.
	WorkFailureDeny WorkFailureMode = "deny"
	// WorkFailureAllow admits the request with a warning; generateExisting
	// and background scans reconcile later.
	WorkFailureAllow WorkFailureMode = "allow"
)

// shutdownReserve is the part of Config.ShutdownBudget kept for what
// follows Serve: closing the publisher and the connections.
const shutdownReserve = time.Second

// ShutdownReserve is what Serve leaves of the shutdown budget to its
// caller, to close its connections.
func ShutdownReserve() time.Duration { return shutdownReserve }

// Config is the configuration of the webhook service. DefaultConfig gives
// the defaults; cmd/webhook binds every field to a kebab-case flag.
type Config struct {
	// Address is where the HTTPS server listens.
	Address string
	// ProbeAddress, when set, also serves /healthz, /readyz and /metrics
	// over plain HTTP there (for probes and scrapers that do not speak TLS
	// to the webhook, and to answer readiness before a certificate exists).
	ProbeAddress string
	// Pprof serves Go's profiles (/debug/pprof/) on the probe address (off
	// by default; never on the HTTPS address, which the API server and
	// anything else that reaches the Service can call).
	Pprof bool

	// CertFile and KeyFile are the serving certificate (PEM chain) and
	// private key; they are reloaded when they change.
	CertFile string
	KeyFile  string
	// CertReloadInterval is how often the files are checked for changes.
	CertReloadInterval time.Duration
	// ClientCAFile, when set, turns on mutual TLS: the handshake fails
	// unless the caller presents a client certificate signed by one of
	// these CAs (the API server presents one through its admission
	// configuration's kubeConfigFile). Reloaded when it changes.
	ClientCAFile string

	// MaxRequestBytes limits request bodies; larger ones get 413.
	MaxRequestBytes int64
	// MaxConcurrentBodyReads bounds the request bodies being read at once
	// (before the evaluation slots: a slow client holds no slot); one more
	// is answered 429 at once. Each read ends at the request's deadline.
	MaxConcurrentBodyReads int
	// MaxBodyBytesInFlight bounds the memory of the bodies being read and
	// evaluated, charged as they arrive (a declared length is not
	// allocated up front); a body that would pass it is answered 429.
	MaxBodyBytesInFlight int64
	// RequestTimeout bounds one admission request, from its headers to
	// its answer (the body's read included); the API server's ?timeout=
	// query parameter lowers it. The answer goes out by then less a
	// margin (a tenth, at most 250ms), an evaluation that overruns it is
	// answered 504.
	RequestTimeout time.Duration
	// MaxWarnings caps the warnings of one admission response.
	MaxWarnings int
	// DecisionObjects selects the admitted objects the admission log
	// records with their decisions (docs/decisions.md): none by default.
	DecisionObjects DecisionObjects
	// MaxConcurrentEvaluations bounds the admission and policy-validation
	// requests evaluated at once; EvaluationQueueTimeout is how long one
	// more waits for a slot before it is answered 429 (and the API server
	// applies the webhook's failurePolicy).
	MaxConcurrentEvaluations int
	EvaluationQueueTimeout   time.Duration

	// WorkPublishTimeout is how long the webhook waits for generate work to
	// be acknowledged before answering, at most: the request's deadline
	// less a second bounds it too. The request's evaluation slot is
	// given back while it waits.
	WorkPublishTimeout time.Duration
	// OnWorkPublishFailure decides the answer when it is not.
	OnWorkPublishFailure WorkFailureMode

	// UnverifiedResultsPerSecond and UnverifiedWorkPerSecond bound what a
	// caller without a verified client certificate (no --client-ca-file:
	// anyone who reaches the port) makes the webhook publish, per caller
	// address, with bursts of twice as much: results past the rate are
	// dropped and counted, work past it fails to publish
	// (OnWorkPublishFailure decides). 0 is no limit. A verified caller
	// is never limited.
	UnverifiedResultsPerSecond int
	UnverifiedWorkPerSecond    int

	// ShutdownDelay is how long the server keeps serving with /readyz
	// failing after a termination signal, so that endpoints drop the
	// replica before it stops accepting.
	ShutdownDelay time.Duration
	// ShutdownGracePeriod bounds the wait for in-flight requests.
	ShutdownGracePeriod time.Duration
	// FlushTimeout bounds the flush of buffered results at exit.
	FlushTimeout time.Duration
	// ShutdownBudget bounds the whole shutdown, from the signal to the
	// return of Serve, whatever the steps above are set to: the drain is
	// cut short so that the flush still fits. Keep it under the pod's
	// terminationGracePeriodSeconds (30s by default), or the kubelet kills
	// the process with results still buffered.
	ShutdownBudget time.Duration

	// ExcludedNamespaces and ExcludedResources (resource[.group][/sub])
	// are added to admissionfilter's defaults: requests for them are
	// admitted without evaluation, and the registrar keeps them out of
	// every webhook configuration.
	ExcludedNamespaces []string
	ExcludedResources  []string

	// Shadow evaluates without effect: every admission request is allowed
	// unchanged, with no warning, and no generate or mutate-existing work
	// is queued; the validating endpoints still publish the results, a
	// request they would have denied included (a shadow of a running
	// Kyverno: docs/migrating-from-kyverno.md).
	Shadow bool

	// KyvernoMetrics also records the evaluations under the metric names
	// and labels Kyverno exports (kyverno_admission_requests_total,
	// kyverno_policy_results_total, ...: internal/platform/kyvernometrics),
	// for dashboards built for Kyverno, and times each rule for their
	// durations. Off by default: the admission path then pays nothing for
	// them.
	KyvernoMetrics bool

	// PolicyPaths are files or directories of ClusterPolicies, Policies
	// and PolicyExceptions served as a fixed set (StaticSource). The
	// cluster-backed source replaces it when the informers arrive.
	PolicyPaths []string

	// Log is the logger's level and format.
	Log platform.LogConfig
}

// DefaultConfig returns the defaults: listen on :9443, 8 MiB bodies, 10s
// evaluations, deny when generate work is not durable within 2s, a 5s
// drain delay, a 15s grace period and a 4s flush, all inside a 25s
// shutdown budget (Kubernetes' default termination grace is 30s).
func DefaultConfig() Config {
	return Config{
		Address:            ":9443",
		CertReloadInterval: 10 * time.Second,
		MaxRequestBytes:    8 << 20,
		// Far more than the slots: a read costs a goroutine and what
		// arrived, and the API server sends a review at once.
		MaxConcurrentBodyReads: 1024,
		// Sixteen 8 MiB bodies, a few thousand ordinary reviews.
		MaxBodyBytesInFlight: 128 << 20,
		RequestTimeout:       10 * time.Second,
		MaxWarnings:          10,
		// Evaluations are CPU-bound: a few per core keep the cores busy
		// while one waits on a context loader.
		MaxConcurrentEvaluations: max(8, 4*runtime.GOMAXPROCS(0)),
		EvaluationQueueTimeout:   time.Second,
		// Long enough to ride out a stream leader election (JetStream's
		// Raft elects within 4 to 9 s of losing a leader); the request's
		// own deadline cuts it further (workPublishBudget).
		WorkPublishTimeout:   9 * time.Second,
		OnWorkPublishFailure: WorkFailureDeny,
		ShutdownDelay:        5 * time.Second,
		ShutdownGracePeriod:  15 * time.Second,
		FlushTimeout:         4 * time.Second,
		ShutdownBudget:       25 * time.Second,
		Log:                  platform.DefaultLogConfig(),

		// An API server at 500 admissions a second with 10 policies
		// each, per address; a forged flood is cut to as much.
		UnverifiedResultsPerSecond: 5000,
		UnverifiedWorkPerSecond:    200,
	}
}

// Validate returns every problem of the configuration, each wrapping
// ErrInvalidConfig.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...)))
	}
	if c.Address == "" {
		bad("address is required")
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		bad("tls-cert-file and tls-private-key-file go together")
	}
	if c.CertReloadInterval <= 0 {
		bad("tls-reload-interval must be positive, not %s", c.CertReloadInterval)
	}
	if c.MaxRequestBytes <= 0 {
		bad("max-request-bytes must be positive, not %d", c.MaxRequestBytes)
	}
	if c.MaxConcurrentBodyReads <= 0 {
		bad("max-concurrent-body-reads must be positive, not %d", c.MaxConcurrentBodyReads)
	}
	if c.MaxBodyBytesInFlight < c.MaxRequestBytes {
		bad("max-body-bytes-in-flight (%d) must hold at least one body of max-request-bytes (%d)", c.MaxBodyBytesInFlight, c.MaxRequestBytes)
	}
	if c.RequestTimeout <= 0 {
		bad("request-timeout must be positive, not %s", c.RequestTimeout)
	}
	if c.MaxConcurrentEvaluations <= 0 {
		bad("max-concurrent-evaluations must be positive, not %d", c.MaxConcurrentEvaluations)
	}
	if c.EvaluationQueueTimeout < 0 {
		bad("evaluation-queue-timeout must not be negative, not %s", c.EvaluationQueueTimeout)
	}
	if c.MaxWarnings < 0 {
		bad("max-warnings must not be negative, not %d", c.MaxWarnings)
	}
	if err := c.DecisionObjects.validate(); err != nil {
		bad("%v", err)
	}
	if c.WorkPublishTimeout <= 0 {
		bad("work-publish-timeout must be positive, not %s", c.WorkPublishTimeout)
	}
	if c.UnverifiedResultsPerSecond < 0 || c.UnverifiedWorkPerSecond < 0 {
		bad("unverified-results-per-second (%d) and unverified-work-per-second (%d) must not be negative",
			c.UnverifiedResultsPerSecond, c.UnverifiedWorkPerSecond)
	}
	switch c.OnWorkPublishFailure {
	case WorkFailureDeny, WorkFailureAllow:
	default:
		bad("on-work-publish-failure must be deny or allow, not %q", c.OnWorkPublishFailure)
	}
	if c.ShutdownDelay < 0 {
		bad("shutdown-delay must not be negative, not %s", c.ShutdownDelay)
	}
	if c.ShutdownGracePeriod <= 0 {
		bad("shutdown-grace-period must be positive, not %s", c.ShutdownGracePeriod)
	}
	if c.FlushTimeout <= 0 {
		bad("flush-timeout must be positive, not %s", c.FlushTimeout)
	}
	if c.ShutdownBudget <= 0 {
		bad("shutdown-budget must be positive, not %s", c.ShutdownBudget)
	} else if c.ShutdownDelay+c.FlushTimeout+shutdownReserve >= c.ShutdownBudget {
		bad("shutdown-delay (%s) + flush-timeout (%s) + %s for closing leave no time to drain requests within shutdown-budget (%s)",
			c.ShutdownDelay, c.FlushTimeout, shutdownReserve, c.ShutdownBudget)
	}
	for _, r := range c.ExcludedResources {
		if _, err := admissionfilter.ParseResource(r); err != nil {
			bad("excluded-resources: %v", err)
		}
	}
	if err := c.Log.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
	}
	return errors.Join(errs...)
}

// Filter is what the webhook never evaluates: admissionfilter's defaults
// with ExcludedNamespaces and ExcludedResources added.
func (c *Config) Filter() (admissionfilter.Filter, error) {
	res := make([]admissionfilter.Resource, 0, len(c.ExcludedResources))
	for _, s := range c.ExcludedResources {
		r, err := admissionfilter.ParseResource(s)
		if err != nil {
			return admissionfilter.Filter{}, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		res = append(res, r)
	}
	return admissionfilter.New(c.ExcludedNamespaces, res), nil
}
