package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
)

// CertSource supplies the serving certificate and keeps it current.
type CertSource interface {
	// GetCertificate is tls.Config.GetCertificate.
	GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Certificate is the current certificate, nil until one is loaded.
	Certificate() *tls.Certificate
	// Run keeps the certificate current until ctx ends.
	Run(ctx context.Context) error
}

// FileCertSource serves a certificate and key from PEM files and reloads
// them when their content changes: a mounted Secret is replaced by an
// atomic symlink swap, so the files are read and compared, not just
// stat'ed. A pair that does not load (half written, mismatched) keeps the
// previous certificate until the next check.
type FileCertSource struct {
	certFile, keyFile string
	interval          time.Duration
	log               zerolog.Logger

	cur atomic.Pointer[tls.Certificate]

	mu               sync.Mutex
	lastCert, lastKy []byte
}

// NewFileCertSource returns a source for the two files, checked every
// interval. It loads them once now; files that do not exist yet are not an
// error (the server is simply not ready until they appear).
func NewFileCertSource(certFile, keyFile string, interval time.Duration, log zerolog.Logger) (*FileCertSource, error) {
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%w: certificate and key files are required", ErrInvalidOption)
	}
	if interval <= 0 {
		return nil, fmt.Errorf("%w: reload interval %s", ErrInvalidOption, interval)
	}
	f := &FileCertSource{certFile: certFile, keyFile: keyFile, interval: interval, log: log}
	if _, err := f.Reload(); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn().Err(err).Str(logkey.File, certFile).Msg("serving certificate not loaded")
	}
	return f, nil
}

// GetCertificate returns the current certificate.
func (f *FileCertSource) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := f.cur.Load(); c != nil {
		return c, nil
	}
	return nil, ErrNoCertificate
}

// Certificate returns the current certificate or nil.
func (f *FileCertSource) Certificate() *tls.Certificate { return f.cur.Load() }

// Reload reads the files and, when they changed and form a valid pair,
// makes them current. It reports whether the certificate changed.
func (f *FileCertSource) Reload() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	certPEM, err := os.ReadFile(f.certFile)
	if err != nil {
		return false, fmt.Errorf("read certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(f.keyFile)
	if err != nil {
		return false, fmt.Errorf("read key: %w", err)
	}
	if bytes.Equal(certPEM, f.lastCert) && bytes.Equal(keyPEM, f.lastKy) {
		return false, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return false, fmt.Errorf("load key pair %s, %s: %w", f.certFile, f.keyFile, err)
	}
	f.lastCert, f.lastKy = certPEM, keyPEM
	f.cur.Store(&cert)
	ev := f.log.Info().Str(logkey.File, f.certFile)
	if cert.Leaf != nil {
		ev = ev.Time(logkey.NotAfter, cert.Leaf.NotAfter)
	}
	ev.Msg("serving certificate loaded")
	return true, nil
}

// Run checks the files every interval until ctx ends.
func (f *FileCertSource) Run(ctx context.Context) error {
	t := time.NewTicker(f.interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		_, err := f.Reload()
		if err != nil && !failing {
			// Log when reloading starts failing, not at every tick.
			f.log.Warn().Err(err).Str(logkey.File, f.certFile).Msg("serving certificate reload failed")
		}
		failing = err != nil
	}
}

// staticCertSource serves one fixed certificate.
type staticCertSource struct{ cert *tls.Certificate }

// StaticCertSource returns a CertSource that serves cert forever.
func StaticCertSource(cert tls.Certificate) CertSource { return staticCertSource{cert: &cert} }

func (s staticCertSource) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.cert, nil
}
func (s staticCertSource) Certificate() *tls.Certificate { return s.cert }
func (s staticCertSource) Run(ctx context.Context) error {
	<-ctx.Done()
	return nil
}
