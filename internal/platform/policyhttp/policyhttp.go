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
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
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
// replaces it: unspecified addresses (a connection to 0.0.0.0 or [::]
// reaches the pod itself), loopback, link-local (the cloud metadata
// services' 169.254.169.254 and fd00:ec2::254 among them) and link-local
// multicast, and the metadata and loopback host names with every name
// under them. Whatever the list, an address is checked in every spelling
// (see Client.checkAddr).
var DefaultBlocklist = []string{
	"0.0.0.0/8", "::/128", // unspecified, "this host"
	"127.0.0.0/8", "::1/128", // loopback
	"169.254.0.0/16", "fe80::/10", // link-local, metadata services
	"224.0.0.0/24", "ff02::/16", // link-local multicast
	"fd00:ec2::254/128",        // AWS metadata over IPv6
	"metadata.google.internal", // GCP metadata
	"metadata",                 // short names some clouds resolve
	"localhost",                // and *.localhost (RFC 6761)
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
	block    *Blocklist
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
	c := &Client{timeout: cfg.Timeout, maxBytes: cfg.MaxBytes, namespaced: cfg.AllowNamespacedPolicies, clients: map[string]*http.Client{}}
	if c.timeout <= 0 {
		c.timeout = DefaultTimeout
	}
	if c.maxBytes <= 0 {
		c.maxBytes = DefaultMaxBytes
	}
	var errs []error
	block, err := parseBlocklist(cfg.Blocklist)
	if err != nil {
		errs = append(errs, err)
	}
	c.block = block
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
// address; addresses a name resolves to are checked at the dial. A host
// written as resolvers' inet_aton reads it (2130706433, 0x7f.1,
// 0177.0.0.1) is checked as the address it stands for.
func (c *Client) check(u *url.URL) error {
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("%w: %s: only http and https URLs may be called", ErrBlocked, u.Redacted())
	}
	if err := c.block.checkURL(u); err != nil {
		return err
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

// errNotInetAton: a host that is no address in inet_aton's grammar.
var errNotInetAton = errors.New("not an inet_aton address")

// parseInetAton reads an IPv4 address as inet_aton (and so getaddrinfo)
// does: one to four parts, each decimal, octal (a leading 0) or
// hexadecimal (0x), the last filling the remaining bytes: 2130706433,
// 127.1 and 0x7f.0.0.01 are all 127.0.0.1.
func parseInetAton(host string) (netip.Addr, error) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, errNotInetAton
	}
	var vals [4]uint64
	for i, p := range parts {
		base, digits := 10, p
		switch {
		case len(p) > 1 && (p[:2] == "0x" || p[:2] == "0X"):
			base, digits = 16, p[2:]
		case len(p) > 1 && p[0] == '0':
			base, digits = 8, p[1:]
		}
		if digits == "" || strings.ContainsAny(digits, "+-_") {
			return netip.Addr{}, errNotInetAton
		}
		v, err := strconv.ParseUint(digits, base, 32)
		if err != nil {
			return netip.Addr{}, errNotInetAton
		}
		vals[i] = v
	}
	n := len(parts)
	var ip uint64
	for i := 0; i < n-1; i++ {
		if vals[i] > 0xff {
			return netip.Addr{}, errNotInetAton
		}
		ip |= vals[i] << (24 - 8*i)
	}
	last := vals[n-1]
	if last >= 1<<(8*(5-n)) {
		return netip.Addr{}, errNotInetAton
	}
	ip |= last
	return netip.AddrFrom4([4]byte{byte(ip >> 24), byte(ip >> 16), byte(ip >> 8), byte(ip)}), nil
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

// nat64 are the NAT64 prefixes (RFC 6052's well-known one and RFC 8215's
// local-use one, with the IPv4 address in the last 32 bits), through
// which an IPv6 address reaches an IPv4 one.
var nat64 = []netip.Prefix{netip.MustParsePrefix("64:ff9b::/96"), netip.MustParsePrefix("64:ff9b:1::/48")}

// ipv4Compatible is RFC 4291's deprecated IPv4-compatible IPv6 prefix.
var ipv4Compatible = netip.MustParsePrefix("::/96")

// destinations lists the addresses a connection to a reaches, as the
// blocklist sees them: a without its zone (a zoned address is contained
// in no prefix) and without its IPv4 mapping, the IPv4 address in an
// IPv4-compatible or NAT64 address, and, for an unspecified or "this
// network" address (0.0.0.0/8, ::), the host's loopback, where the
// kernel connects it.
func destinations(a netip.Addr) []netip.Addr {
	a = a.WithZone("").Unmap()
	out := []netip.Addr{a}
	if a.Is6() {
		embedded := ipv4Compatible.Contains(a)
		for _, p := range nat64 {
			embedded = embedded || p.Contains(a)
		}
		if embedded {
			b := a.As16()
			out = append(out, netip.AddrFrom4([4]byte(b[12:16])))
		}
	}
	for _, d := range out {
		if d.IsUnspecified() || (d.Is4() && d.As4()[0] == 0) {
			return append(out, netip.IPv4Unspecified(), netip.IPv6Unspecified(), netip.AddrFrom4([4]byte{127, 0, 0, 1}), netip.IPv6Loopback())
		}
	}
	return out
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
	dialer := c.block.dialer(c.timeout)
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
