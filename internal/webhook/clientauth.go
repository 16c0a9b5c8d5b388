package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
)

// clientCAs holds the CA bundle that verifies callers' client certificates
// (mutual TLS), reloaded when the file changes.
type clientCAs struct {
	file     string
	interval time.Duration
	log      zerolog.Logger
	pem      []byte
	pool     atomic.Pointer[x509.CertPool]
}

// loadClientCAs reads the bundle; a missing or empty bundle is an error at
// start (requiring client certificates with no CA would refuse everyone).
func loadClientCAs(file string, interval time.Duration, log zerolog.Logger) (*clientCAs, error) {
	c := &clientCAs{file: file, interval: interval, log: log}
	if err := c.reload(); err != nil {
		return nil, fmt.Errorf("%w: client-ca-file: %w", ErrInvalidConfig, err)
	}
	return c, nil
}

func (c *clientCAs) reload() error {
	data, err := os.ReadFile(c.file)
	if err != nil {
		return err
	}
	if bytes.Equal(data, c.pem) {
		return nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(data) {
		return fmt.Errorf("%s holds no PEM certificate", c.file)
	}
	c.pem = data
	c.pool.Store(pool)
	return nil
}

// run reloads the bundle every interval until ctx ends; a broken file keeps
// the bundle in use.
func (c *clientCAs) run(ctx context.Context) {
	t := time.NewTicker(c.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := c.reload(); err != nil {
				c.log.Error().Err(err).Str(logkey.File, c.file).Msg("client CA bundle not reloaded")
			}
		}
	}
}

// tlsConfig is the server's TLS configuration: the serving certificate
// from the source and, when clients are verified, a handshake that fails
// without a client certificate signed by the bundle.
func (s *Server) tlsConfig() *tls.Config {
	base := &tls.Config{
		MinVersion:     tls.VersionTLS12,
		GetCertificate: s.certs.GetCertificate,
	}
	if s.clientCAs == nil {
		return base
	}
	base.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cfg := base.Clone()
		cfg.GetConfigForClient = nil
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = s.clientCAs.pool.Load()
		return cfg, nil
	}
	return base
}
