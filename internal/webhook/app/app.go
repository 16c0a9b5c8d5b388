// Package webhookapp runs the webhook service in a cluster: Kubernetes
// clients, the informer-backed policy cache, JetStream sinks, and — on the
// replica holding the Lease — the webhook registrar and the certificate
// renewer, around the admission server of internal/webhook.
package app

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
	"github.com/verdict-dev/verdict/internal/platform/leader"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/platform/policyhttp"
	"github.com/verdict-dev/verdict/internal/webhook"
	"github.com/verdict-dev/verdict/internal/webhook/nativegen"
	"github.com/verdict-dev/verdict/internal/webhook/policystatus"
	"github.com/verdict-dev/verdict/internal/webhook/registrar"
	"github.com/verdict-dev/verdict/internal/webhook/roles"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// ErrInvalidConfig wraps configuration errors.
var ErrInvalidConfig = errors.New("invalid webhook service config")

// Mode is where the webhook takes its policies and certificate from.
type Mode string

// Modes.
const (
	// ModeCluster: policies from the API server (informers), the serving
	// certificate from a Secret, a leader-elected registrar and
	// certificate renewer. What runs in a cluster.
	ModeCluster Mode = "cluster"
	// ModeFiles: policies (Webhook.PolicyPaths) and the certificate
	// (Webhook.CertFile, KeyFile) from files; no API server. For local
	// runs and benchmarks.
	ModeFiles Mode = "files"
)

// Config is the configuration of the webhook service, in either mode.
// Results and generate work go to JetStream (NATS) in both.
type Config struct {
	// Mode is cluster (the default) or files.
	Mode Mode

	Webhook webhook.Config
	// NATS is the JetStream connection and the streams' replicas and
	// limits (the same on every service).
	NATS platform.NATSConfig
	// ResultBuffer bounds the results waiting to be published.
	ResultBuffer int
	// ResultLinger is how long the result publisher gathers admissions'
	// results before it sends them (queue.WithLinger): one write to NATS,
	// one store and one acknowledgement for many. 5ms by default.
	ResultLinger time.Duration
	// Decisions records every answered admission request in
	// VERDICT_DECISIONS, the admission log (docs/decisions.md), through a
	// publisher of its own (ResultBuffer and ResultLinger). On by default.
	Decisions bool
	// DecisionSpool is a folder where each decision is kept from the
	// moment it is recorded until the stream acknowledges it
	// (queue.Spool): a replica killed with decisions in its buffer
	// publishes them when it starts again, and decisions its publisher
	// gave up on (NATS away past their deadline) are published once NATS
	// is back. Empty: none (what the buffer holds dies with the process).
	// The chart gives it an emptyDir, which outlives a container's
	// restart.
	DecisionSpool string
	// DecisionSpoolBytes bounds the spool on disk (64 MiB by default);
	// past it decisions are published without being kept.
	DecisionSpoolBytes int64
	// GCPercent is the garbage collector's target percentage (GOGC) the
	// webhook binary sets when the GOGC environment variable is not set:
	// 400 by default. Every admission allocates, and the live heap is
	// small, so the runtime's 100 collects very often; at 400 the webhook
	// spends 7 to 16 % less CPU per admission (BENCHMARKS.md), and the
	// memory limit (GOMEMLIMIT, which the chart sets from the container's)
	// still bounds the heap. It is process-wide, so cmd/webhook sets
	// it, not Run.
	GCPercent int
	// Limits bound the work and memory of each evaluation, in either
	// mode.
	Limits platform.EvaluationLimits

	// The rest is cluster mode's.

	// Kube is how the webhook reaches the API server.
	Kube platform.KubeConfig
	// PolicyHTTP says whether and where policies may call services
	// over HTTP (off by default).
	PolicyHTTP policyhttp.Config
	// Registries is how verifyImages entries reach image registries.
	Registries platform.Registries
	// Exceptions says which PolicyExceptions count and how far they
	// reach (--policy-exceptions, --exception-namespaces).
	Exceptions policycache.ExceptionConfig
	// PolicyAPI is where the policies are served.
	PolicyAPI policycache.API
	// Namespace is Verdict's namespace: Lease, Secrets, and a namespace
	// the webhooks skip.
	Namespace string
	// Identity names this replica in the Lease (the pod name).
	Identity string
	// ServiceName is the webhook's Service; WebhookURL, when set, is used
	// instead (the local control plane reaches the webhook by URL).
	ServiceName string
	ServicePort int32
	WebhookURL  string

	// Register runs the webhook registrar on the leader.
	Register bool
	// GenerateAdmissionPolicies has the leader generate a
	// ValidatingAdmissionPolicy for each ValidatingPolicy that asks for
	// one and can be one (internal/webhook/nativegen); off by default.
	GenerateAdmissionPolicies bool
	// RenewCerts runs the certificate renewer on the leader; turn it off
	// when cert-manager provides TLSSecret (and its CA).
	RenewCerts bool
	CASecret   string
	TLSSecret  string
	// CertIPs are extra IP addresses for the serving certificate.
	CertIPs []net.IP
	// Certificates' lifetimes (zero: certs.Config's defaults) and how
	// often the renewer checks them.
	CAValidity, CertValidity, RenewBefore, ReloadGrace time.Duration
	RenewInterval                                      time.Duration
	// ReconcileInterval is how often the registrar checks the
	// configurations without being told of a change.
	ReconcileInterval time.Duration
	// ReplicaSelector selects the webhook's own pods in Namespace (the
	// chart's selector labels). When set, the leader points the webhooks
	// at this release's paths only once every pod it selects carries
	// registrar.LabelWebhookAPI at this release's level; until then (a
	// rolling upgrade from an earlier release) at the paths every
	// replica serves. Empty: every replica is taken to run this release.
	ReplicaSelector string

	LeaseName     string
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	host, _ := os.Hostname()
	return Config{
		Mode:               ModeCluster,
		Webhook:            webhook.DefaultConfig(),
		NATS:               platform.DefaultNATSConfig(),
		Kube:               platform.DefaultKubeConfig(),
		Namespace:          "verdict",
		Identity:           host,
		ServiceName:        "verdict-webhook",
		ServicePort:        443,
		Register:           true,
		RenewCerts:         true,
		CASecret:           "verdict-webhook-ca",
		TLSSecret:          "verdict-webhook-tls",
		LeaseName:          "verdict-webhook",
		LeaseDuration:      15 * time.Second,
		RenewDeadline:      10 * time.Second,
		RetryPeriod:        2 * time.Second,
		RenewInterval:      time.Minute,
		ReconcileInterval:  30 * time.Second,
		ResultBuffer:       10000,
		ResultLinger:       5 * time.Millisecond,
		Decisions:          true,
		DecisionSpoolBytes: 64 << 20,
		GCPercent:          400,
		Limits:             platform.DefaultEvaluationLimits(),
		Registries:         platform.DefaultRegistries(),
	}
}

// Validate returns every problem of the configuration, each wrapping
// ErrInvalidConfig.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) {
		errs = append(errs, fmt.Errorf("%w: %s", ErrInvalidConfig, fmt.Sprintf(format, args...)))
	}
	wrap := func(err error) {
		if err != nil {
			errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
		}
	}
	wrap(c.Webhook.Validate())
	wrap(c.NATS.Validate())
	wrap(c.Exceptions.Validate())
	wrap(c.Limits.Validate())
	if c.GCPercent < 25 || c.GCPercent > 10000 {
		bad("gc-percent %d: 25 to 10000", c.GCPercent)
	}
	if c.DecisionSpool != "" && c.DecisionSpoolBytes < 1<<20 {
		bad("decision-spool-bytes %d: at least 1Mi", c.DecisionSpoolBytes)
	}
	if c.ResultBuffer < 1 {
		bad("result-buffer %d must be positive", c.ResultBuffer)
	}
	if c.ResultLinger < 0 || c.ResultLinger > time.Second {
		bad("result-linger %s must be from 0 to 1s", c.ResultLinger)
	}
	switch c.Mode {
	case ModeCluster:
		wrap(c.Kube.Validate())
		if c.Namespace == "" || c.Identity == "" {
			bad("namespace and identity are required")
		}
		if c.WebhookURL == "" && c.ServiceName == "" {
			bad("a service name or a webhook URL is required")
		}
		if len(c.Webhook.PolicyPaths) > 0 {
			bad("--policies is files mode's: in cluster mode policies come from the API server")
		}
		if c.Webhook.CertFile != "" {
			bad("--tls-cert-file is files mode's: in cluster mode the certificate comes from the --tls-secret Secret")
		}
		if c.Webhook.Shadow && c.GenerateAdmissionPolicies {
			bad("--shadow and --generate-admission-policies: a shadow has no effect, and a generated ValidatingAdmissionPolicy would enforce")
		}
	case ModeFiles:
		if len(c.Webhook.PolicyPaths) == 0 {
			bad("files mode needs --policies")
		}
		if c.Webhook.CertFile == "" {
			bad("files mode needs --tls-cert-file and --tls-private-key-file")
		}
	default:
		bad("mode %q: cluster or files", c.Mode)
	}
	return errors.Join(errs...)
}

// queueSettings are the JetStream settings of the config.
func (c *Config) queueSettings() queueSettings {
	return queueSettings{nats: c.NATS, identity: c.Identity, buffer: c.ResultBuffer, linger: c.ResultLinger, decisions: c.Decisions,
		spoolDir: c.DecisionSpool, spoolBytes: c.DecisionSpoolBytes}
}

// engineConfig is what cluster mode's engine is made of.
func (c *Config) engineConfig() platform.EngineConfig {
	return platform.EngineConfig{Namespace: c.Namespace, PolicyHTTP: c.PolicyHTTP, Limits: c.Limits, Registries: c.Registries}
}

// Run runs the service in its mode until ctx ends, then shuts down
// gracefully.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if cfg.Mode == ModeFiles {
		return runFiles(ctx, cfg, log)
	}
	return runCluster(ctx, cfg, log)
}

// runCluster serves policies from the API server, with the leader's
// registrar and certificate renewer.
func runCluster(ctx context.Context, cfg Config, log zerolog.Logger) error {
	// Verdict's own namespace is excluded from every webhook.
	cfg.Webhook.ExcludedNamespaces = append(slices.Clone(cfg.Webhook.ExcludedNamespaces), cfg.Namespace)
	filter, err := cfg.Webhook.Filter()
	if err != nil {
		return err
	}
	kubeutil.RouteKlog(log)
	kc, err := cfg.Kube.Clients("verdict-webhook")
	if err != nil {
		return err
	}
	kube, dyn := kc.Kube, kc.Dynamic
	ctx = log.WithContext(ctx)
	reg := platform.NewRegistry()

	// JetStream: every replica provisions (idempotent), publishes results
	// asynchronously and work synchronously; nothing waits for NATS to be
	// up before the webhook serves.
	js, err := startJetStream(ctx, cfg.queueSettings(), reg, log)
	if err != nil {
		return err
	}
	defer js.close(ctx)

	// One set-up for the policy cache's engine and the admission
	// server's: the same sources, guards and limits.
	ec := cfg.engineConfig()
	ec.ImageCache = cfg.Registries.SharedCache(js.conn, cfg.NATS.StreamReplicas)
	ec.Metrics = reg
	eng, err := platform.NewEngine(kc, ec)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	pc := policycache.New(eng.Engine, dyn, kube, log).WithExceptions(cfg.Exceptions).WithAPI(cfg.PolicyAPI)
	if err := pc.Start(ctx); err != nil {
		return err
	}
	// Roles and cluster roles of requesters, for match and exclude blocks
	// that name them.
	rr, err := roles.New(kube)
	if err != nil {
		return err
	}
	switch err := rr.Start(ctx, 10*time.Second); {
	case errors.Is(err, roles.ErrNotSynced):
		// Serve anyway: a webhook that waits on RBAC listing (a missing
		// permission, a slow API server) would hold the cluster's writes.
		log.Warn().Err(err).Msg("serving before the RBAC bindings are listed: until they are, match blocks naming roles or clusterRoles select no request")
	case err != nil:
		return err
	}

	certSrc := certs.WatchSecret(ctx, kube, cfg.Namespace, cfg.TLSSecret)
	if cfg.Register || cfg.RenewCerts {
		// The leader's work stops, and its Lease is released, before the
		// process exits: the next leader takes over at its next retry,
		// not when the lease runs out.
		lctx, stop := context.WithCancel(ctx)
		leaderDone := make(chan struct{})
		go func() {
			defer close(leaderDone)
			runLeader(lctx, kube, dyn, cfg, filter, pc, eng.Engine, log)
		}()
		defer func() {
			stop()
			<-leaderDone
		}()
	}

	srv, err := webhook.New(cfg.Webhook,
		webhook.WithLogger(log),
		webhook.WithRegistry(reg),
		webhook.WithPolicySource(policySource{pc}),
		webhook.WithNamespaceLister(pc),
		webhook.WithRoleResolver(rr),
		webhook.WithKindResolver(kc.Mapper),
		webhook.WithDeleteAuthorizer(accessReviews{kube}),
		webhook.WithCertSource(certSrc),
		webhook.WithResultSink(js.results),
		webhook.WithWorkSink(js.work),
		webhook.WithReadinessCheck("nats", js.ready),
		webhook.WithEngineOptions(eng.Options()...),
		js.decisionOption(),
	)
	if err != nil {
		return err
	}
	if h := srv.KyvernoPolicyChanges(); h != nil {
		if err := pc.OnPolicyChange(h); err != nil {
			return err
		}
	}
	return srv.ListenAndServe(ctx, cfg.Webhook.Address, cfg.Webhook.ProbeAddress)
}

// runLeader campaigns for the Lease and, while leading, keeps the
// certificates and the webhook configurations current.
func runLeader(ctx context.Context, kube kubernetes.Interface, dyn dynamic.Interface, cfg Config, filter admissionfilter.Filter, pc *policycache.Cache, eng *engine.Engine, log zerolog.Logger) {
	shadow := cfg.Webhook.Shadow
	opts := registrar.Options{URL: cfg.WebhookURL, Filter: filter, GuardTTL: !shadow, Shadow: shadow, API: cfg.PolicyAPI}
	var gen *nativegen.Generator
	if cfg.GenerateAdmissionPolicies {
		gen = nativegen.New(dyn, eng, pc, filter, log)
		opts.Generated = gen.Generated
	}
	// reconcileAgain asks the registrar for another round (set while
	// leading).
	var reconcileAgain atomic.Pointer[func()]
	dns := []string{}
	if cfg.WebhookURL == "" {
		port := cfg.ServicePort
		opts.Service = &admissionregistrationv1.ServiceReference{Namespace: cfg.Namespace, Name: cfg.ServiceName, Port: &port}
		dns = append(dns, cfg.ServiceName+"."+cfg.Namespace+".svc", cfg.ServiceName+"."+cfg.Namespace+".svc.cluster.local")
	}
	resolver := registrar.NewDiscoveryResolver(kube.Discovery())
	// Policy statuses follow each reconcile: they say whether each
	// policy's webhooks are in place.
	api := pc.API()
	statuses := policystatus.New(dyn, pc, resolver, api.MustResource(policy.KindClusterPolicy), api.MustResource(policy.KindPolicy))
	reg := registrar.New(kube, resolver, pc, opts).
		WithCABundle(func() ([]byte, error) { return certs.Bundle(ctx, kube, cfg.Namespace, cfg.CASecret) }).
		WithAfterReconcile(func(ctx context.Context, err error) {
			if shadow {
				return // the policies are another controller's: read only
			}
			if err := statuses.Sync(ctx, err); err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Msg("policy status not written")
			}
			if gen == nil {
				return
			}
			// The policies the API server now enforces leave the webhooks
			// (and those it no longer does come back) on the next round.
			changed, err := gen.Sync(ctx)
			if err != nil && ctx.Err() == nil {
				log.Warn().Err(err).Msg("admission policies not all generated")
			}
			if f := reconcileAgain.Load(); changed && f != nil {
				(*f)()
			}
		})
	var renewer *certs.Renewer
	if cfg.RenewCerts {
		var err error
		renewer, err = certs.NewRenewer(kube, certs.Config{
			Namespace: cfg.Namespace, CASecret: cfg.CASecret, TLSSecret: cfg.TLSSecret,
			DNSNames: dns, IPs: cfg.CertIPs,
			CAValidity: cfg.CAValidity, CertValidity: cfg.CertValidity,
			RenewBefore: cfg.RenewBefore, ReloadGrace: cfg.ReloadGrace,
		}, func(ctx context.Context, ca *x509.Certificate) (bool, error) {
			return trustedByWebhooks(ctx, kube, opts, ca)
		})
		if err != nil {
			log.Error().Err(err).Msg("certificate renewer not started")
		}
	}
	err := leader.Run(ctx, kube, leader.Config{
		Namespace: cfg.Namespace, Name: cfg.LeaseName, Identity: cfg.Identity,
		LeaseDuration: cfg.LeaseDuration, RenewDeadline: cfg.RenewDeadline, RetryPeriod: cfg.RetryPeriod,
	}, func(lctx context.Context) {
		// The registrar reconciles when a configuration is touched and when
		// the certificate material changes (a CA rotation must reach the
		// caBundle before the renewer moves on).
		poke := make(chan struct{}, 1)
		signal := func() {
			select {
			case poke <- struct{}{}:
			default:
			}
		}
		reconcileAgain.Store(&signal)
		defer reconcileAgain.Store(nil)
		// Every goroutine started here ends with the term, before the
		// Lease is released.
		var wg sync.WaitGroup
		defer wg.Wait()
		if renewer != nil {
			wg.Go(func() {
				renewer.Loop(lctx, cfg.RenewInterval, func(step certs.Step) {
					if step != certs.StepNone {
						signal()
					}
				})
			})
		}
		if cfg.Register {
			if cfg.ReplicaSelector != "" {
				replicas, err := registrar.WatchReplicas(lctx, kube, cfg.Namespace, cfg.ReplicaSelector)
				if err != nil {
					log.Error().Err(err).Msg("webhook replicas not followed: configurations not written")
					<-lctx.Done()
					return
				}
				reg.WithReplicas(replicas)
			}
			watch := registrar.WatchConfigurations(lctx, kube, opts)
			wg.Go(func() {
				for {
					select {
					case <-lctx.Done():
						return
					case <-watch:
						signal()
					}
				}
			})
			_ = reg.Loop(lctx, poke, cfg.ReconcileInterval)
			return
		}
		<-lctx.Done()
	})
	if err != nil {
		log.Error().Err(err).Msg("leader election stopped")
	}
}

// trustedByWebhooks reports whether every admission webhook of the two
// configurations carries ca in its caBundle.
func trustedByWebhooks(ctx context.Context, kube kubernetes.Interface, opts registrar.Options, ca *x509.Certificate) (bool, error) {
	name := opts.ValidatingName
	if name == "" {
		name = registrar.DefaultValidatingName
	}
	v, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return false, nil //nolint:nilerr // not registered yet: not trusted yet
	}
	for _, w := range v.Webhooks {
		if !certs.BundleHas(w.ClientConfig.CABundle, ca) {
			return false, nil
		}
	}
	mname := opts.MutatingName
	if mname == "" {
		mname = registrar.DefaultMutatingName
	}
	m, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, mname, metav1.GetOptions{})
	if err != nil {
		return false, nil //nolint:nilerr // not registered yet
	}
	for _, w := range m.Webhooks {
		if !certs.BundleHas(w.ClientConfig.CABundle, ca) {
			return false, nil
		}
	}
	return true, nil
}
