package reporter

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/rs/zerolog"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/verdict-dev/verdict/internal/policycache"
	"github.com/verdict-dev/verdict/internal/verify"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// ErrInvalidConfig wraps configuration errors.
var ErrInvalidConfig = errors.New("invalid reporter config")

// Log formats.
const (
	LogFormatJSON    = "json"
	LogFormatConsole = "console"
)

// Config is the reporter service's configuration.
type Config struct {
	// Kubeconfig is a kubeconfig file; empty means in-cluster.
	Kubeconfig string
	// APIQPS and APIBurst bound all requests to the API server (client-go's
	// limiter); WriteQPS and WriteBurst bound report writes (create, apply,
	// delete) within them.
	APIQPS     float64
	APIBurst   int
	WriteQPS   float64
	WriteBurst int
	// APITimeout bounds one API request.
	APITimeout time.Duration

	// NATSURLs are the JetStream servers; NATSCredentials a creds file.
	NATSURLs        []string
	NATSCredentials string
	// StreamReplicas is the replica count the streams are provisioned
	// with (1, or 3 or 5 in a NATS cluster).
	StreamReplicas int
	// Streams are the streams' size limits. Full streams refuse new
	// messages. Every service that provisions the streams must use the
	// same values.
	Streams queue.StreamLimits

	// VerifyGrace is how long after a result was stored its resource may
	// still be missing (a CREATE is evaluated before the object is
	// stored) before the result is dropped as unverified.
	VerifyGrace time.Duration

	// CoalesceWindow is how long a dirty resource waits for more results
	// before its report is written.
	CoalesceWindow time.Duration
	// Concurrency is how many result messages a replica holds at once.
	Concurrency int
	// FlushWorkers is how many reports a replica writes at once.
	FlushWorkers int
	// AckWait is how long a replica may hold a message without a sign of
	// life before JetStream gives it to another (the reporter and scanner
	// consumers; replicas signal progress every AckWait/3).
	AckWait time.Duration
	// Attempts bounds the deliveries of a result whose report cannot be
	// written before it is dead-lettered.
	Attempts int
	// ShutdownTimeout bounds the wait for results in flight at SIGTERM.
	ShutdownTimeout time.Duration

	// Scan turns the background scan on (policy changes, the periodic
	// scan, purging the results of deleted resources).
	Scan bool
	// ScanInterval is the period of the full background scan (0: only
	// on policy changes).
	ScanInterval time.Duration
	// ScanConcurrency is how many scan items a replica works on at once.
	ScanConcurrency int

	// ProbeAddress serves /metrics, /healthz and /readyz over plain HTTP
	// (empty: none).
	ProbeAddress string
	LogLevel     string
	LogFormat    string
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		APIQPS:          100,
		APIBurst:        200,
		WriteQPS:        50,
		WriteBurst:      100,
		APITimeout:      30 * time.Second,
		NATSURLs:        []string{"nats://127.0.0.1:4222"},
		StreamReplicas:  1,
		Streams:         queue.DefaultStreamLimits(),
		VerifyGrace:     30 * time.Second,
		CoalesceWindow:  250 * time.Millisecond,
		Concurrency:     64,
		FlushWorkers:    8,
		AckWait:         30 * time.Second,
		Attempts:        10,
		ShutdownTimeout: 30 * time.Second,
		Scan:            true,
		ScanInterval:    time.Hour,
		ScanConcurrency: 2,
		ProbeAddress:    ":8080",
		LogLevel:        "info",
		LogFormat:       LogFormatJSON,
	}
}

// Validate checks the config.
func (c *Config) Validate() error {
	var errs []error
	if len(c.NATSURLs) == 0 {
		errs = append(errs, errors.New("at least one NATS URL is required"))
	}
	if c.StreamReplicas != 1 && c.StreamReplicas != 3 && c.StreamReplicas != 5 {
		errs = append(errs, fmt.Errorf("stream replicas %d: must be 1, 3 or 5", c.StreamReplicas))
	}
	if err := c.Streams.Validate(); err != nil {
		errs = append(errs, err)
	}
	if c.VerifyGrace < time.Second {
		errs = append(errs, fmt.Errorf("verify grace %s: at least 1s", c.VerifyGrace))
	}
	if c.APIQPS <= 0 || c.APIBurst < 1 {
		errs = append(errs, fmt.Errorf("API QPS %v and burst %d must be positive", c.APIQPS, c.APIBurst))
	}
	if c.WriteQPS <= 0 || c.WriteBurst < 1 {
		errs = append(errs, fmt.Errorf("write QPS %v and burst %d must be positive", c.WriteQPS, c.WriteBurst))
	}
	if c.APITimeout <= 0 {
		errs = append(errs, fmt.Errorf("API timeout %s must be positive", c.APITimeout))
	}
	if c.CoalesceWindow <= 0 {
		errs = append(errs, fmt.Errorf("coalesce window %s must be positive", c.CoalesceWindow))
	}
	if c.Concurrency < 1 || c.Concurrency > 500 {
		errs = append(errs, fmt.Errorf("concurrency %d: 1 to 500 (the consumer takes 512 pull requests and 1000 unacknowledged messages over all replicas)", c.Concurrency))
	}
	if c.FlushWorkers < 1 {
		errs = append(errs, fmt.Errorf("flush workers %d must be positive", c.FlushWorkers))
	}
	if c.AckWait < 3*time.Second {
		errs = append(errs, fmt.Errorf("ack wait %s: at least 3s", c.AckWait))
	}
	if c.Attempts < 1 {
		errs = append(errs, fmt.Errorf("attempts %d must be positive", c.Attempts))
	}
	if c.ScanInterval < 0 || (c.ScanInterval > 0 && c.ScanInterval < time.Second) {
		errs = append(errs, fmt.Errorf("scan interval %s: 0 (none) or at least 1s", c.ScanInterval))
	}
	if c.ScanConcurrency < 1 {
		errs = append(errs, fmt.Errorf("scan concurrency %d must be positive", c.ScanConcurrency))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("shutdown timeout %s must be positive", c.ShutdownTimeout))
	}
	if _, err := zerolog.ParseLevel(c.LogLevel); err != nil || c.LogLevel == "" {
		errs = append(errs, fmt.Errorf("log level %q: trace, debug, info, warn or error", c.LogLevel))
	}
	if c.LogFormat != LogFormatJSON && c.LogFormat != LogFormatConsole {
		errs = append(errs, fmt.Errorf("log format %q: json or console", c.LogFormat))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}

// NewLogger returns the service's logger writing to w.
func NewLogger(w io.Writer, level, format string) (zerolog.Logger, error) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil {
		return zerolog.Nop(), fmt.Errorf("%w: log level: %w", ErrInvalidConfig, err)
	}
	if format == LogFormatConsole {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	return zerolog.New(w).Level(lvl).With().Timestamp().Logger(), nil
}

// deps are the clients both commands use.
type deps struct {
	conn   *queue.Conn
	writer *Writer
	check  *verify.Checker
	reg    *prometheus.Registry
	rc     *rest.Config
	dyn    dynamic.Interface
	meta   metadata.Interface
	disc   discovery.DiscoveryInterface
}

func setup(ctx context.Context, cfg Config, name string, log zerolog.Logger) (*deps, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	var rc *rest.Config
	var err error
	if cfg.Kubeconfig == "" {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", cfg.Kubeconfig)
	}
	if err != nil {
		return nil, fmt.Errorf("kubernetes client config: %w", err)
	}
	rc.QPS, rc.Burst, rc.Timeout = float32(cfg.APIQPS), cfg.APIBurst, cfg.APITimeout
	rc.UserAgent = "verdict-reporter"
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(rc)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		return nil, err
	}
	check, err := verify.New(meta, restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)), verify.WithGrace(cfg.VerifyGrace))
	if err != nil {
		return nil, err
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	w, err := NewWriter(dyn, WithWriteQPS(cfg.WriteQPS, cfg.WriteBurst), WithMetrics(m))
	if err != nil {
		return nil, err
	}
	qopts := []queue.ConnOption{queue.WithURL(cfg.NATSURLs...), queue.WithName(name), queue.WithLogger(log), queue.WithRegisterer(reg)}
	if cfg.NATSCredentials != "" {
		qopts = append(qopts, queue.WithCredentialsFile(cfg.NATSCredentials))
	}
	conn, err := queue.Connect(ctx, qopts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	return &deps{conn: conn, writer: w, check: check, reg: reg, rc: rc, dyn: dyn, meta: meta, disc: disc}, nil
}

// Run runs the projector until ctx ends, then drains: the results in
// flight are written and acknowledged (or given back) before it returns.
// client-go logs through klog: route it first (kube.RouteKlog, at
// start-up, before any client runs).
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	ctx = log.WithContext(ctx)
	d, err := setup(ctx, cfg, "verdict-reporter", log)
	if err != nil {
		return err
	}
	defer d.conn.Close()
	// Every replica provisions the streams and its own consumers
	// (idempotent); the runner waits for the consumer if this fails now.
	if err := d.conn.Provision(ctx, provisionOptions(cfg)...); err != nil {
		log.Warn().Err(err).Msg("streamsNotProvisioned")
	}
	p, err := NewProjector(d.conn, d.writer,
		WithWindow(cfg.CoalesceWindow),
		WithConcurrency(cfg.Concurrency),
		WithFlushWorkers(cfg.FlushWorkers),
		WithAttempts(cfg.Attempts, time.Second, 2*time.Minute),
		WithProgressEvery(cfg.AckWait/3),
		WithShutdownTimeout(cfg.ShutdownTimeout),
		WithChecker(d.check),
		WithLogger(log),
	)
	if err != nil {
		return err
	}
	if cfg.ProbeAddress != "" {
		stop, err := serveProbes(ctx, cfg.ProbeAddress, d, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	var scanner *Scanner
	if cfg.Scan {
		if scanner, err = newScanner(ctx, cfg, d, log); err != nil {
			return err
		}
	}
	log.Info().Bool("scan", cfg.Scan).Msg("reporterStarted")
	// The projector and the scanner stop together: when ctx ends, or
	// when either returns.
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 2)
	running := 1
	go func() { done <- p.Run(rctx) }()
	if scanner != nil {
		running++
		go func() { done <- scanner.Run(rctx) }()
	}
	err = nil
	for range running {
		if e := <-done; e != nil && err == nil {
			err = e
		}
		cancel()
	}
	log.Info().Err(err).Msg("reporterStopped")
	return err
}

// provisionOptions are the streams and consumers the reporter provisions.
func provisionOptions(cfg Config) []queue.ProvisionOption {
	return append(cfg.Streams.ProvisionOptions(),
		queue.WithReplicas(cfg.StreamReplicas),
		queue.WithConsumers(consumers(cfg)...),
	)
}

// consumers are the reporter's durable consumers with its settings.
func consumers(cfg Config) []queue.ConsumerSpec {
	names := []string{queue.ConsumerReporter}
	if cfg.Scan {
		names = append(names, queue.ConsumerScanner)
	}
	out := make([]queue.ConsumerSpec, 0, len(names))
	for _, n := range names {
		spec, _ := queue.DefaultConsumer(n)
		spec.AckWait = cfg.AckWait
		out = append(out, spec)
	}
	return out
}

// newScanner starts the policy cache (it returns once synced) and builds
// the background scanner on it.
func newScanner(ctx context.Context, cfg Config, d *deps, log zerolog.Logger) (*Scanner, error) {
	kube, err := kubernetes.NewForConfig(d.rc)
	if err != nil {
		return nil, err
	}
	eng, err := engine.New(engine.WithContextLoader(policycache.NewLoader(kube, 3*time.Second, 2<<20)))
	if err != nil {
		return nil, err
	}
	pc := policycache.New(eng, d.dyn, kube, log)
	if err := pc.Start(ctx); err != nil {
		return nil, fmt.Errorf("policy cache: %w", err)
	}
	return NewScanner(d.conn, eng, d.dyn, kube.Discovery(), pc, d.writer,
		WithScanInterval(cfg.ScanInterval),
		WithScanConcurrency(cfg.ScanConcurrency),
		WithScanAttempts(cfg.Attempts),
		WithReportWatch(d.meta),
		WithScanChecker(d.check),
		WithScanRegisterer(d.reg),
		WithScanLogger(log),
	)
}

// Replay rebuilds every report from the stream (and with prune deletes
// Verdict's reports of resources without results), printing progress to
// out.
func Replay(ctx context.Context, cfg Config, prune bool, out io.Writer, log zerolog.Logger) (RebuildStats, error) {
	ctx = log.WithContext(ctx)
	d, err := setup(ctx, cfg, "verdict-reporter-replay", log)
	if err != nil {
		return RebuildStats{}, err
	}
	defer d.conn.Close()
	st, err := Rebuild(ctx, d.conn, d.writer,
		WithRebuildChecker(d.check),
		WithPrune(prune),
		WithRebuildWorkers(cfg.FlushWorkers),
		WithRebuildProgress(time.Second, func(p RebuildProgress) {
			fmt.Fprintf(out, "%-5s %d/%d  %s\n", p.Phase, p.Done, p.Total, p.Elapsed.Round(time.Millisecond))
		}))
	fmt.Fprintf(out, "replayed %d results of %d resources in %s (read %s): created %d, applied %d, unchanged %d, stale %d, gone %d, deleted %d (pruned %d), failed %d; unverified results %d, partial reports %d\n",
		st.Results, st.Resources, st.Elapsed.Round(time.Millisecond), st.ReadTime.Round(time.Millisecond),
		st.Outcomes[OutcomeCreated], st.Outcomes[OutcomeApplied], st.Outcomes[OutcomeUnchanged], st.Outcomes[OutcomeStale],
		st.Outcomes[OutcomeGone], st.Outcomes[OutcomeDeleted], st.Pruned, st.Failed, st.Unverified, st.Partial)
	return st, err
}

// serveProbes serves /metrics, /healthz and /readyz (ready while
// connected to NATS) until stop is called.
func serveProbes(ctx context.Context, addr string, d *deps, log zerolog.Logger) (stop func(), err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen for probes: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(d.reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok\n") })
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !d.conn.NATS().IsConnected() {
			http.Error(w, "not connected to NATS", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok\n")
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second, BaseContext: func(net.Listener) context.Context { return ctx }}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error().Err(err).Msg("probeServerFailed")
		}
	}()
	return func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}, nil
}
