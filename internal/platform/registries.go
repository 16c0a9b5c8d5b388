package platform

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/policyhttp"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/imageverify"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// Registries is how the services reach the registries that verifyImages
// entries name: through the same kind of blocklist as policies' HTTP
// calls (a policy names the registry, so a policy author must not make
// Verdict call loopback, link-local or metadata addresses), with the
// system's roots and an operator's, and a bound on the verifications
// under way at once.
type Registries struct {
	// Blocklist holds CIDRs, addresses and host names no registry call
	// may reach; nil means policyhttp.DefaultBlocklist, an empty list
	// blocks nothing (a registry on the node's loopback, in a test).
	Blocklist []string
	// CAFile is a PEM bundle of roots trusted besides the system's (a
	// registry with a private CA).
	CAFile string
	// SigstoreTrustedRoot is a Sigstore trusted root (trusted_root.json)
	// for the checks that need the public instance's keys: keyless
	// without roots, the transparency log without rekor.pubkey, SCTs.
	SigstoreTrustedRoot string
	// MaxConcurrent bounds the image verifications under way at once.
	MaxConcurrent int
	// DialTimeout bounds a connection and its TLS handshake; the request's
	// deadline bounds the whole verification.
	DialTimeout time.Duration
	// CacheTTL is how long a replica keeps a successful verification
	// (0: none kept).
	CacheTTL time.Duration
	// CacheEntries bounds the verifications a replica keeps.
	CacheEntries int
	// SharedCacheBytes bounds the JetStream bucket of verifications the
	// replicas share (bus.BucketImageVerifications).
	SharedCacheBytes int64
	// MaxResponseBytes bounds what registries may answer one
	// verification with (0: imageverify.DefaultMaxResponseBytes).
	MaxResponseBytes int64
	// CredentialSecrets are the Secrets of Verdict's namespace that
	// cluster policies may name for image verification (pull Secrets in
	// imageRegistryCredentials, keys in keys.secret); no other Secret of
	// that namespace is read (Credentials).
	CredentialSecrets []string
	// NamespaceCredentials lets namespaced Policies use the image pull
	// Secrets of their namespace, cluster policies those of any
	// namespace (namespace/name), and verifications the Pod's
	// imagePullSecrets: it needs the right to read Secrets in every
	// namespace (the chart's imageRegistries.namespaceCredentials).
	NamespaceCredentials bool
}

// SharedCache is the cache of verifications the replicas share, on the
// connection conn returns, with r's TTL: nil when r keeps none.
func (r Registries) SharedCache(conn func() *queue.Conn, replicas int) imageverify.Cache {
	if r.CacheTTL <= 0 {
		return nil
	}
	return bus.NewImageCache(conn, r.CacheTTL, replicas, r.SharedCacheBytes)
}

// DefaultRegistries are the defaults of the flags.
func DefaultRegistries() Registries {
	return Registries{MaxConcurrent: 8, DialTimeout: 5 * time.Second, CacheTTL: time.Hour, CacheEntries: 10000, SharedCacheBytes: 64 << 20,
		MaxResponseBytes: imageverify.DefaultMaxResponseBytes}
}

// BindRegistryFlags binds --registry-blocklist, --registry-ca-file,
// --sigstore-trusted-root,
// --registry-dial-timeout, --image-verify-max-concurrent and the cache's
// flags; the values in r are the defaults.
func BindRegistryFlags(fs *flag.FlagSet, r *Registries) {
	ListFlag(fs, "registry-blocklist", "CIDRs, addresses and host names no image registry call may reach, replacing the default: "+strings.Join(policyhttp.DefaultBlocklist, ",")+" (repeatable, or comma-separated; empty: block nothing)",
		func() { r.Blocklist = []string{} }, func(s string) error {
			r.Blocklist = append(r.Blocklist, s)
			return nil
		})
	fs.StringVar(&r.CAFile, "registry-ca-file", r.CAFile, "PEM bundle of CA certificates trusted for image registries, besides the system's")
	fs.StringVar(&r.SigstoreTrustedRoot, "sigstore-trusted-root", r.SigstoreTrustedRoot, "Sigstore trusted root (trusted_root.json, as a TUF client writes it) whose Fulcio CAs, Rekor logs and CT logs verify keyless signatures without roots, transparency log entries without rekor.pubkey and SCTs, offline; without it those checks are unsupported")
	fs.IntVar(&r.MaxConcurrent, "image-verify-max-concurrent", r.MaxConcurrent, "image verifications (registry pulls of manifests and signatures) under way at once")
	fs.DurationVar(&r.DialTimeout, "registry-dial-timeout", r.DialTimeout, "upper bound of a connection to a registry and its TLS handshake")
	fs.DurationVar(&r.CacheTTL, "image-verify-cache-ttl", r.CacheTTL, "how long a successful image verification is kept (for entries with useCache, the default); 0: none kept")
	fs.IntVar(&r.CacheEntries, "image-verify-cache-entries", r.CacheEntries, "successful image verifications one replica keeps in memory")
	BytesVar(fs, &r.SharedCacheBytes, "image-verify-shared-cache-bytes", "size of the JetStream bucket of image verifications the replicas share (a quantity: 64Mi)")
	BytesVar(fs, &r.MaxResponseBytes, "image-verify-max-response-bytes", "bytes the registries may answer one image verification with, signatures and attestations included (a quantity: 32Mi); more is an error")
	ListFlag(fs, "registry-credential-secrets", "Secrets of Verdict's namespace that cluster policies may name for image verification: pull Secrets in imageRegistryCredentials, keys in keys.secret (repeatable, or comma-separated); no other Secret there is read",
		func() { r.CredentialSecrets = []string{} }, func(s string) error {
			r.CredentialSecrets = append(r.CredentialSecrets, s)
			return nil
		})
	fs.BoolVar(&r.NamespaceCredentials, "registry-namespace-credentials", r.NamespaceCredentials, "read registry credentials and keys outside Verdict's namespace: a namespaced Policy's imageRegistryCredentials and keys.secret in its namespace, and the Pod's imagePullSecrets (needs the right to get Secrets in every namespace)")
}

// Verifier builds the image verifier r describes, its passes kept in
// memory for CacheTTL, in front of shared when not nil (the cache every
// replica shares, bus.ImageCache), its metrics (verdict_image_*,
// verdict_registry_request_duration_seconds) registered on reg when not
// nil, reading each request's registry credentials from creds when not
// nil (Credentials). An invalid configuration is an error wrapping
// ErrInvalidConfig.
func (r Registries) Verifier(reg prometheus.Registerer, shared imageverify.Cache, creds imageverify.Credentials) (*imageverify.Verifier, error) {
	block, err := policyhttp.NewBlocklist(r.Blocklist)
	if err != nil {
		return nil, fmt.Errorf("%w: registries: %w", ErrInvalidConfig, err)
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if r.CAFile != "" {
		pem, err := os.ReadFile(r.CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: --registry-ca-file: %w", ErrInvalidConfig, err)
		}
		pool, err := x509.SystemCertPool()
		if err != nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: --registry-ca-file %s: no PEM certificate", ErrInvalidConfig, r.CAFile)
		}
		tlsConfig.RootCAs = pool
	}
	dial := r.DialTimeout
	if dial <= 0 {
		dial = DefaultRegistries().DialTimeout
	}
	maxConc := r.MaxConcurrent
	if maxConc <= 0 {
		maxConc = DefaultRegistries().MaxConcurrent
	}
	transport := block.Transport(tlsConfig, dial)
	opts := []imageverify.Option{imageverify.WithMaxConcurrent(maxConc)}
	if r.SigstoreTrustedRoot != "" {
		tm, err := imageverify.LoadTrustedRoot(r.SigstoreTrustedRoot)
		if err != nil {
			return nil, fmt.Errorf("%w: --sigstore-trusted-root: %w", ErrInvalidConfig, err)
		}
		opts = append(opts, imageverify.WithTrustedRoot(tm))
	}
	if reg != nil {
		m, err := newImageMetrics(reg)
		if err != nil {
			return nil, err
		}
		transport = m.transport(transport)
		opts = append(opts, imageverify.WithObserver(m))
	}
	opts = append(opts, imageverify.WithTransport(transport))
	if r.MaxResponseBytes > 0 {
		opts = append(opts, imageverify.WithMaxResponseBytes(r.MaxResponseBytes))
	}
	if creds != nil {
		opts = append(opts, imageverify.WithCredentials(creds))
	}
	if r.CacheTTL > 0 {
		var cache imageverify.Cache = imageverify.NewMemoryCache(r.CacheTTL, r.CacheEntries)
		if shared != nil {
			cache = imageverify.Layered(cache, shared)
		}
		opts = append(opts, imageverify.WithCache(cache))
	}
	v, err := imageverify.New(opts...)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return v, nil
}

// engineOption is the verifier as an engine option.
func (r Registries) engineOption(reg prometheus.Registerer, shared imageverify.Cache, creds imageverify.Credentials) (engine.Option, error) {
	v, err := r.Verifier(reg, shared, creds)
	if err != nil {
		return nil, err
	}
	return engine.WithImageVerifier(v), nil
}
