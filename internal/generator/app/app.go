// Package generatorapp is the generator service: its Config, the clients
// it needs and Run, which provisions the streams and the generator's
// durable consumer, serves /metrics, /healthz and /readyz, and runs
// internal/generator until its context ends.
package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/generator"
	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/platform/policyhttp"
)

// ErrInvalidConfig wraps configuration errors.
var ErrInvalidConfig = errors.New("invalid generator config")

// Config is the generator service's configuration.
type Config struct {
	// Kube is how the generator reaches the API server.
	Kube platform.KubeConfig
	// PolicyHTTP says whether and where policies may call services
	// over HTTP (off by default).
	PolicyHTTP policyhttp.Config
	// Exceptions says which PolicyExceptions count and how far they
	// reach (--policy-exceptions, --exception-namespaces).
	Exceptions policycache.ExceptionConfig
	// PolicyAPI is where the policies are served.
	PolicyAPI policycache.API
	// Namespace is Verdict's namespace, whose Secrets no policy reads
	// (kube.Protected).
	Namespace string
	// NATS is the JetStream connection and the streams' replicas and
	// limits (the same on every service).
	NATS platform.NATSConfig

	// VerifyGrace is how long after a work item was stored its trigger
	// may still be missing (the webhook publishes before the object is
	// stored) before the item is skipped as triggerNotFound; without
	// mutual TLS, also how old a trigger may be for a CREATE item's
	// requester to stand (at most 2m: VERDICT_WORK's duplicate window).
	VerifyGrace time.Duration
	// Worker is how the replica takes items from its consumer
	// (concurrency, ack wait, attempts, retries, shutdown).
	Worker platform.WorkerConfig
	// Limits bound the work and memory of each evaluation.
	Limits platform.EvaluationLimits

	// ProbeAddress serves /metrics, /healthz and /readyz over plain HTTP
	// (empty: none).
	ProbeAddress string
	Log          platform.LogConfig
}

// maxVerifyGrace is VERDICT_WORK's duplicate window (pkg/queue's
// default, which no service changes). Without mutual TLS a CREATE item's
// requester is trusted when its trigger was created within the grace
// period, because a second review of the same creation (a forged one)
// has the same message id: that holds only while the stream still
// remembers the first.
const maxVerifyGrace = 2 * time.Minute

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Kube:         platform.KubeConfig{QPS: 100, Burst: 200, Timeout: 30 * time.Second},
		Namespace:    "verdict",
		NATS:         platform.DefaultNATSConfig(),
		VerifyGrace:  30 * time.Second,
		Worker:       platform.DefaultWorkerConfig(),
		Limits:       platform.DefaultEvaluationLimits(),
		ProbeAddress: ":8080",
		Log:          platform.DefaultLogConfig(),
	}
}

// Validate checks the config and returns every problem, wrapped in
// ErrInvalidConfig.
func (c *Config) Validate() error {
	var errs []error
	for _, err := range []error{c.Kube.Validate(), c.NATS.Validate(), c.Worker.Validate(), c.Limits.Validate(), c.Log.Validate(), c.Exceptions.Validate()} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if c.VerifyGrace < time.Second || c.VerifyGrace > maxVerifyGrace {
		errs = append(errs, fmt.Errorf("verify grace %s: at least 1s, at most %s (VERDICT_WORK's duplicate window)", c.VerifyGrace, maxVerifyGrace))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}

// Run works generate items until ctx ends, then drains: items in flight
// finish (or are given back) before it returns. client-go logs through
// klog: route it first (kube.RouteKlog, at start-up).
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx = log.WithContext(ctx)
	kc, err := cfg.Kube.Clients("verdict-generator")
	if err != nil {
		return err
	}
	dyn, kube, mapper := kc.Dynamic, kc.Kube, kc.Mapper
	check, err := apicheck.New(kc.Metadata, mapper, apicheck.WithGrace(cfg.VerifyGrace))
	if err != nil {
		return err
	}
	// Clone sources and mutate-existing targets are read from the
	// cluster, Verdict's Secrets kept from them as from every read.
	eng, err := platform.NewEngine(kc, platform.EngineConfig{Namespace: cfg.Namespace, PolicyHTTP: cfg.PolicyHTTP, Limits: cfg.Limits}, platform.WithClusterLister())
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	reg := platform.NewRegistry()
	conn, err := platform.ConnectWorker(ctx, "verdict-generator", cfg.NATS, cfg.Worker, bus.ConsumerGenerator, reg, log)
	if err != nil {
		return err
	}
	defer conn.Close()
	// The policy cache: compiled policies, exceptions and namespace
	// labels from the API's watches (an item whose policy it does not
	// hold yet reads the API). It syncs in the background.
	pc := policycache.New(eng.Engine, dyn, kube, log).WithExceptions(cfg.Exceptions).WithAPI(cfg.PolicyAPI)
	// Its start is waited for before Run returns (and stopped first).
	sctx, stopSync := context.WithCancel(ctx)
	synced := make(chan struct{})
	defer func() {
		stopSync()
		<-synced
	}()
	go func() {
		defer close(synced)
		if err := pc.Start(sctx); err != nil && sctx.Err() == nil {
			log.Error().Err(err).Msg("policyCacheNotStarted")
		}
	}()
	g, err := generator.New(generator.Deps{
		Conn: conn, Dynamic: dyn, Mapper: mapper, Kinds: kubeutil.NewListableKinds(kc.Discovery, 30*time.Second),
		Policies: pc, Check: check, Engine: eng.Engine,
	},
		generator.WithRunnerOptions(cfg.Worker.RunnerOptions()...),
		generator.WithRegisterer(reg),
		generator.WithLogger(log),
	)
	if err != nil {
		return err
	}
	if cfg.ProbeAddress != "" {
		stop, err := platform.ServeProbes(ctx, cfg.ProbeAddress, reg, platform.NATSReady(conn), log)
		if err != nil {
			return err
		}
		defer stop()
	}
	log.Info().Msg("generatorStarted")
	err = g.Run(ctx)
	log.Info().Err(err).Msg("generatorStopped")
	return err
}
