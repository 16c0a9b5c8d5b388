// Package cleanerapp is the cleaner service: its Config, the clients it
// needs and Run, which provisions the streams and the cleaner's durable
// consumer, serves /metrics, /healthz and /readyz, and runs
// internal/cleaner (the policies' schedules, their ticks, the TTL sweep)
// until its context ends.
package app

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/rs/zerolog"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/cleaner"
	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/platform/policyhttp"
)

// ErrInvalidConfig wraps configuration errors.
var ErrInvalidConfig = errors.New("invalid cleaner config")

// Config is the cleaner service's configuration.
type Config struct {
	// Kube is how the cleaner reaches the API server.
	Kube platform.KubeConfig
	// PolicyAPI is where the cleanup and deleting policies are served.
	PolicyAPI policycache.API
	// PolicyHTTP says whether and where policies may call services
	// over HTTP (off by default).
	PolicyHTTP policyhttp.Config
	// Namespace is Verdict's namespace, whose Secrets no policy reads
	// (kube.Protected).
	Namespace string
	// NATS is the JetStream connection and the streams' replicas and
	// limits (the same on every service).
	NATS platform.NATSConfig
	// Worker is how ticks are taken from the cleaner's consumer.
	Worker platform.WorkerConfig
	// Limits bound the work and memory of each evaluation.
	Limits platform.EvaluationLimits
	// TTLInterval is how often the TTL sweep runs (one schedule shared by
	// every replica: give them all the same).
	TTLInterval time.Duration
	// Resync is how often every policy's schedule is checked again.
	Resync time.Duration
	// Identity names this replica in the Events it records (empty: the
	// host name, the Pod's name in a cluster).
	Identity string

	// ProbeAddress serves /metrics, /healthz and /readyz over plain HTTP
	// (empty: none).
	ProbeAddress string
	Log          platform.LogConfig
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		Kube:         platform.KubeConfig{QPS: 100, Burst: 200, Timeout: 30 * time.Second},
		Namespace:    "verdict",
		NATS:         platform.DefaultNATSConfig(),
		Worker:       platform.DefaultWorkerConfig(),
		Limits:       platform.DefaultEvaluationLimits(),
		TTLInterval:  time.Minute,
		Resync:       10 * time.Minute,
		ProbeAddress: ":8080",
		Log:          platform.DefaultLogConfig(),
	}
}

// Validate checks the config and returns every problem, wrapped in
// ErrInvalidConfig.
func (c *Config) Validate() error {
	var errs []error
	for _, err := range []error{c.Kube.Validate(), c.NATS.Validate(), c.Worker.Validate(), c.Limits.Validate(), c.Log.Validate()} {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if c.TTLInterval < time.Second {
		errs = append(errs, fmt.Errorf("ttl interval %s: at least 1s", c.TTLInterval))
	}
	if c.Resync < time.Second {
		errs = append(errs, fmt.Errorf("schedule resync %s: at least 1s", c.Resync))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return nil
}

// Run keeps the cleanup schedules and works ticks until ctx ends, then
// drains: ticks in flight finish (or are given back) before it returns.
func Run(ctx context.Context, cfg Config, log zerolog.Logger) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	ctx = log.WithContext(ctx)
	kc, err := cfg.Kube.Clients(cleaner.Component)
	if err != nil {
		return err
	}
	eng, err := platform.NewEngine(kc, platform.EngineConfig{Namespace: cfg.Namespace, PolicyHTTP: cfg.PolicyHTTP, Limits: cfg.Limits})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	reg := platform.NewRegistry()
	conn, err := platform.ConnectWorker(ctx, cleaner.Component, cfg.NATS, cfg.Worker, bus.ConsumerCleaner, reg, log)
	if err != nil {
		return err
	}
	defer conn.Close()
	opts := []cleaner.Option{
		cleaner.WithRunnerOptions(cfg.Worker.RunnerOptions()...),
		cleaner.WithTTLInterval(cfg.TTLInterval),
		cleaner.WithResync(cfg.Resync),
		cleaner.WithRegisterer(reg),
		cleaner.WithLogger(log),
		cleaner.WithAPI(cfg.PolicyAPI),
	}
	if cfg.Identity != "" {
		opts = append(opts, cleaner.WithIdentity(cfg.Identity))
	}
	// The TTL sweep lists every served kind each interval, deprecated
	// ones (v1 Endpoints) too: their warnings would fill the log.
	quiet := rest.CopyConfig(kc.REST)
	quiet.WarningHandler = rest.NoWarnings{}
	meta, err := metadata.NewForConfig(quiet)
	if err != nil {
		return err
	}
	cl, err := cleaner.New(conn, cleaner.Clients{Dynamic: kc.Dynamic, Metadata: meta, Discovery: kc.Discovery, Kube: kc.Kube}, eng.Engine, opts...)
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
	log.Info().Msg("cleanerStarted")
	err = cl.Run(ctx)
	log.Info().Err(err).Msg("cleanerStopped")
	return err
}
