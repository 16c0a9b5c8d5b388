// Package natsconn is how a Verdict process reaches NATS: the server URLs,
// the credentials (a credentials file or an NKey seed) and TLS, their
// kebab-case flags and the queue.Connect options they make. The services
// (internal/platform.NATSConfig adds the streams' replicas and limits) and
// the pipeline CLI (`verdict work`) share it, so both take the same flags
// with one implementation; it links no Kubernetes client and no
// prometheus client (a service adds the queue's metrics:
// service.NATSConfig.ConnOptions).
package natsconn

import (
	"errors"
	"flag"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/platform/cliflag"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// ErrInvalidConfig wraps every problem Validate finds.
var ErrInvalidConfig = errors.New("invalid NATS connection settings")

// DefaultURL is the server a process reaches when no --nats-url is given.
const DefaultURL = "nats://127.0.0.1:4222"

// Config is how to reach the NATS servers.
type Config struct {
	// URLs are the servers (nats:// or tls://; several for a cluster).
	URLs []string
	// Credentials is a NATS credentials (JWT and seed) file; NKeyFile an
	// NKey seed file.
	Credentials string
	NKeyFile    string
	// CAFile verifies the servers (with tls:// URLs); CertFile and KeyFile
	// are a client certificate.
	CAFile, CertFile, KeyFile string
}

// Default is a local server without credentials.
func Default() Config {
	return Config{URLs: []string{DefaultURL}}
}

// Validate returns every problem, each wrapping ErrInvalidConfig.
func (c Config) Validate() error {
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
	return errors.Join(errs...)
}

// ConnOptions are the options of queue.Connect for a connection named
// name, logging to log. They give no metrics: the connection records none
// unless queue.WithMetrics is added.
func (c Config) ConnOptions(name string, log zerolog.Logger) []queue.ConnOption {
	opts := []queue.ConnOption{queue.WithURL(c.URLs...), queue.WithName(name), queue.WithLogger(log)}
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

// BindFlags binds --nats-url, --nats-credentials, --nats-nkey-file,
// --nats-ca-file, --nats-cert-file and --nats-key-file to c; their
// defaults are c's values.
func BindFlags(fs *flag.FlagSet, c *Config) {
	cliflag.List(fs, "nats-url", "JetStream server `URL` (repeatable, or comma-separated; default "+strings.Join(c.URLs, ",")+")",
		func() { c.URLs = nil },
		func(u string) error {
			c.URLs = append(c.URLs, u)
			return nil
		})
	fs.StringVar(&c.Credentials, "nats-credentials", c.Credentials, "NATS credentials `file` (JWT and seed)")
	fs.StringVar(&c.NKeyFile, "nats-nkey-file", c.NKeyFile, "NATS NKey seed `file`")
	fs.StringVar(&c.CAFile, "nats-ca-file", c.CAFile, "CA bundle `file` that verifies the NATS servers (tls:// URLs)")
	fs.StringVar(&c.CertFile, "nats-cert-file", c.CertFile, "client certificate `file` for NATS (with --nats-key-file)")
	fs.StringVar(&c.KeyFile, "nats-key-file", c.KeyFile, "client certificate key `file` for NATS")
}

// Redacted is the servers' URLs for messages, without passwords or tokens.
func (c Config) Redacted() string {
	out := make([]string, len(c.URLs))
	for i, u := range c.URLs {
		out[i] = redact(u)
	}
	return strings.Join(out, ",")
}

// redact drops the user information of a URL (nats://user:pass@host or
// nats://token@host): only the host and port say which server it is.
func redact(u string) string {
	scheme, rest, ok := strings.Cut(u, "://")
	if !ok {
		scheme, rest = "", u
	}
	if at := strings.LastIndex(rest, "@"); at >= 0 {
		rest = "***@" + rest[at+1:]
	}
	if scheme == "" {
		return rest
	}
	return scheme + "://" + rest
}
