package certs

import (
	"context"
	"crypto/tls"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
)

// ErrNoCertificate is returned while no serving certificate is loaded.
var ErrNoCertificate = errors.New("no serving certificate loaded")

// SecretSource serves the certificate of a kubernetes.io/tls Secret and
// follows its changes through an informer, so every replica picks up a
// renewal without restarting.
type SecretSource struct {
	cert atomic.Pointer[tls.Certificate]
	pem  atomic.Pointer[[2][]byte]

	mu        sync.Mutex
	listeners []func()
}

// WatchSecret starts following the Secret; it runs until ctx ends.
func WatchSecret(ctx context.Context, client kubernetes.Interface, namespace, name string) *SecretSource {
	s := &SecretSource{}
	log := zerolog.Ctx(ctx)
	f := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }))
	load := func(obj any) {
		sec, ok := obj.(*corev1.Secret)
		if !ok {
			return
		}
		c, err := tls.X509KeyPair(sec.Data[KeyCert], sec.Data[KeyKey])
		if err != nil {
			log.Warn().Err(err).Str(logkey.Secret, namespace+"/"+name).Msg("serving certificate secret is unreadable; keeping the previous one")
			return
		}
		s.cert.Store(&c)
		s.pem.Store(&[2][]byte{sec.Data[KeyCert], sec.Data[KeyKey]})
		s.mu.Lock()
		listeners := slices.Clone(s.listeners)
		s.mu.Unlock()
		for _, f := range listeners {
			f()
		}
		log.Info().Str(logkey.Secret, namespace+"/"+name).Msg("serving certificate loaded")
	}
	inf := f.Core().V1().Secrets().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    load,
		UpdateFunc: func(_, obj any) { load(obj) },
	})
	f.Start(ctx.Done())
	return s
}

// GetCertificate is for tls.Config.GetCertificate.
func (s *SecretSource) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	c := s.cert.Load()
	if c == nil {
		return nil, ErrNoCertificate
	}
	return c, nil
}

// Content is the loaded certificate and key in PEM (nil before one is
// loaded).
func (s *SecretSource) Content() (cert, key []byte) {
	p := s.pem.Load()
	if p == nil {
		return nil, nil
	}
	return p[0], p[1]
}

// OnChange calls f after each certificate loaded from now on.
func (s *SecretSource) OnChange(f func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.listeners = append(s.listeners, f)
}

// Loaded reports whether a certificate is loaded.
func (s *SecretSource) Loaded() bool { return s.cert.Load() != nil }
