package platform

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// WorkerConfig is how a worker service takes items from its durable
// consumer on VERDICT_WORK: the settings every worker (generator,
// cleaner) shares, with the same flags.
type WorkerConfig struct {
	// Concurrency is how many work items a replica works on at once.
	Concurrency int
	// AckWait is how long a replica may hold an item without a sign of
	// life before JetStream gives it to another.
	AckWait time.Duration
	// Attempts bounds the deliveries of an item that keeps failing
	// transiently before it is dead-lettered.
	Attempts int
	// RetryMin and RetryMax are the backoff of retries: RetryMin first,
	// doubling up to RetryMax.
	RetryMin time.Duration
	RetryMax time.Duration
	// ShutdownTimeout bounds the wait for items in flight at SIGTERM.
	ShutdownTimeout time.Duration
}

// DefaultWorkerConfig is 8 items at once, a 30 s ack wait, 10 attempts
// with retries from 1 s doubling to 1 m, and 30 s to finish at shutdown.
func DefaultWorkerConfig() WorkerConfig {
	return WorkerConfig{
		Concurrency:     8,
		AckWait:         30 * time.Second,
		Attempts:        10,
		RetryMin:        time.Second,
		RetryMax:        time.Minute,
		ShutdownTimeout: 30 * time.Second,
	}
}

// Validate returns every problem, each wrapping ErrInvalidConfig.
func (c WorkerConfig) Validate() error {
	var errs []error
	if c.Concurrency < 1 || c.Concurrency > 500 {
		errs = append(errs, fmt.Errorf("%w: concurrency %d: 1 to 500", ErrInvalidConfig, c.Concurrency))
	}
	if c.AckWait < 3*time.Second {
		errs = append(errs, fmt.Errorf("%w: ack wait %s: at least 3s", ErrInvalidConfig, c.AckWait))
	}
	if c.Attempts < 1 {
		errs = append(errs, fmt.Errorf("%w: attempts %d must be positive", ErrInvalidConfig, c.Attempts))
	}
	if c.RetryMin <= 0 || c.RetryMax < c.RetryMin {
		errs = append(errs, fmt.Errorf("%w: retry delays %s to %s: positive, the first no longer than the last", ErrInvalidConfig, c.RetryMin, c.RetryMax))
	}
	if c.ShutdownTimeout <= 0 {
		errs = append(errs, fmt.Errorf("%w: shutdown timeout %s must be positive", ErrInvalidConfig, c.ShutdownTimeout))
	}
	return errors.Join(errs...)
}

// RunnerOptions are the config as options of the worker's queue runner
// (concurrency, attempts, retry delays, the drain at shutdown, and a
// prefetch of twice the concurrency).
func (c WorkerConfig) RunnerOptions() []queue.RunnerOption {
	return []queue.RunnerOption{
		queue.WithConcurrency(c.Concurrency),
		queue.WithMaxDeliver(c.Attempts),
		queue.WithRetryDelays(c.RetryMin, c.RetryMax),
		queue.WithDrainTimeout(c.ShutdownTimeout),
		queue.WithPrefetch(2 * c.Concurrency),
	}
}

// ConnectWorker connects a worker service named name to JetStream (its
// queue metrics on reg) and provisions the streams and the worker's
// durable consumer, with the config's AckWait. Every replica provisions
// (idempotent); when that fails now, it is logged and the runner waits
// for the consumer.
func ConnectWorker(ctx context.Context, name string, nats NATSConfig, w WorkerConfig, consumer string, reg prometheus.Registerer, log zerolog.Logger) (*queue.Conn, error) {
	spec, ok := bus.DefaultConsumer(consumer)
	if !ok {
		return nil, fmt.Errorf("%w: no consumer %q", ErrInvalidConfig, consumer)
	}
	spec.AckWait = w.AckWait
	connOpts, err := nats.ConnOptions(name, log, reg)
	if err != nil {
		return nil, err
	}
	conn, err := bus.Connect(ctx, connOpts...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS: %w", err)
	}
	if err := bus.Provision(ctx, conn, append(nats.ProvisionOptions(), bus.WithConsumers(spec))...); err != nil {
		log.Warn().Err(err).Msg("streamsNotProvisioned")
	}
	return conn, nil
}

// BindWorkerFlags binds --concurrency, --ack-wait, --attempts,
// --retry-min, --retry-max and --shutdown-timeout.
func BindWorkerFlags(fs *flag.FlagSet, c *WorkerConfig) {
	fs.IntVar(&c.Concurrency, "concurrency", c.Concurrency, "work items one replica works on at once")
	fs.DurationVar(&c.AckWait, "ack-wait", c.AckWait, "how long a replica may hold a work item without a sign of life before another gets it")
	fs.IntVar(&c.Attempts, "attempts", c.Attempts, "deliveries of a work item that keeps failing before it is dead-lettered")
	fs.DurationVar(&c.RetryMin, "retry-min", c.RetryMin, "delay before the first retry of a failed work item (doubling after)")
	fs.DurationVar(&c.RetryMax, "retry-max", c.RetryMax, "longest delay between retries")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", c.ShutdownTimeout, "how long work items in flight may take to finish at shutdown")
}
