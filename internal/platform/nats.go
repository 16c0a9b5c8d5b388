package platform

import (
	"errors"
	"flag"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/natsconn"
	"github.com/verdict-dev/verdict/pkg/queue"
	"github.com/verdict-dev/verdict/pkg/queue/queueprom"
)

// NATSConfig is how a service reaches JetStream (natsconn.Config, shared
// with the pipeline CLI), and the streams it provisions (every service
// provisions them alike, so they share these settings).
type NATSConfig struct {
	// Config is the connection: URLs, credentials, TLS.
	natsconn.Config
	// StreamReplicas is the streams' replica count: 1, or 3 or 5 in a
	// NATS cluster.
	StreamReplicas int
	// Streams are the streams' size limits.
	Streams bus.StreamLimits
}

// DefaultNATSConfig is a local server, one replica, the default limits.
func DefaultNATSConfig() NATSConfig {
	return NATSConfig{Config: natsconn.Default(), StreamReplicas: 1, Streams: bus.DefaultStreamLimits()}
}

// Validate returns every problem, each wrapping ErrInvalidConfig.
func (c NATSConfig) Validate() error {
	var errs []error
	if err := c.Config.Validate(); err != nil {
		for _, e := range unjoin(err) {
			errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, e))
		}
	}
	if c.StreamReplicas != 1 && c.StreamReplicas != 3 && c.StreamReplicas != 5 {
		errs = append(errs, fmt.Errorf("%w: stream-replicas %d: 1, 3 or 5", ErrInvalidConfig, c.StreamReplicas))
	}
	if err := c.Streams.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
	}
	return errors.Join(errs...)
}

// unjoin is the errors joined in err, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok { //nolint:errorlint // taking a join apart, not matching an error
		return j.Unwrap()
	}
	return []error{err}
}

// ConnOptions are the options of queue.Connect for a service's connection
// named name, logging to log: natsconn's (servers, credentials, TLS), and
// the queue's metrics (verdict_queue_*) registered on reg, the registry the
// service serves on /metrics. A registry takes them once: one connection
// per registry.
func (c NATSConfig) ConnOptions(name string, log zerolog.Logger, reg prometheus.Registerer) ([]queue.ConnOption, error) {
	m, err := queueprom.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	return append(c.Config.ConnOptions(name, log), queue.WithMetrics(m)), nil
}

// ProvisionOptions are the streams' replicas and limits as options of
// queue.Conn.Provision (consumers are each service's own).
func (c NATSConfig) ProvisionOptions() []bus.ProvisionOption {
	return append(c.Streams.ProvisionOptions(), bus.WithReplicas(c.StreamReplicas))
}

// BindNATSFlags binds the connection flags (natsconn.BindFlags) and the
// stream flags.
func BindNATSFlags(fs *flag.FlagSet, c *NATSConfig) {
	natsconn.BindFlags(fs, &c.Config)
	fs.IntVar(&c.StreamReplicas, "stream-replicas", c.StreamReplicas, "replicas of the JetStream streams (1, or 3 or 5 with a NATS cluster)")
	fs.IntVar(&c.Streams.ResultHistory, "result-history", c.Streams.ResultHistory, "messages VERDICT_RESULTS keeps per resource and policy (the newest evaluation survives that many minus one late older ones); the same on every service")
	BytesVar(fs, &c.Streams.ResultsMaxBytes, "results-max-bytes", "size limit of VERDICT_RESULTS (a quantity: 4Gi); when full it refuses new results, never deletes stored ones; the same on every service")
	fs.Int64Var(&c.Streams.WorkMaxMsgs, "work-max-messages", c.Streams.WorkMaxMsgs, "message limit of VERDICT_WORK; when full it refuses new work; the same on every service")
	BytesVar(fs, &c.Streams.WorkMaxBytes, "work-max-bytes", "size limit of VERDICT_WORK (a quantity: 1Gi); when full it refuses new work; the same on every service")
	fs.DurationVar(&c.Streams.DecisionsMaxAge, "decisions-max-age", c.Streams.DecisionsMaxAge, "how long VERDICT_DECISIONS, the admission log, keeps a decision; the same on every service")
	BytesVar(fs, &c.Streams.DecisionsMaxBytes, "decisions-max-bytes", "size limit of VERDICT_DECISIONS (a quantity: 1Gi); when full the oldest decisions go; the same on every service")
}

// BytesVar binds a size flag written as a Kubernetes quantity (4Gi, 512Mi,
// 1000000).
func BytesVar(fs *flag.FlagSet, dst *int64, name, usage string) {
	fs.Func(name, usage+" (default "+resource.NewQuantity(*dst, resource.BinarySI).String()+")", func(s string) error {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return err
		}
		n, ok := q.AsInt64()
		if !ok {
			return fmt.Errorf("%s is not a whole number of bytes", s)
		}
		*dst = n
		return nil
	})
}
