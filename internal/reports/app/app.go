package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/platform/kyvernometrics"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/platform/policyhttp"
	"github.com/verdict-dev/verdict/internal/reports/reporter"
	"github.com/verdict-dev/verdict/internal/reports/reportindex"
	"github.com/verdict-dev/verdict/internal/reports/reportserver"
	"github.com/verdict-dev/verdict/internal/reports/scanner"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// ErrInvalidConfig wraps configuration errors.
var ErrInvalidConfig = errors.New("invalid reporter config")

// Config is the reporter service's configuration.
type Config struct {
	// Kube is how the reporter reaches the API server: all its requests,
	// within which WriteQPS and WriteBurst bound report writes (create,
	// apply, delete).
	Kube platform.KubeConfig
	// PolicyHTTP says whether and where policies may call services
	// over HTTP (off by default).
	PolicyHTTP policyhttp.Config
	// Registries is how the scans' verifyImages entries reach image
	// registries.
	Registries platform.Registries
	// Exceptions says which PolicyExceptions count and how far they
	// reach (--policy-exceptions, --exception-namespaces).
	Exceptions policycache.ExceptionConfig
	// PolicyAPI is where the policies are served.
	PolicyAPI policycache.API
	// ReportNamePrefix starts every report's name, before the resource's
	// UID: a shadow beside Kyverno (which names its reports after the UID
	// alone) sets model.ShadowReportPrefix. The CRD mode's only.
	ReportNamePrefix string
	WriteQPS         float64
	WriteBurst       int

	// NATS is the JetStream connection and the streams' replicas and
	// limits (the same on every service).
	NATS platform.NATSConfig

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
	// PendingResults and PendingBytes bound the results a replica holds
	// pending (their resource not found yet, within VerifyGrace): their
	// messages stay unacknowledged and count against the consumer's
	// MaxAckPending (1000), shared with the verified results
	// (reporter.WithPendingLimit).
	PendingResults int
	PendingBytes   int64
	// PendingRechecks bounds the pending results beyond those that a
	// replica remembers (by stream sequence) to check again, their
	// messages acknowledged (reporter.WithPendingRechecks; 0: given up
	// at once).
	PendingRechecks int

	// Scan turns the background scan on (policy changes, the periodic
	// scan, purging the results of deleted resources).
	Scan bool
	// ScanInterval is the period of the full background scan (0: only
	// on policy changes).
	ScanInterval time.Duration
	// ScanConcurrency is how many scan items a replica works on at once.
	ScanConcurrency int
	// CandidateWindow is how far back the admission log's recorded
	// requests go when a candidate policy is evaluated (0: the log is not
	// read, the cluster's objects only).
	CandidateWindow time.Duration
	// KyvernoMetrics also records the scans' rule results under Kyverno's
	// metric names (kyverno_policy_results_total with
	// rule_execution_cause background_scan, ...:
	// internal/platform/kyvernometrics), timing each rule. Off by
	// default.
	KyvernoMetrics bool
	// Limits bound the work and memory of each evaluation of the scans.
	Limits platform.EvaluationLimits

	// ProbeAddress serves /metrics, /healthz and /readyz over plain HTTP
	// (empty: none).
	ProbeAddress string
	Log          platform.LogConfig

	// Serve turns the serving mode on: the replica folds VERDICT_RESULTS
	// into memory and answers the PolicyReport API itself, as an
	// aggregated API server, instead of writing reports into etcd
	// (docs/reporter.md). The CRD mode is the default.
	Serve bool
	// ServeAddress and ServePort are where the serving mode listens
	// (HTTPS); ServeCertFile and ServeKeyFile its certificate (empty: a
	// self-signed one in ServeCertDir).
	ServeAddress  string
	ServePort     int
	ServeCertFile string
	ServeKeyFile  string
	ServeCertDir  string
	// ServeSnapshotInterval is how often a serving replica stores a
	// snapshot of its index in JetStream (bus.BucketSnapshots), which
	// replicas starting later begin from instead of the stream's first
	// message; 0: none is stored (one stored already is still read).
	ServeSnapshotInterval time.Duration
	// ServeTLSSecret, when set, is the kubernetes.io/tls Secret (in
	// Namespace) whose certificate the serving mode serves, followed as
	// it is renewed; it takes the place of the files.
	ServeTLSSecret string
	// ServeCASecret, when set, makes the replicas campaign for
	// ServeLeaseName; the leader keeps the CA (this Secret) and
	// ServeTLSSecret current, for ServeServiceName's names, and the
	// ServeAPIServices' caBundle trusting the CA. Empty: another keeps
	// ServeTLSSecret (cert-manager).
	ServeCASecret    string
	ServeServiceName string
	ServeLeaseName   string
	ServeAPIServices []string
	// Namespace is Verdict's namespace (the serving mode's Secrets and
	// Lease); Identity names this replica in the Lease.
	Namespace string
	Identity  string
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Kube:                  platform.KubeConfig{QPS: 100, Burst: 200, Timeout: 30 * time.Second},
		WriteQPS:              50,
		WriteBurst:            100,
		NATS:                  platform.DefaultNATSConfig(),
		VerifyGrace:           30 * time.Second,
		CoalesceWindow:        250 * time.Millisecond,
		Concurrency:           64,
		FlushWorkers:          8,
		AckWait:               30 * time.Second,
		Attempts:              10,
		ShutdownTimeout:       30 * time.Second,
		PendingResults:        256,
		PendingBytes:          4 << 20,
		PendingRechecks:       16384,
		Scan:                  true,
		ScanInterval:          time.Hour,
		ScanConcurrency:       2,
		CandidateWindow:       24 * time.Hour,
		Limits:                platform.DefaultEvaluationLimits(),
		Registries:            platform.DefaultRegistries(),
		ProbeAddress:          ":8080",
		Log:                   platform.DefaultLogConfig(),
		ServeAddress:          "0.0.0.0",
		ServePort:             8443,
		ServeCertDir:          "/tmp/verdict-reports",
		ServeSnapshotInterval: 5 * time.Minute,
		ServeServiceName:      "verdict-reporter",
		ServeLeaseName:        "verdict-reporter-serving",
		ServeAPIServices:      []string{"v1alpha2.wgpolicyk8s.io", "v1alpha1.openreports.io", "v1alpha1.decisions.verdict.dev"},
		Namespace:             "verdict",
		Identity:              host,
	}
}

// maxAckPending is the reporter consumer's bound on unacknowledged
// messages, over all replicas (queue.ConsumerSpec's default).
const maxAckPending = 1000

// maxPendingRechecks bounds PendingRechecks: about 40 MiB of sequences.
const maxPendingRechecks = 1 << 20

// Validate checks the config.
func (c *Config) Validate() error {
	var errs []error
	for _, err := range []error{c.Kube.Validate(), c.NATS.Validate(), c.Log.Validate(), c.Exceptions.Validate(), c.Limits.Validate()} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if c.VerifyGrace < time.Second {
		errs = append(errs, fmt.Errorf("verify grace %s: at least 1s", c.VerifyGrace))
	}
	if c.WriteQPS <= 0 || c.WriteBurst < 1 {
		errs = append(errs, fmt.Errorf("write QPS %v and burst %d must be positive", c.WriteQPS, c.WriteBurst))
	}
	if c.CoalesceWindow <= 0 {
		errs = append(errs, fmt.Errorf("coalesce window %s must be positive", c.CoalesceWindow))
	}
	if c.Concurrency < 1 || c.Concurrency > 500 {
		errs = append(errs, fmt.Errorf("concurrency %d: 1 to 500 (the consumer takes 512 pull requests and 1000 unacknowledged messages over all replicas)", c.Concurrency))
	}
	if c.PendingResults < 0 || c.PendingBytes < 0 || (c.Concurrency >= 1 && c.PendingResults+2*c.Concurrency > maxAckPending) {
		errs = append(errs, fmt.Errorf("pending results %d (%d bytes): at least 0, and with twice the concurrency (%d) at most %d, the consumer's unacknowledged messages (sum over the replicas: keep it under that too)",
			c.PendingResults, c.PendingBytes, 2*c.Concurrency, maxAckPending))
	}
	if c.PendingRechecks < 0 || c.PendingRechecks > maxPendingRechecks {
		errs = append(errs, fmt.Errorf("pending rechecks %d: 0 (none) to %d", c.PendingRechecks, maxPendingRechecks))
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
	if c.CandidateWindow < 0 {
		errs = append(errs, fmt.Errorf("candidate window %s: 0 (the log not read) or more", c.CandidateWindow))
	}
	if c.ScanInterval < 0 || (c.ScanInterval > 0 && c.ScanInterval < time.Second) {
		errs = append(errs, fmt.Errorf("scan interval %s: 0 (none) or at least 1s", c.ScanInterval))
	}
	if c.ScanConcurrency < 1 {
		errs = append(errs, fmt.Errorf("scan concurrency %d must be positive", c.ScanConcurrency))
	}
	if c.Serve && (c.ServePort < 0 || c.ServePort > 65535 || net.ParseIP(c.ServeAddress) == nil || (c.ServeCertFile == "") != (c.ServeKeyFile == "")) {
		errs = append(errs, fmt.Errorf("serving mode: address %q port %d: an IP address, a port, and a certificate with its key (or neither)", c.ServeAddress, c.ServePort))
	}
	if c.ServeSnapshotInterval < 0 || (c.ServeSnapshotInterval > 0 && c.ServeSnapshotInterval < 10*time.Second) {
		errs = append(errs, fmt.Errorf("serving mode: snapshot interval %s: 0 (none) or at least 10s", c.ServeSnapshotInterval))
	}
	if c.Serve && c.ReportNamePrefix != "" {
		errs = append(errs, errors.New("--report-name-prefix is the CRD mode's: the serving mode names reports after the UID (and serves the report group itself, which a shadow beside Kyverno must not)"))
	}
	if c.Serve && c.ServeTLSSecret != "" && c.ServeCertFile != "" {
		errs = append(errs, errors.New("serving mode: a certificate Secret or certificate files, not both"))
	}
	if c.Serve && c.ServeTLSSecret != "" && c.Namespace == "" {
		errs = append(errs, errors.New("serving mode: the certificate Secret needs the namespace"))
	}
	if c.Serve && c.ServeCASecret != "" && (c.ServeTLSSecret == "" || c.ServeServiceName == "" || c.ServeLeaseName == "" || c.Identity == "" || len(c.ServeAPIServices) == 0) {
		errs = append(errs, errors.New("serving mode: keeping the certificate (a CA Secret) needs the certificate Secret, the Service's name, the Lease's name, this replica's identity and the APIServices"))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("shutdown timeout %s must be positive", c.ShutdownTimeout))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}

// deps are the clients both commands use.
type deps struct {
	conn   *queue.Conn
	writer *reporter.Writer
	check  *apicheck.Checker
	reg    *prometheus.Registry
	rc     *rest.Config
	dyn    dynamic.Interface
	meta   metadata.Interface
	disc   discovery.DiscoveryInterface
	mapper meta.RESTMapper
	// kc are the clients the others come from.
	kc *platform.Clients
}

func setup(ctx context.Context, cfg Config, name string, log zerolog.Logger) (*deps, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	kc, err := cfg.Kube.Clients("verdict-reporter")
	if err != nil {
		return nil, err
	}
	rc, dyn, meta, disc := kc.REST, kc.Dynamic, kc.Metadata, kc.Discovery
	check, err := apicheck.New(meta, kc.Mapper, apicheck.WithGrace(cfg.VerifyGrace))
	if err != nil {
		return nil, err
	}
	reg := platform.NewRegistry()
	m, err := reporter.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	w, err := reporter.NewWriter(dyn, reporter.WithWriteQPS(cfg.WriteQPS, cfg.WriteBurst), reporter.WithMetrics(m), reporter.WithNamePrefix(cfg.ReportNamePrefix))
	if err != nil {
		return nil, err
	}
	connOpts, err := cfg.NATS.ConnOptions(name, log, reg)
	if err != nil {
		return nil, err
	}
	conn, err := bus.Connect(ctx, connOpts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	return &deps{conn: conn, writer: w, check: check, reg: reg, rc: rc, dyn: dyn, meta: meta, disc: disc, mapper: kc.Mapper, kc: kc}, nil
}

// Run runs the projector (and, with cfg.Scan, the background scanner)
// until ctx ends, then drains: the results in flight are written and
// acknowledged (or given back) before it returns.
// client-go logs through klog: route it first (kube.RouteKlog, at
// start-up, before any client runs).
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	ctx = log.WithContext(ctx)
	d, err := setup(ctx, cfg, "verdict-reporter", log)
	if err != nil {
		return err
	}
	defer d.conn.Close()
	if cfg.Serve {
		return runServe(ctx, cfg, d, log)
	}
	// Every replica provisions the streams and its own consumers
	// (idempotent); the runner waits for the consumer if this fails now.
	if err := bus.Provision(ctx, d.conn, provisionOptions(cfg)...); err != nil {
		log.Warn().Err(err).Msg("streamsNotProvisioned")
	}
	p, err := reporter.NewProjector(d.conn, d.writer,
		reporter.WithWindow(cfg.CoalesceWindow),
		reporter.WithConcurrency(cfg.Concurrency),
		reporter.WithFlushWorkers(cfg.FlushWorkers),
		reporter.WithAttempts(cfg.Attempts, time.Second, 2*time.Minute),
		reporter.WithProgressEvery(cfg.AckWait/3),
		reporter.WithShutdownTimeout(cfg.ShutdownTimeout),
		reporter.WithPendingLimit(cfg.PendingResults, cfg.PendingBytes),
		reporter.WithPendingRechecks(cfg.PendingRechecks),
		reporter.WithChecker(d.check),
		reporter.WithLogger(log),
	)
	if err != nil {
		return err
	}
	if cfg.ProbeAddress != "" {
		stop, err := platform.ServeProbes(ctx, cfg.ProbeAddress, d.reg, platform.NATSReady(d.conn), log)
		if err != nil {
			return err
		}
		defer stop()
	}
	var sc *scanner.Scanner
	if cfg.Scan {
		if sc, err = newScanner(ctx, cfg, d, log, false); err != nil {
			return err
		}
	}
	log.Info().Bool(logkey.Scan, cfg.Scan).Msg("reporterStarted")
	// The projector and the scanner stop together: when ctx ends, or
	// when either returns.
	parts := []func(context.Context) error{p.Run}
	if sc != nil {
		parts = append(parts, sc.Run)
	}
	err = platform.Together(ctx, parts...)
	log.Info().Err(err).Msg("reporterStopped")
	return err
}

// runServe is the serving mode: the report index follows VERDICT_RESULTS
// (results checked against watches of their kinds), the aggregated API
// server answers from it once it has caught up, and the background scan
// publishes results and purges deleted resources' without writing
// reports. They stop together.
func runServe(ctx context.Context, cfg Config, d *deps, log zerolog.Logger) error {
	// No projector: only the scanner's consumer.
	if err := bus.Provision(ctx, d.conn, append(cfg.NATS.ProvisionOptions(), bus.WithConsumers(consumers(cfg)[1:]...))...); err != nil {
		log.Warn().Err(err).Msg("streamsNotProvisioned")
	}
	if err := d.conn.ProvisionSnapshots(ctx, cfg.NATS.StreamReplicas, snapshotBucketBytes); err != nil {
		log.Warn().Err(err).Msg("snapshotsNotProvisioned")
	}
	x := reportindex.New()
	check := reportindex.NewCluster(ctx, d.meta, d.mapper, reportindex.WithClusterGrace(cfg.VerifyGrace), reportindex.WithGone(func(uid string) { x.Forget(uid) }))
	feed := reportindex.NewFeed(x, d.conn, check, log.With().Str(logkey.Component, "reportIndex").Logger(), reportindex.WithCatchUpGCPercent(400),
		reportindex.WithSnapshots(SnapshotName, cfg.ServeSnapshotInterval))
	if err := reportindex.RegisterMetrics(d.reg, x, feed); err != nil {
		return err
	}
	var cert dynamiccertificates.CertKeyContentProvider
	if cfg.ServeTLSSecret != "" {
		kube, err := kubernetes.NewForConfig(d.rc)
		if err != nil {
			return err
		}
		src := certs.WatchSecret(ctx, kube, cfg.Namespace, cfg.ServeTLSSecret)
		if cfg.ServeCASecret != "" {
			// The leader's work stops, and its Lease is released, before
			// Run returns.
			lctx, stop := context.WithCancel(ctx)
			leaderDone := make(chan struct{})
			go func() {
				defer close(leaderDone)
				runServeLeader(lctx, kube, d.dyn, cfg, log.With().Str(logkey.Component, "servingCerts").Logger())
			}()
			defer func() {
				stop()
				<-leaderDone
			}()
		}
		if err := waitForCert(ctx, src, cfg.Namespace+"/"+cfg.ServeTLSSecret, log); err != nil {
			return err
		}
		cert = src
	}
	// The admission log's recent denials, served beside the reports.
	denials := reportserver.NewDenials(0, 0)
	srv, err := reportserver.New(reportserver.Config{
		BindAddress: net.ParseIP(cfg.ServeAddress), Port: cfg.ServePort,
		Cert: cert, CertFile: cfg.ServeCertFile, KeyFile: cfg.ServeKeyFile, CertDir: cfg.ServeCertDir,
		Kubeconfig: cfg.Kube.Kubeconfig,
		Delete:     feed.RetractReport,
		Denials:    denials,
	}, x, feed.Ready())
	if err != nil {
		return fmt.Errorf("%w: serving mode: %w", ErrInvalidConfig, err)
	}
	if cfg.ProbeAddress != "" {
		// Ready once caught up, and from then on whatever NATS does: the
		// index holds the reports, and an APIService without endpoints
		// would stall discovery (and so namespace deletion) cluster-wide.
		ready := func() error {
			select {
			case <-feed.Ready():
				return nil
			default:
				return errors.New("the report index has not caught up with VERDICT_RESULTS yet")
			}
		}
		stop, err := platform.ServeProbes(ctx, cfg.ProbeAddress, d.reg, ready, log)
		if err != nil {
			return err
		}
		defer stop()
	}
	parts := []func(context.Context) error{feed.Run, srv.Run,
		followDenials(func() *queue.Conn { return d.conn }, denials, log.With().Str(logkey.Component, "admissionDenials").Logger())}
	if cfg.Scan {
		sc, err := newScanner(ctx, cfg, d, log, true)
		if err != nil {
			return err
		}
		parts = append(parts, sc.Run)
	}
	log.Info().Bool(logkey.Scan, cfg.Scan).Int(logkey.Port, srv.Port()).Msg("reporterServing")
	err = platform.Together(ctx, parts...)
	log.Info().Err(err).Msg("reporterStopped")
	return err
}

// SnapshotName is the serving replicas' snapshot of their index (in
// bus.BucketSnapshots); snapshotBucketBytes bounds the snapshot bucket (a snapshot of 100,000
// resources with 20 results each takes about 45 MiB, and a new one is
// stored before the one it replaces is removed).
const (
	SnapshotName        = "report-index"
	snapshotBucketBytes = 4 << 30
)

// provisionOptions are the streams and consumers the reporter provisions.
func provisionOptions(cfg Config) []bus.ProvisionOption {
	return append(cfg.NATS.ProvisionOptions(), bus.WithConsumers(consumers(cfg)...))
}

// consumers are the reporter's durable consumers with its settings.
func consumers(cfg Config) []queue.ConsumerSpec {
	names := []string{bus.ConsumerReporter}
	if cfg.Scan {
		names = append(names, bus.ConsumerScanner)
	}
	out := make([]queue.ConsumerSpec, 0, len(names))
	for _, n := range names {
		spec, _ := bus.DefaultConsumer(n)
		spec.AckWait = cfg.AckWait
		out = append(out, spec)
	}
	return out
}

// newScanner starts the policy cache (it returns once synced) and builds
// the background scanner on it.
func newScanner(ctx context.Context, cfg Config, d *deps, log zerolog.Logger, served bool) (*scanner.Scanner, error) {
	kube := d.kc.Kube
	conn := func() *queue.Conn { return d.conn }
	var engOpts []platform.EngineOption
	if cfg.KyvernoMetrics {
		// Kyverno's per-rule durations.
		engOpts = append(engOpts, platform.WithEngineOptions(engine.WithRuleClock(time.Now)))
	}
	eng, err := platform.NewEngine(d.kc, platform.EngineConfig{Namespace: cfg.Namespace, PolicyHTTP: cfg.PolicyHTTP, Limits: cfg.Limits,
		Registries: cfg.Registries, ImageCache: cfg.Registries.SharedCache(conn, cfg.NATS.StreamReplicas), Metrics: d.reg}, engOpts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	pc := policycache.New(eng.Engine, d.dyn, kube, log).WithExceptions(cfg.Exceptions).WithAPI(cfg.PolicyAPI).WithNativePolicies()
	if err := pc.Start(ctx); err != nil {
		return nil, fmt.Errorf("policy cache: %w", err)
	}
	opts := []scanner.Option{
		scanner.WithInterval(cfg.ScanInterval),
		scanner.WithConcurrency(cfg.ScanConcurrency),
		scanner.WithAttempts(cfg.Attempts),
		scanner.WithChecker(d.check),
		scanner.WithRegisterer(d.reg),
		scanner.WithLogger(log),
		scanner.WithCandidates(pc.API(), cfg.CandidateWindow),
	}
	if cfg.KyvernoMetrics {
		km, err := kyvernometrics.New(d.reg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, scanner.WithKyvernoMetrics(km))
	}
	if served {
		// Reports are served from the stream: none to write, none to
		// watch.
		return scanner.New(d.conn, eng.Engine, d.dyn, kube.Discovery(), pc, nil, append(opts, scanner.WithServedReports(d.writer.Metrics()))...)
	}
	return scanner.New(d.conn, eng.Engine, d.dyn, kube.Discovery(), pc, d.writer, append(opts, scanner.WithReportWatch(d.meta))...)
}

// Replay rebuilds every report from the stream (and with prune deletes
// Verdict's reports of resources without results), printing progress to
// out.
func Replay(ctx context.Context, cfg Config, prune bool, out io.Writer, log zerolog.Logger) (reporter.RebuildStats, error) {
	ctx = log.WithContext(ctx)
	d, err := setup(ctx, cfg, "verdict-reporter-replay", log)
	if err != nil {
		return reporter.RebuildStats{}, err
	}
	defer d.conn.Close()
	st, err := reporter.Rebuild(ctx, d.conn, d.writer,
		reporter.WithRebuildChecker(d.check),
		reporter.WithPrune(prune),
		reporter.WithRebuildWorkers(cfg.FlushWorkers),
		reporter.WithRebuildProgress(time.Second, func(p reporter.RebuildProgress) {
			fmt.Fprintf(out, "%-5s %d/%d  %s\n", p.Phase, p.Done, p.Total, p.Elapsed.Round(time.Millisecond))
		}))
	fmt.Fprintf(out, "replayed %d results of %d resources in %s (read %s): created %d, applied %d, unchanged %d, stale %d, gone %d, deleted %d (pruned %d), failed %d; unverified results %d, partial reports %d\n",
		st.Results, st.Resources, st.Elapsed.Round(time.Millisecond), st.ReadTime.Round(time.Millisecond),
		st.Outcomes[reporter.OutcomeCreated], st.Outcomes[reporter.OutcomeApplied], st.Outcomes[reporter.OutcomeUnchanged], st.Outcomes[reporter.OutcomeStale],
		st.Outcomes[reporter.OutcomeGone], st.Outcomes[reporter.OutcomeDeleted], st.Pruned, st.Failed, st.Unverified, st.Partial)
	return st, err
}
