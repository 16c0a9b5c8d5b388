package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// Endpoint paths. PathMutate and PathValidate evaluate every policy (files
// mode, a configuration written by hand with one webhook); the registrar
// points the shared webhooks at PathMutateCluster and PathValidateCluster
// (the cluster policies only) and each tenant's webhooks at
// PathMutateNamespaced and PathValidateNamespaced (the namespaced policies
// of the request's namespace only), so that a request that reaches both
// evaluates each policy once.
const (
	PathMutate             = "/mutate"
	PathValidate           = "/validate"
	PathMutateCluster      = "/mutate-cluster"
	PathValidateCluster    = "/validate-cluster"
	PathMutateNamespaced   = "/mutate-namespaced"
	PathValidateNamespaced = "/validate-namespaced"
	PathValidatePolicy     = "/validate-policy"
	PathHealthz            = "/healthz"
	PathReadyz             = "/readyz"
	PathMetrics            = "/metrics"
)

// Registry is where the server registers and gathers metrics.
type Registry interface {
	prometheus.Registerer
	prometheus.Gatherer
}

// Server is the admission webhook. Create it with New, serve it with Serve
// (or Run, which also listens).
type Server struct {
	cfg        Config
	log        zerolog.Logger
	logSet     bool
	engine     *engine.Engine
	policies   PolicySource
	namespaces NamespaceLister
	roles      RoleResolver
	kinds      KindResolver
	cert       *certs.Reloader
	results    ResultSink
	work       WorkSink
	// decisions, when set, is the admission log (WithDecisionSink).
	decisions DecisionSink
	// objects records the selected admitted objects with the decisions;
	// decisionLimit bounds an unverified caller's (limitUnverified).
	objects          *objectRecorder
	decisionLimit    *callerLimiter
	decisionsLimited prometheus.Counter
	registry         Registry
	metrics          *metrics
	now              func() time.Time
	checks           []readinessCheck
	engineOpts       []engine.Option
	filter           admissionfilter.Filter
	clientCAs        *certs.CABundle
	bodies           *bodies
	ttlAuth          DeleteAuthorizer
	// admitException says how far the exceptions of Config.PolicyPaths
	// reach (WithExceptionAdmission).
	admitException ExceptionAdmission

	// addr is the address the TLS listener serves, once it does.
	addr         atomic.Pointer[string]
	shuttingDown atomic.Bool
	handler      http.Handler
	probes       http.Handler
}

type readinessCheck struct {
	name  string
	check func(context.Context) error
}

// Option configures a Server.
type Option func(*Server) error

// WithPolicySource sets where policies come from. Without it, New loads
// Config.PolicyPaths into a StaticSource.
func WithPolicySource(src PolicySource) Option {
	return func(s *Server) error {
		if src == nil {
			return fmt.Errorf("%w: nil policy source", ErrInvalidOption)
		}
		s.policies = src
		return nil
	}
}

// WithExceptionAdmission says how far the PolicyExceptions read from
// Config.PolicyPaths reach (files mode's --policy-exceptions and
// --exception-namespaces). Without it, each exempts resources in its own
// namespace only.
func WithExceptionAdmission(admit ExceptionAdmission) Option {
	return func(s *Server) error {
		s.admitException = admit
		return nil
	}
}

// WithNamespaceLister sets where namespace labels come from. Without it,
// namespaces have no labels.
func WithNamespaceLister(l NamespaceLister) Option {
	return func(s *Server) error {
		if l == nil {
			return fmt.Errorf("%w: nil namespace lister", ErrInvalidOption)
		}
		s.namespaces = l
		return nil
	}
}

// WithCertSource sets the serving certificate's source (certs.WatchSecret,
// certs.Static). Without it, New reads Config.CertFile and Config.KeyFile
// with certs.NewFileReloader.
func WithCertSource(c *certs.Reloader) Option {
	return func(s *Server) error {
		if c == nil {
			return fmt.Errorf("%w: nil certificate source", ErrInvalidOption)
		}
		s.cert = c
		return nil
	}
}

// WithResultSink sets where results go. Without it they are discarded.
func WithResultSink(r ResultSink) Option {
	return func(s *Server) error {
		if r == nil {
			return fmt.Errorf("%w: nil result sink", ErrInvalidOption)
		}
		s.results = r
		return nil
	}
}

// WithDecisionSink records every answered admission request (allowed,
// warned, denied or patched) in d, the admission log. Without it no
// decision is recorded, and the endpoints collect no findings.
func WithDecisionSink(d DecisionSink) Option {
	return func(s *Server) error {
		if d == nil {
			return fmt.Errorf("%w: nil decision sink", ErrInvalidOption)
		}
		s.decisions = d
		return nil
	}
}

// WithWorkSink sets where generate work goes. Without it every publish
// fails with ErrWorkSinkUnavailable and Config.OnWorkPublishFailure
// decides.
func WithWorkSink(w WorkSink) Option {
	return func(s *Server) error {
		if w == nil {
			return fmt.Errorf("%w: nil work sink", ErrInvalidOption)
		}
		s.work = w
		return nil
	}
}

// WithRegistry sets the metrics registry. Without it, New uses a fresh
// registry with the Go and process collectors.
func WithRegistry(r Registry) Option {
	return func(s *Server) error {
		if r == nil {
			return fmt.Errorf("%w: nil registry", ErrInvalidOption)
		}
		s.registry = r
		return nil
	}
}

// WithLogger sets the logger. Without it, New builds one from
// Config.Log on standard error.
func WithLogger(l zerolog.Logger) Option {
	return func(s *Server) error {
		s.log, s.logSet = l, true
		return nil
	}
}

// WithClock sets the clock for timestamps and the engine's time functions.
func WithClock(now func() time.Time) Option {
	return func(s *Server) error {
		if now == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidOption)
		}
		s.now = now
		return nil
	}
}

// WithEngineOptions adds options of the engine the server evaluates
// with: where configMap, apiCall, globalReference and imageRegistry
// context entries get their data (engine.WithContextLoader), where
// policies' reads of resources are served (engine.WithContextResources:
// without it those reads are errors), the limits of each evaluation.
// Generate rules still only decide whether they trigger: their clone
// sources are never read here, whatever the options.
func WithEngineOptions(opts ...engine.Option) Option {
	return func(s *Server) error {
		for _, o := range opts {
			if o == nil {
				return fmt.Errorf("%w: nil engine option", ErrInvalidOption)
			}
		}
		s.engineOpts = append(s.engineOpts, opts...)
		return nil
	}
}

// WithRoleResolver sets where the roles and cluster roles of a request's
// user come from. Without one they are empty: match and exclude blocks
// that name roles or clusterRoles select no request.
func WithRoleResolver(r RoleResolver) Option {
	return func(s *Server) error {
		if r == nil {
			return fmt.Errorf("%w: nil role resolver", ErrInvalidOption)
		}
		s.roles = r
		return nil
	}
}

// WithKindResolver sets how the kind of a subresource request's resource
// is found (pods/exec → Pod). Without one, such requests are matched by
// the kind of their object (PodExecOptions, Scale), and selectors such as
// Pod/exec select none of them.
func WithKindResolver(k KindResolver) Option {
	return func(s *Server) error {
		if k == nil {
			return fmt.Errorf("%w: nil kind resolver", ErrInvalidOption)
		}
		s.kinds = k
		return nil
	}
}

// WithReadinessCheck adds a condition of /readyz (for example "policy
// caches synced").
func WithReadinessCheck(name string, check func(context.Context) error) Option {
	return func(s *Server) error {
		if name == "" || check == nil {
			return fmt.Errorf("%w: readiness check needs a name and a function", ErrInvalidOption)
		}
		s.checks = append(s.checks, readinessCheck{name: name, check: check})
		return nil
	}
}

// New builds a Server from a validated Config and its collaborators.
func New(cfg Config, opts ...Option) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	filter, err := cfg.Filter()
	if err != nil {
		return nil, err
	}
	objects, err := newObjectRecorder(cfg.DecisionObjects)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	s := &Server{cfg: cfg, now: time.Now, log: zerolog.Nop(), filter: filter, objects: objects}
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(s); err != nil {
			return nil, err
		}
	}
	if !s.logSet {
		l, err := cfg.Log.Logger(os.Stderr)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
		}
		s.log = l
	}
	// The trigger lister and the server's clock come last: no engine
	// option replaces them.
	engineOpts := append(slices.Clone(s.engineOpts),
		engine.WithResourceLister(triggerLister{}),
		engine.WithClock(func() time.Time { return s.now() }),
	)
	if cfg.KyvernoMetrics {
		// Kyverno's per-rule durations (kyverno_policy_execution_duration_seconds).
		engineOpts = append(engineOpts, engine.WithRuleClock(time.Now))
	}
	eng, err := engine.New(engineOpts...)
	if err != nil {
		return nil, fmt.Errorf("engine: %w", err)
	}
	s.engine = eng
	if s.policies == nil {
		if len(cfg.PolicyPaths) == 0 {
			return nil, fmt.Errorf("%w: no policy source: set policy paths or pass WithPolicySource", ErrInvalidConfig)
		}
		src, err := LoadStaticSource(eng, cfg.PolicyPaths, s.log, s.admitException)
		if err != nil {
			return nil, err
		}
		s.policies = src
	}
	if s.cert == nil {
		if cfg.CertFile == "" {
			return nil, fmt.Errorf("%w: no certificate source: set the certificate and key files or pass WithCertSource", ErrInvalidConfig)
		}
		fc, err := certs.NewFileReloader(cfg.CertFile, cfg.KeyFile, cfg.CertReloadInterval, s.log)
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrInvalidOption, err)
		}
		s.cert = fc
	}
	if s.namespaces == nil {
		s.namespaces = StaticNamespaces(nil)
	}
	if cfg.ClientCAFile != "" {
		if s.clientCAs, err = certs.NewFileCABundle(cfg.ClientCAFile, cfg.CertReloadInterval, s.log); err != nil {
			return nil, fmt.Errorf("%w: client-ca-file: %w", ErrInvalidConfig, err)
		}
	}
	if s.results == nil {
		s.results = NopResultSink{}
	}
	if s.work == nil {
		s.log.Warn().Msg("no work sink configured: generate triggers fail to publish")
		s.work = unavailableWorkSink{}
	}
	if s.registry == nil {
		reg := prometheus.NewRegistry()
		reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		s.registry = reg
	}
	if s.metrics, err = newMetrics(s.registry, s.policies, s.cert, cfg.KyvernoMetrics); err != nil {
		return nil, err
	}
	s.bodies = &bodies{
		limit: cfg.MaxRequestBytes, readers: make(chan struct{}, cfg.MaxConcurrentBodyReads), budget: cfg.MaxBodyBytesInFlight,
		refused: func(reason string) { s.metrics.refused.WithLabelValues(reason).Inc() },
	}
	if err := s.limitUnverified(); err != nil {
		return nil, err
	}
	s.handler, s.probes = s.routes()
	return s, nil
}

// maxStreamsPerConn bounds the requests of one HTTP/2 connection at once.
const maxStreamsPerConn = 100

// routes builds the TLS server's mux and the probe mux.
func (s *Server) routes() (all, probes http.Handler) {
	endpoint := func(name string, h Handler, extra ...Decorator) http.Handler {
		return httpHandler(decorate(h, append([]Decorator{
			withLogger(s.log, name),
			withMetrics(s.metrics, name),
			withRecover(s.metrics, name),
			withTimeout(s.cfg.RequestTimeout),
		}, extra...)...))
	}
	// Evaluations share one set of slots; probes and metrics never wait.
	// A request's body is read before it waits for a slot (a slow client
	// holds none), and it is answered by its deadline whatever its
	// evaluation does.
	slots := make(chan struct{}, s.cfg.MaxConcurrentEvaluations)
	evaluating := func(name string, h Handler) http.Handler {
		return endpoint(name, h, s.bodies.withBody(), withAnswerBy(),
			withConcurrencyLimit(slots, s.cfg.EvaluationQueueTimeout, s.metrics))
	}
	metricsHandler := promhttp.InstrumentMetricHandler(s.registry, promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{
		ErrorHandling: promhttp.ContinueOnError,
	}))
	healthz := endpoint("healthz", s.healthz)
	readyz := endpoint("readyz", s.readyz)

	mux := http.NewServeMux()
	for _, e := range []struct {
		path, name string
		fn         admissionFunc
	}{
		{PathMutate, "mutate", s.mutate(scopeAll)},
		{PathValidate, "validate", s.validate(scopeAll)},
		{PathMutateCluster, "mutate-cluster", s.mutate(scopeCluster)},
		{PathValidateCluster, "validate-cluster", s.validate(scopeCluster)},
		{PathMutateNamespaced, "mutate-namespaced", s.mutate(scopeNamespace)},
		{PathValidateNamespaced, "validate-namespaced", s.validate(scopeNamespace)},
	} {
		mux.Handle(e.path, evaluating(e.name, s.admissionHandler(e.name, e.fn)))
	}
	mux.Handle(PathValidatePolicy, evaluating("validate-policy", s.admissionHandler("validate-policy", s.validatePolicy)))
	mux.Handle(PathValidateTTL, evaluating("validate-ttl", s.admissionHandler("validate-ttl", s.validateTTL)))
	mux.Handle(PathHealthz, healthz)
	mux.Handle(PathReadyz, readyz)
	mux.Handle(PathMetrics, metricsHandler)

	pm := http.NewServeMux()
	pm.Handle(PathHealthz, healthz)
	pm.Handle(PathReadyz, readyz)
	pm.Handle(PathMetrics, metricsHandler)
	if s.cfg.Pprof {
		pm.HandleFunc("/debug/pprof/", pprof.Index)
		pm.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		pm.HandleFunc("/debug/pprof/profile", pprof.Profile)
		pm.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		pm.HandleFunc("/debug/pprof/trace", pprof.Trace)
	}
	return withCallerOf(mux), pm
}

// Handler returns the handler of every endpoint (what the TLS server
// serves).
func (s *Server) Handler() http.Handler { return s.handler }

// ProbeHandler returns the handler of /healthz, /readyz and /metrics (what
// the plain-HTTP probe listener serves).
func (s *Server) ProbeHandler() http.Handler { return s.probes }

func (s *Server) healthz(context.Context, *http.Request) (*Reply, error) {
	return &Reply{ContentType: contentTypeText, Body: []byte("ok\n"), Outcome: OutcomeOK}, nil
}

func (s *Server) readyz(ctx context.Context, _ *http.Request) (*Reply, error) {
	if err := s.Ready(ctx); err != nil {
		return &Reply{Code: http.StatusServiceUnavailable, ContentType: contentTypeText, Body: []byte("not ready: " + err.Error() + "\n"), Outcome: OutcomeUnready}, nil
	}
	return &Reply{ContentType: contentTypeText, Body: []byte("ok\n"), Outcome: OutcomeOK}, nil
}

// Ready reports whether the server should receive traffic: shutdown has
// not begun, a serving certificate is loaded, a TLS dial to the server's
// own listener succeeds and presents that certificate, and every added
// readiness check passes.
func (s *Server) Ready(ctx context.Context) error {
	if s.shuttingDown.Load() {
		return ErrShuttingDown
	}
	cert := s.cert.Certificate()
	if cert == nil || len(cert.Certificate) == 0 {
		return ErrNoCertificate
	}
	addr := s.addr.Load()
	if addr == nil {
		return ErrNotServing
	}
	if err := dialSelf(ctx, *addr, cert.Certificate[0], s.clientCAs != nil); err != nil {
		return fmt.Errorf("tls dial to %s: %w", *addr, err)
	}
	for _, c := range s.checks {
		if err := c.check(ctx); err != nil {
			return fmt.Errorf("%s: %w", c.name, err)
		}
	}
	return nil
}

var errWrongCertificate = errors.New("the listener presents another certificate")

// dialSelf completes a TLS handshake with addr and checks that the peer
// presents the leaf certificate want. The chain is not verified: the
// certificate names the Service, not the loopback address, and what is
// checked is that this process serves what it loaded. When the server
// requires client certificates (mutual) the dial has none to give: in TLS
// 1.3 the client's side of the handshake, which checks the server's
// certificate, completes before the server refuses it, which is all this
// check needs.
func dialSelf(ctx context.Context, addr string, want []byte, mutual bool) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	minVersion := uint16(tls.VersionTLS12)
	if mutual {
		minVersion = tls.VersionTLS13
	}
	d := tls.Dialer{Config: &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // identity is checked in VerifyConnection
		MinVersion:         minVersion,
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 || !bytes.Equal(cs.PeerCertificates[0].Raw, want) {
				return errWrongCertificate
			}
			return nil
		},
	}}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}

// loopback turns a listener address into one this process can dial.
func loopback(addr net.Addr) string {
	host, port, err := net.SplitHostPort(addr.String())
	if err != nil {
		return addr.String()
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		if ip != nil && ip.To4() == nil {
			host = "::1"
		} else {
			host = "127.0.0.1"
		}
	}
	return net.JoinHostPort(host, port)
}

// Run listens on Config.Address (and Config.ProbeAddress) and serves until
// ctx ends, then shuts down gracefully.
func Run(ctx context.Context, cfg Config, opts ...Option) error {
	s, err := New(cfg, opts...)
	if err != nil {
		return err
	}
	return s.ListenAndServe(ctx, cfg.Address, cfg.ProbeAddress)
}

// ListenAndServe listens on address (and, when probeAddress is not
// empty, on it for the probes) and serves until ctx ends (Serve).
func (s *Server) ListenAndServe(ctx context.Context, address, probeAddress string) error {
	ln, err := net.Listen("tcp", address)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	var probe net.Listener
	if probeAddress != "" {
		if probe, err = net.Listen("tcp", probeAddress); err != nil {
			_ = ln.Close()
			return fmt.Errorf("listen for probes: %w", err)
		}
	}
	return s.Serve(ctx, ln, probe)
}

// Serve serves HTTPS on ln (and, when probe is not nil, the probe
// endpoints over plain HTTP on probe) until ctx ends. Then: /readyz fails
// at once; after Config.ShutdownDelay the listeners close and in-flight
// requests finish (up to Config.ShutdownGracePeriod); then the result sink
// is flushed (up to Config.FlushTimeout). Serve closes the listeners.
func (s *Server) Serve(ctx context.Context, ln, probe net.Listener) error {
	runCtx, stopRun := context.WithCancel(context.WithoutCancel(ctx))
	defer stopRun()
	baseCtx := s.log.WithContext(context.WithoutCancel(ctx))

	tlsSrv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       s.cfg.RequestTimeout + 10*time.Second,
		WriteTimeout:      s.cfg.RequestTimeout + 10*time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
		ErrorLog:          log.New(serverErrorLog{s.log}, "", 0),
		TLSConfig:         s.tlsConfig(),
		// One HTTP/2 connection carries at most this many requests at
		// once (the API server opens more connections past it); the
		// bodies of all of them count against MaxConcurrentBodyReads.
		HTTP2: &http.HTTP2Config{MaxConcurrentStreams: maxStreamsPerConn},
	}
	servers := []*http.Server{tlsSrv}
	errc := make(chan error, 2)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := s.cert.Run(runCtx); err != nil {
			s.log.Error().Err(err).Msg("certificate source stopped")
		}
	}()
	if s.clientCAs != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.clientCAs.Run(runCtx)
		}()
	}
	go func() { errc <- tlsSrv.ServeTLS(ln, "", "") }()
	addr := loopback(ln.Addr())
	s.addr.Store(&addr)
	s.log.Info().Str(logkey.Address, ln.Addr().String()).Msg("webhook serving")
	if probe != nil {
		probeSrv := &http.Server{
			Handler:           s.probes,
			ReadHeaderTimeout: 10 * time.Second,
			BaseContext:       func(net.Listener) context.Context { return baseCtx },
			ErrorLog:          log.New(serverErrorLog{s.log}, "", 0),
		}
		servers = append(servers, probeSrv)
		go func() { errc <- probeSrv.Serve(probe) }()
		s.log.Info().Str(logkey.Address, probe.Addr().String()).Msg("probes serving")
	}

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
		serveErr = fmt.Errorf("serve: %w", serveErr)
	}
	err := s.shutdown(ctx, servers)
	stopRun()
	wg.Wait()
	return errors.Join(serveErr, err)
}

// shutdown drains: readiness off, a delay for endpoints to catch up, no
// new connections, in-flight requests finished, results flushed. The
// steps share Config.ShutdownBudget: whatever a step is configured to, the
// drain ends in time for the flush, and the flush in time to leave the
// caller its reserve.
func (s *Server) shutdown(ctx context.Context, servers []*http.Server) error {
	// ctx is done already: the drain gets its own deadlines.
	base := context.WithoutCancel(ctx)
	start := time.Now()
	end := start.Add(s.cfg.ShutdownBudget - shutdownReserve)
	s.shuttingDown.Store(true)
	s.log.Info().Dur(logkey.Duration, s.cfg.ShutdownBudget).Msg("shutdown started")
	if d := min(s.cfg.ShutdownDelay, time.Until(end)); d > 0 {
		time.Sleep(d)
	}
	var errs []error
	drainEnd := time.Now().Add(s.cfg.ShutdownGracePeriod)
	if last := end.Add(-s.cfg.FlushTimeout); last.Before(drainEnd) {
		drainEnd = last
	}
	gctx, cancel := context.WithDeadline(base, drainEnd)
	defer cancel()
	// The probe server (if any) goes last, so that /readyz keeps
	// answering "shutting down" while admission drains.
	for _, srv := range servers {
		if err := srv.Shutdown(gctx); err != nil {
			errs = append(errs, fmt.Errorf("shutdown: %w", err))
			// Requests still running past the budget are cut off.
			_ = srv.Close()
		}
	}
	s.log.Info().Msg("requests drained")
	fctx, fcancel := context.WithDeadline(base, end)
	defer fcancel()
	if err := s.results.Flush(fctx); err != nil {
		errs = append(errs, fmt.Errorf("flush results: %w", err))
	}
	if s.decisions != nil {
		// Not an error of the shutdown: NATS away is no reason to exit
		// failing, and what the log misses is counted as dropped when
		// the publisher closes.
		if err := s.decisions.Flush(fctx); err != nil {
			s.log.Warn().Err(err).Msg("decisions not recorded before exit: the admission log misses them")
		}
	}
	s.log.Info().Dur(logkey.Duration, time.Since(start)).Msg("shutdown complete")
	return errors.Join(errs...)
}

// serverErrorLog routes net/http's error log into zerolog at debug: it is
// mostly TLS handshakes cut short by TCP probes and scanners; failures
// that matter end Serve and are logged there.
type serverErrorLog struct{ log zerolog.Logger }

func (l serverErrorLog) Write(p []byte) (int, error) {
	l.log.Debug().Str(logkey.Reason, strings.TrimSpace(string(p))).Msg("http server error")
	return len(p), nil
}
