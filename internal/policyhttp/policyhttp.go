// Package policyhttp is the HTTP client through which policies call
// services from inside the cluster (CEL's http.Get and http.Post, apiCall
// context entries with a service): off unless an operator turns it on,
// and then bounded and kept away from what a policy author must not reach
// through Verdict's network position (SSRF): loopback, link-local
// addresses (the cloud metadata services among them) and the metadata
// host names, by default. An operator may replace that blocklist and
// restrict calls to URL prefixes.
//
// Addresses are checked where the connection is made, after name
// resolution, so that a name resolving to a blocked address (or
// re-resolving to one later) is refused too; redirects are checked as
// the first request is.
package policyhttp

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// ErrDisabled is returned by a nil Client: policies' HTTP calls are off.
var ErrDisabled = errors.New("policies' HTTP calls are disabled in this service (enable them with --policy-http)")

// ErrBlocked wraps the refusal of a call to a blocked address or host, or
// to a URL outside the allowlist.
var ErrBlocked = errors.New("blocked")

// ErrNamespacedPolicy is returned for a call a namespaced policy makes
// while Config.AllowNamespacedPolicies is off: a namespace's tenants
// would otherwise reach what the cluster's services can.
var ErrNamespacedPolicy = errors.New("namespaced policies may not call services over HTTP (enable with --policy-http-namespaced)")

// ErrInvalidConfig wraps every error of an invalid Config.
var ErrInvalidConfig = errors.New("invalid policy HTTP configuration")

// DefaultBlocklist is what policies may not call unless an operator
// replaces it: loopback, link-local (the cloud metadata services'
// 169.254.169.254 and fd00:ec2::254 among them) and the metadata host
// names.
var DefaultBlocklist = []string{
	"127.0.0.0/8", "::1/128", // loopback
	"169.254.0.0/16", "fe80::/10", // link-local, metadata services
	"fd00:ec2::254/128",        // AWS metadata over IPv6
	"metadata.google.internal", // GCP metadata
	"metadata",                 // short names some clouds resolve
	"localhost",
}

// Defaults of a Config's bounds.
const (
	DefaultTimeout  = 3 * time.Second
	DefaultMaxBytes = 2 << 20
)

// Config is how policies' HTTP calls are made.
type Config struct {
	// Enabled turns the calls on; off, every call is ErrDisabled.
	Enabled bool
	// Blocklist holds CIDRs and host names that may not be called; nil
	// means DefaultBlocklist. Give an empty, non-nil list to block
	// nothing.
	Blocklist []string
	// Allowlist holds URL prefixes (scheme://host[:port][/path]); when
	// set, only URLs under one of them may be called.
	Allowlist []string
	// Timeout bounds each call, within the evaluation's deadline.
	Timeout time.Duration
	// MaxBytes bounds a response's body.
	MaxBytes int64
	// AllowNamespacedPolicies lets namespaced policies (Policy and the
	// Namespaced CEL kinds, written by a namespace's users) call too.
	AllowNamespacedPolicies bool
}

// Client makes policies' HTTP calls. A nil *Client refuses every call
// with ErrDisabled. It is safe for concurrent use.
type Client struct {
	nets     []netip.Prefix
	hosts    map[string]bool
	allow    []*url.URL
	timeout  time.Duration
	maxBytes int64
	// namespaced lets namespaced policies call.
	namespaced bool

	mu sync.Mutex
	// clients by CA bundle ("" for the system roots), each with its own
	// transport, so connections are reused across calls.
	clients map[string]*http.Client
}

// New returns the Client cfg describes, nil when it is not enabled.
func New(cfg Config) (*Client, error) {
	if !cfg.Enabled {
		return nil, nil
	}
	c := &Client{hosts: map[string]bool{}, timeout: cfg.Timeout, maxBytes: cfg.MaxBytes, namespaced: cfg.AllowNamespacedPolicies, clients: map[string]*http.Client{}}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxBytes <= 0 {
		c.maxBytes = DefaultMaxBytes
	}
	block := cfg.Blocklist
	if block == nil {
		block = DefaultBlocklist
	}
	var errs []error
	for _, b := range block {
		b = strings.TrimSpace(b)
		switch {
		case b == "":
		case strings.Contains(b, "/"):
			p, err := netip.ParsePrefix(b)
			if err != nil {
				errs = append(errs, fmt.Errorf("blocklist entry %q: %w", b, err))
				continue
			}
			c.nets = append(c.nets, p.Masked())
		default:
			if a, err := netip.ParseAddr(b); err == nil {
				c.nets = append(c.nets, netip.PrefixFrom(a, a.BitLen()))
				continue
			}
			c.hosts[strings.ToLower(strings.TrimSuffix(b, "."))] = true
		}
	}
	for _, a := range cfg.Allowlist {
		u, err := url.Parse(strings.TrimSpace(a))
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("allowlist entry %q: not an http(s)://host[/path] prefix", a))
			continue
		}
		c.allow = append(c.allow, u)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, errors.Join(errs...))
	}
	return c, nil
}

// check refuses a URL outside the allowlist or naming a blocked host or
// address; addresses a name resolves to are checked at the dial.
func (c *Client) check(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: %s: only http and https URLs may be called", ErrBlocked, u.Redacted())
	}
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if c.hosts[host] {
		return fmt.Errorf("%w: %s: host %s is on the blocklist", ErrBlocked, u.Redacted(), host)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		if err := c.checkAddr(a); err != nil {
			return fmt.Errorf("%s: %w", u.Redacted(), err)
		}
	}
	if len(c.allow) == 0 {
		return nil
	}
	for _, p := range c.allow {
		if under(u, p) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s is under no allowed URL prefix", ErrBlocked, u.Redacted())
}

// under reports whether u is p or below it: same scheme and host (and
// port), and a path under p's, by whole segments.
func under(u, p *url.URL) bool {
	if !strings.EqualFold(u.Scheme, p.Scheme) || !strings.EqualFold(u.Host, p.Host) {
		return false
	}
	prefix := strings.TrimSuffix(p.EscapedPath(), "/")
	path := u.EscapedPath()
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

func (c *Client) checkAddr(a netip.Addr) error {
	a = a.Unmap()
	for _, p := range c.nets {
		if p.Contains(a) {
			return fmt.Errorf("%w: address %s is in %s, on the blocklist", ErrBlocked, a, p)
		}
	}
	return nil
}

// client is the http.Client for a CA bundle.
func (c *Client) client(caBundle string) (*http.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if hc, ok := c.clients[caBundle]; ok {
		return hc, nil
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if caBundle != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(caBundle)) {
			return nil, errors.New("caBundle holds no PEM certificate")
		}
		tlsConfig.RootCAs = pool
	}
	dialer := &net.Dialer{
		Timeout: c.timeout,
		// The address is checked once resolved, just before connecting.
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: cannot check address %q", ErrBlocked, address)
			}
			return c.checkAddr(ap.Addr())
		},
	}
	hc := &http.Client{
		Transport: &http.Transport{
			// No proxy: the address checked must be the one called.
			Proxy:               nil,
			DialContext:         dialer.DialContext,
			TLSClientConfig:     tlsConfig,
			TLSHandshakeTimeout: c.timeout,
			MaxIdleConnsPerHost: 4,
			IdleConnTimeout:     90 * time.Second,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= 5 {
				return errors.New("stopped after 5 redirects")
			}
			return c.check(req.URL)
		},
	}
	if len(c.clients) >= 64 {
		// Bundles are policy text: keep their clients bounded.
		for k := range c.clients {
			delete(c.clients, k)
			break
		}
	}
	c.clients[caBundle] = hc
	return hc, nil
}

// Do makes one call: method GET or POST, body sent as JSON for a POST.
// It returns the body of a 2xx response; any other status is an error
// naming it, a body above the limit an error too. A call from a
// namespaced policy's evaluation (engine.CallerNamespace) is refused
// unless namespaced policies are allowed.
func (c *Client) Do(ctx context.Context, method, rawURL, caBundle string, body []byte, headers map[string]string) ([]byte, error) {
	if c == nil {
		return nil, ErrDisabled
	}
	if ns := engine.CallerNamespace(ctx); ns != "" && !c.namespaced {
		return nil, fmt.Errorf("policy in namespace %s: %w", ns, ErrNamespacedPolicy)
	}
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("url %q: %w", rawURL, err)
	}
	if err := c.check(u); err != nil {
		return nil, err
	}
	hc, err := c.client(caBundle)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(io.LimitReader(resp.Body, c.maxBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s %s: reading the response: %w", method, u.Redacted(), err)
	}
	if int64(len(b)) > c.maxBytes {
		return nil, fmt.Errorf("%s %s: response larger than %d bytes", method, u.Redacted(), c.maxBytes)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, fmt.Errorf("%s %s: status %d", method, u.Redacted(), resp.StatusCode)
	}
	return b, nil
}
