package ocitest

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

// Kind says what a registry request asked for.
type Kind string

// The kinds of registry requests the log tells apart.
const (
	KindPing      Kind = "ping"      // GET /v2/
	KindManifest  Kind = "manifest"  // /v2/<repo>/manifests/<tag or digest>
	KindBlob      Kind = "blob"      // /v2/<repo>/blobs/<digest>
	KindUpload    Kind = "upload"    // /v2/<repo>/blobs/uploads/...
	KindTags      Kind = "tags"      // /v2/<repo>/tags/list
	KindReferrers Kind = "referrers" // /v2/<repo>/referrers/<digest>
	KindCatalog   Kind = "catalog"   // /v2/_catalog
	KindOther     Kind = "other"
)

// Request is one request the registry answered, in the log.
type Request struct {
	Method string // GET, HEAD, PUT, ...
	Kind   Kind
	Repo   string // the repository without the host, "" for ping and catalog
	Ref    string // the tag or digest of a manifest, the digest of a blob or referrers call
	Status int    // the status answered
	User   string // the user a WithBasicAuth registry authenticated, "" if none
}

// IsFetch reports whether r read a manifest or a blob (GET or HEAD).
func (r Request) IsFetch() bool {
	return (r.Kind == KindManifest || r.Kind == KindBlob) &&
		(r.Method == http.MethodGet || r.Method == http.MethodHead)
}

// Registry is an OCI registry (go-containerregistry's pkg/registry, the
// distribution API in memory) served on loopback for one test, which
// logs every request and can be made to fail or to go away.
type Registry struct {
	srv   *httptest.Server
	host  string
	ca    *CA // nil: plain HTTP
	trans http.RoundTripper

	mu    sync.Mutex
	log   []Request
	fault func(Request) int
	// user and password are WithBasicAuth's.
	user, password string
}

// RegistryOption changes the registry NewRegistry starts.
type RegistryOption func(*registryConfig)

type registryConfig struct {
	tls            *CA
	referrers      bool
	logf           func(format string, args ...any)
	user, password string
}

// WithBasicAuth makes the registry private: every request without the
// user and password (HTTP Basic) is answered 401 with a Basic challenge,
// as a registry behind a login is. The registry's own helpers (Push,
// Sign, Transport, RemoteOptions) send them; a client under test is given
// them through its own credentials.
func WithBasicAuth(user, password string) RegistryOption {
	return func(c *registryConfig) { c.user, c.password = user, password }
}

// WithTLS serves HTTPS with a certificate for 127.0.0.1 issued by ca
// (NewCA(t) makes one), rather than plain HTTP: a client that does not
// trust ca (Registry.RootsPEM) fails, unless it skips verification, as
// an "insecure registry" setting does.
func WithTLS(ca *CA) RegistryOption {
	return func(c *registryConfig) { c.tls = ca }
}

// WithoutReferrers turns off the OCI 1.1 referrers API, so that clients
// fall back to the referrers tag schema, as with an older registry.
func WithoutReferrers() RegistryOption {
	return func(c *registryConfig) { c.referrers = false }
}

// WithLog writes the registry's own request log through t.Logf (it is
// discarded by default).
func WithLog(t testing.TB) RegistryOption {
	return func(c *registryConfig) { c.logf = t.Logf }
}

// NewRegistry starts a registry on a free loopback port, closed when the
// test ends. Its host is "127.0.0.1:<port>", which go-containerregistry
// reaches over plain HTTP without being told (and over HTTPS WithTLS).
func NewRegistry(t testing.TB, opts ...RegistryOption) *Registry {
	t.Helper()
	cfg := registryConfig{referrers: true}
	for _, o := range opts {
		o(&cfg)
	}
	logger := log.New(io.Discard, "", 0)
	if cfg.logf != nil {
		logger = log.New(logWriter(cfg.logf), "registry: ", 0)
	}
	r := &Registry{ca: cfg.tls, user: cfg.user, password: cfg.password}
	h := registry.New(registry.Logger(logger), registry.WithReferrersSupport(cfg.referrers))
	r.srv = httptest.NewUnstartedServer(r.handler(h))
	r.srv.Config.ErrorLog = logger
	if cfg.tls != nil {
		r.srv.TLS = &tls.Config{
			Certificates: []tls.Certificate{cfg.tls.serverCert(t)},
			MinVersion:   tls.VersionTLS12,
		}
		r.srv.StartTLS()
		r.trans = &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: cfg.tls.RootPool(), MinVersion: tls.VersionTLS12},
		}
	} else {
		r.srv.Start()
		r.trans = &http.Transport{}
	}
	if r.user != "" {
		r.trans = basicAuth{next: r.trans, user: r.user, password: r.password}
	}
	r.host = r.srv.Listener.Addr().String()
	t.Cleanup(r.Close)
	return r
}

// basicAuth sends a WithBasicAuth registry's user and password.
type basicAuth struct {
	next           http.RoundTripper
	user, password string
}

func (b basicAuth) CloseIdleConnections() {
	if t, ok := b.next.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

func (b basicAuth) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.SetBasicAuth(b.user, b.password)
	return b.next.RoundTrip(req)
}

// Host is "127.0.0.1:<port>", the registry part of an image reference.
func (r *Registry) Host() string { return r.host }

// Repo is the full name of repository repo in this registry:
// "127.0.0.1:<port>/<repo>".
func (r *Registry) Repo(repo string) string { return r.host + "/" + repo }

// URL is the registry's base URL, http:// or https://.
func (r *Registry) URL() string { return r.srv.URL }

// RootsPEM is the PEM of the CA that issued the registry's TLS
// certificate; empty for plain HTTP.
func (r *Registry) RootsPEM() string {
	if r.ca == nil {
		return ""
	}
	return r.ca.RootsPEM()
}

// Transport is an HTTP transport that trusts the registry's TLS CA (a
// plain transport for plain HTTP), for clients of this registry.
func (r *Registry) Transport() http.RoundTripper { return r.trans }

// RemoteOptions are the go-containerregistry options that reach this
// registry: its Transport.
func (r *Registry) RemoteOptions() []remote.Option {
	return []remote.Option{remote.WithTransport(r.trans)}
}

// Close stops the registry: from then on every request is refused at
// the TCP level, the "unreachable registry" case. The test's cleanup
// calls it too.
func (r *Registry) Close() {
	r.srv.Close()
	if t, ok := r.trans.(interface{ CloseIdleConnections() }); ok {
		t.CloseIdleConnections()
	}
}

// FailWith answers every later request (the ping included) with status,
// a registry that is up but broken (500, 503) or denies (401, 403,
// 429); FailWith(0) ends it. go-containerregistry retries 408, 429 and
// 5xx answers with a backoff of seconds unless its client is given
// remote.WithRetryBackoff(remote.Backoff{Steps: 1}).
func (r *Registry) FailWith(status int) {
	if status == 0 {
		r.FailWhere(nil, 0)
		return
	}
	r.FailWhere(func(Request) bool { return true }, status)
}

// FailWhere answers the later requests that match with status (match
// sees Method, Kind, Repo and Ref); a nil match ends the failures.
func (r *Registry) FailWhere(match func(Request) bool, status int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if match == nil {
		r.fault = nil
		return
	}
	r.fault = func(req Request) int {
		if match(req) {
			return status
		}
		return 0
	}
}

// Requests is a copy of the log of requests answered so far, in order.
func (r *Registry) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.log)
}

// ResetLog empties the request log, so that a test counts only the
// requests made after its set-up (pushing and signing).
func (r *Registry) ResetLog() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = nil
}

// Count is the number of logged requests that match.
func (r *Registry) Count(match func(Request) bool) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, req := range r.log {
		if match(req) {
			n++
		}
	}
	return n
}

// ManifestFetches counts the GETs and HEADs of the manifest ref (a tag,
// such as a signature's "sha256-<hex>.sig", or a digest) in repo.
func (r *Registry) ManifestFetches(repo, ref string) int {
	return r.Count(func(req Request) bool {
		return req.IsFetch() && req.Kind == KindManifest && req.Repo == repo && req.Ref == ref
	})
}

// BlobFetches counts the GETs and HEADs of the blob digest in repo.
func (r *Registry) BlobFetches(repo, digest string) int {
	return r.Count(func(req Request) bool {
		return req.IsFetch() && req.Kind == KindBlob && req.Repo == repo && req.Ref == digest
	})
}

// Fetches counts every manifest and blob GET and HEAD in repo.
func (r *Registry) Fetches(repo string) int {
	return r.Count(func(req Request) bool { return req.IsFetch() && req.Repo == repo })
}

func (r *Registry) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, hr *http.Request) {
		req := classify(hr)
		if r.user != "" {
			user, password, ok := hr.BasicAuth()
			if !ok || user != r.user || password != r.password {
				req.Status = http.StatusUnauthorized
				r.record(req)
				w.Header().Set("WWW-Authenticate", `Basic realm="ocitest"`)
				http.Error(w, `{"errors":[{"code":"UNAUTHORIZED","message":"authentication required"}]}`, http.StatusUnauthorized)
				return
			}
			req.User = user
		}
		r.mu.Lock()
		fault := r.fault
		r.mu.Unlock()
		if fault != nil {
			if status := fault(req); status != 0 {
				req.Status = status
				r.record(req)
				http.Error(w, http.StatusText(status), status)
				return
			}
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, hr)
		req.Status = sw.status
		r.record(req)
	})
}

func (r *Registry) record(req Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.log = append(r.log, req)
}

// classify reads the distribution API path of hr.
func classify(hr *http.Request) Request {
	req := Request{Method: hr.Method, Kind: KindOther}
	path := strings.TrimSuffix(hr.URL.Path, "/")
	switch {
	case path == "/v2":
		req.Kind = KindPing
		return req
	case path == "/v2/_catalog":
		req.Kind = KindCatalog
		return req
	case !strings.HasPrefix(path, "/v2/"):
		return req
	}
	rest := strings.TrimPrefix(path, "/v2/")
	if i := strings.Index(rest, "/blobs/uploads"); i >= 0 {
		req.Kind, req.Repo = KindUpload, rest[:i]
		return req
	}
	if repo, ok := strings.CutSuffix(rest, "/tags/list"); ok {
		req.Kind, req.Repo = KindTags, repo
		return req
	}
	for _, p := range []struct {
		kind Kind
		seg  string
	}{{KindManifest, "/manifests/"}, {KindBlob, "/blobs/"}, {KindReferrers, "/referrers/"}} {
		if i := strings.LastIndex(rest, p.seg); i >= 0 {
			req.Kind, req.Repo, req.Ref = p.kind, rest[:i], rest[i+len(p.seg):]
			return req
		}
	}
	return req
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(status int) {
	w.status = status
	w.ResponseWriter.WriteHeader(status)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

type logWriter func(format string, args ...any)

func (f logWriter) Write(p []byte) (int, error) {
	f("%s", strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}

// ref parses s, a reference into this registry; it fails t otherwise.
func (r *Registry) ref(t testing.TB, s string) name.Reference {
	t.Helper()
	ref, err := name.ParseReference(s)
	if err != nil {
		t.Fatalf("ocitest: reference %q: %v", s, err)
	}
	return ref
}
