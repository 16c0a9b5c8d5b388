package service

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/verdict-dev/verdict/pkg/queue"
)

// NATSConfig is how a service reaches JetStream, and the streams it
// provisions (every service provisions them alike, so they share these
// settings).
type NATSConfig struct {
	// URLs are the servers (nats:// or tls://; several for a cluster).
	URLs []string
	// Credentials is a NATS credentials (JWT and seed) file; NKeyFile an
	// NKey seed file.
	Credentials string
	NKeyFile    string
	// CAFile verifies the servers (with tls:// URLs); CertFile and KeyFile
	// are a client certificate.
	CAFile, CertFile, KeyFile string
	// StreamReplicas is the streams' replica count: 1, or 3 or 5 in a
	// NATS cluster.
	StreamReplicas int
	// Streams are the streams' size limits.
	Streams queue.StreamLimits
}

// DefaultNATSConfig is a local server, one replica, the default limits.
func DefaultNATSConfig() NATSConfig {
	return NATSConfig{URLs: []string{"nats://127.0.0.1:4222"}, StreamReplicas: 1, Streams: queue.DefaultStreamLimits()}
}

// Validate returns every problem, each wrapping ErrInvalidConfig.
func (c NATSConfig) Validate() error {
	var errs []error
	if len(c.URLs) == 0 {
		errs = append(errs, fmt.Errorf("%w: at least one --nats-url is required", ErrInvalidConfig))
	}
	if c.Credentials != "" && c.NKeyFile != "" {
		errs = append(errs, fmt.Errorf("%w: --nats-credentials and --nats-nkey-file are two ways to authenticate: give one", ErrInvalidConfig))
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		errs = append(errs, fmt.Errorf("%w: --nats-cert-file and --nats-key-file go together", ErrInvalidConfig))
	}
	if c.StreamReplicas != 1 && c.StreamReplicas != 3 && c.StreamReplicas != 5 {
		errs = append(errs, fmt.Errorf("%w: stream-replicas %d: 1, 3 or 5", ErrInvalidConfig, c.StreamReplicas))
	}
	if err := c.Streams.Validate(); err != nil {
		errs = append(errs, fmt.Errorf("%w: %w", ErrInvalidConfig, err))
	}
	return errors.Join(errs...)
}

// ConnOptions are the options of queue.Connect for a connection named
// name, logging to log and registering its metrics on reg.
func (c NATSConfig) ConnOptions(name string, log zerolog.Logger, reg prometheus.Registerer) []queue.ConnOption {
	opts := []queue.ConnOption{queue.WithURL(c.URLs...), queue.WithName(name), queue.WithLogger(log), queue.WithRegisterer(reg)}
	if c.Credentials != "" {
		opts = append(opts, queue.WithCredentialsFile(c.Credentials))
	}
	if c.NKeyFile != "" {
		opts = append(opts, queue.WithNKeyFile(c.NKeyFile))
	}
	if c.CAFile != "" || c.CertFile != "" {
		opts = append(opts, queue.WithTLS(c.CAFile, c.CertFile, c.KeyFile))
	}
	return opts
}

// ProvisionOptions are the streams' replicas and limits as options of
// queue.Conn.Provision (consumers are each service's own).
func (c NATSConfig) ProvisionOptions() []queue.ProvisionOption {
	return append(c.Streams.ProvisionOptions(), queue.WithReplicas(c.StreamReplicas))
}

// BindNATSFlags binds the connection and stream flags.
func BindNATSFlags(fs *flag.FlagSet, c *NATSConfig) {
	ListFlag(fs, "nats-url", "JetStream server URL (repeatable, or comma-separated; default "+strings.Join(c.URLs, ",")+")",
		func() { c.URLs = nil },
		func(u string) error {
			c.URLs = append(c.URLs, u)
			return nil
		})
	fs.StringVar(&c.Credentials, "nats-credentials", c.Credentials, "NATS credentials file (JWT and seed)")
	fs.StringVar(&c.NKeyFile, "nats-nkey-file", c.NKeyFile, "NATS NKey seed file")
	fs.StringVar(&c.CAFile, "nats-ca-file", c.CAFile, "CA bundle that verifies the NATS servers (tls:// URLs)")
	fs.StringVar(&c.CertFile, "nats-cert-file", c.CertFile, "client certificate for NATS (with --nats-key-file)")
	fs.StringVar(&c.KeyFile, "nats-key-file", c.KeyFile, "client certificate key for NATS")
	fs.IntVar(&c.StreamReplicas, "stream-replicas", c.StreamReplicas, "replicas of the JetStream streams (1, or 3 or 5 with a NATS cluster)")
	fs.IntVar(&c.Streams.ResultHistory, "result-history", c.Streams.ResultHistory, "messages VERDICT_RESULTS keeps per resource and policy (the newest evaluation survives that many minus one late older ones); the same on every service")
	bytesVar(fs, &c.Streams.ResultsMaxBytes, "results-max-bytes", "size limit of VERDICT_RESULTS (a quantity: 4Gi); when full it refuses new results, never deletes stored ones; the same on every service")
	fs.Int64Var(&c.Streams.WorkMaxMsgs, "work-max-messages", c.Streams.WorkMaxMsgs, "message limit of VERDICT_WORK; when full it refuses new work; the same on every service")
	bytesVar(fs, &c.Streams.WorkMaxBytes, "work-max-bytes", "size limit of VERDICT_WORK (a quantity: 1Gi); when full it refuses new work; the same on every service")
}

// bytesVar binds a size flag written as a Kubernetes quantity (4Gi, 512Mi,
// 1000000).
func bytesVar(fs *flag.FlagSet, dst *int64, name, usage string) {
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
