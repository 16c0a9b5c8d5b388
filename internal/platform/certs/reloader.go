package certs

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/server/dynamiccertificates"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
)

// ErrNoCertificate is returned while no serving certificate is loaded.
var ErrNoCertificate = errors.New("no serving certificate loaded")

// Reloader is the serving certificate a server presents, kept current
// without a restart. It is fed from files (NewFileReloader: a mounted
// Secret, cert-manager), from a kubernetes.io/tls Secret followed by an
// informer (WatchSecret: every replica picks up the renewer's work), or
// by nothing (Static). A certificate and key that do not form a valid
// pair never replace the one being served.
//
// It serves both kinds of server Verdict runs: its GetCertificate is
// tls.Config's (the webhook), and it is a
// dynamiccertificates.CertKeyContentProvider, so an API server built on
// k8s.io/apiserver serves it and follows its changes (the reporter's
// serving mode).
type Reloader struct {
	name string
	cur  atomic.Pointer[loaded]
	// run keeps the certificate current until ctx ends (nil: nothing to
	// do, the feed runs on its own or there is none).
	run func(ctx context.Context) error

	mu        sync.Mutex // serialises set and guards listeners
	listeners []dynamiccertificates.Listener
}

type loaded struct {
	cert            tls.Certificate
	certPEM, keyPEM []byte
}

var _ dynamiccertificates.CertKeyContentProvider = (*Reloader)(nil)

// Static returns a Reloader that serves cert for ever.
func Static(cert tls.Certificate) *Reloader {
	r := &Reloader{name: "static"}
	r.cur.Store(&loaded{cert: cert})
	return r
}

// set makes the pair current when it differs from the current one and
// loads; it reports whether the certificate changed. A pair that does not
// load keeps the current one.
func (r *Reloader) set(certPEM, keyPEM []byte) (bool, error) {
	r.mu.Lock()
	if c := r.cur.Load(); c != nil && bytes.Equal(c.certPEM, certPEM) && bytes.Equal(c.keyPEM, keyPEM) {
		r.mu.Unlock()
		return false, nil
	}
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		r.mu.Unlock()
		return false, err
	}
	r.cur.Store(&loaded{cert: cert, certPEM: certPEM, keyPEM: keyPEM})
	listeners := slices.Clone(r.listeners)
	r.mu.Unlock()
	for _, l := range listeners {
		l.Enqueue()
	}
	return true, nil
}

// GetCertificate is for tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := r.cur.Load(); c != nil {
		return &c.cert, nil
	}
	return nil, ErrNoCertificate
}

// Certificate is the current certificate, nil until one is loaded.
func (r *Reloader) Certificate() *tls.Certificate {
	if c := r.cur.Load(); c != nil {
		return &c.cert
	}
	return nil
}

// Loaded reports whether a certificate is loaded.
func (r *Reloader) Loaded() bool { return r.cur.Load() != nil }

// Run keeps the certificate current until ctx ends: it checks the files
// of a file-fed Reloader; the others need nothing run (WatchSecret's
// informer runs until its own context ends).
func (r *Reloader) Run(ctx context.Context) error {
	if r.run == nil {
		<-ctx.Done()
		return nil
	}
	return r.run(ctx)
}

// Name is dynamiccertificates.CertKeyContentProvider's.
func (r *Reloader) Name() string { return r.name }

// CurrentCertKeyContent is the current certificate and key in PEM (nil
// before one is loaded, and for Static).
func (r *Reloader) CurrentCertKeyContent() (cert, key []byte) {
	if c := r.cur.Load(); c != nil {
		return c.certPEM, c.keyPEM
	}
	return nil, nil
}

// AddListener has l told after each certificate loaded from now on.
func (r *Reloader) AddListener(l dynamiccertificates.Listener) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.listeners = append(r.listeners, l)
}

// NewFileReloader serves a certificate and key from PEM files, checked
// every interval by Run. A mounted Secret is replaced by an atomic
// symlink swap, so the files are read and compared, not just stat'ed. The
// files are read once now; files that do not exist yet are not an error
// (the server simply has no certificate until they appear).
func NewFileReloader(certFile, keyFile string, interval time.Duration, log zerolog.Logger) (*Reloader, error) {
	if certFile == "" || keyFile == "" {
		return nil, fmt.Errorf("%w: certificate and key files are required", ErrInvalid)
	}
	if interval <= 0 {
		return nil, fmt.Errorf("%w: reload interval %s", ErrInvalid, interval)
	}
	r := &Reloader{name: certFile}
	files := []string{certFile, keyFile}
	load := func(content [][]byte) error {
		changed, err := r.set(content[0], content[1])
		if err != nil {
			return fmt.Errorf("load key pair %s, %s: %w", certFile, keyFile, err)
		}
		if changed {
			ev := log.Info().Str(logkey.File, certFile)
			if c := r.Certificate(); c.Leaf != nil {
				ev = ev.Time(logkey.NotAfter, c.Leaf.NotAfter)
			}
			ev.Msg("serving certificate loaded")
		}
		return nil
	}
	if err := loadFiles(files, load); err != nil && !errors.Is(err, fs.ErrNotExist) {
		log.Warn().Err(err).Str(logkey.File, certFile).Msg("serving certificate not loaded")
	}
	r.run = func(ctx context.Context) error {
		pollFiles(ctx, interval, files, load, func(err error) {
			log.Warn().Err(err).Str(logkey.File, certFile).Msg("serving certificate reload failed")
		})
		return nil
	}
	return r, nil
}

// WatchSecret serves the certificate of a kubernetes.io/tls Secret and
// follows its changes through an informer that runs until ctx ends.
func WatchSecret(ctx context.Context, client kubernetes.Interface, namespace, name string) *Reloader {
	r := &Reloader{name: namespace + "/" + name}
	log := zerolog.Ctx(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }))
	load := func(obj any) {
		sec, ok := obj.(*corev1.Secret)
		if !ok {
			return
		}
		changed, err := r.set(sec.Data[KeyCert], sec.Data[KeyKey])
		if err != nil {
			log.Warn().Err(err).Str(logkey.Secret, r.name).Msg("serving certificate secret is unreadable; keeping the previous one")
			return
		}
		if changed {
			log.Info().Str(logkey.Secret, r.name).Msg("serving certificate loaded")
		}
	}
	inf := f.Core().V1().Secrets().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    load,
		UpdateFunc: func(_, obj any) { load(obj) },
	})
	f.Start(ctx.Done())
	return r
}

// CABundle is a bundle of CA certificates read from a PEM file and
// reloaded when it changes, as a Reloader's files are (the webhook's
// client CAs). A file that holds no certificate keeps the bundle in use.
type CABundle struct {
	file string
	run  func(ctx context.Context)

	mu   sync.Mutex
	pem  []byte
	pool atomic.Pointer[x509.CertPool]
}

// NewFileCABundle reads the bundle, which must hold a certificate now,
// and checks the file every interval while Run runs.
func NewFileCABundle(file string, interval time.Duration, log zerolog.Logger) (*CABundle, error) {
	if file == "" || interval <= 0 {
		return nil, fmt.Errorf("%w: CA bundle file %q, reload interval %s", ErrInvalid, file, interval)
	}
	b := &CABundle{file: file}
	files := []string{file}
	if err := loadFiles(files, b.set); err != nil {
		return nil, err
	}
	b.run = func(ctx context.Context) {
		pollFiles(ctx, interval, files, b.set, func(err error) {
			log.Error().Err(err).Str(logkey.File, file).Msg("client CA bundle not reloaded")
		})
	}
	return b, nil
}

func (b *CABundle) set(content [][]byte) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if bytes.Equal(content[0], b.pem) {
		return nil
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(content[0]) {
		return fmt.Errorf("%w: %s holds no PEM certificate", ErrInvalid, b.file)
	}
	b.pem = content[0]
	b.pool.Store(pool)
	return nil
}

// Pool is the current bundle.
func (b *CABundle) Pool() *x509.CertPool { return b.pool.Load() }

// Run checks the file every interval until ctx ends.
func (b *CABundle) Run(ctx context.Context) { b.run(ctx) }

// loadFiles reads files and hands their content to load.
func loadFiles(files []string, load func([][]byte) error) error {
	content := make([][]byte, len(files))
	for i, f := range files {
		var err error
		if content[i], err = os.ReadFile(f); err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
	}
	return load(content)
}

// pollFiles calls loadFiles every interval until ctx ends, and failed
// when loading starts failing (not at every tick while it goes on).
func pollFiles(ctx context.Context, interval time.Duration, files []string, load func([][]byte) error, failed func(error)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		err := loadFiles(files, load)
		if err != nil && !failing {
			failed(err)
		}
		failing = err != nil
	}
}
