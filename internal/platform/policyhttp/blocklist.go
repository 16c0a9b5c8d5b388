package policyhttp

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"syscall"
	"time"
)

// Blocklist is the set of addresses and host names a policy may not make
// Verdict connect to: policies' HTTP calls (Client) and the registries
// their verifyImages entries name (Transport). Addresses are checked
// where the connection is made, after name resolution, in every spelling
// (see destinations).
type Blocklist struct {
	nets  []netip.Prefix
	hosts map[string]bool
}

// NewBlocklist parses CIDRs, addresses and host names (a host name blocks
// every name under it too); nil means DefaultBlocklist, an empty non-nil
// list blocks nothing. An invalid entry is an error wrapping
// ErrInvalidConfig.
func NewBlocklist(entries []string) (*Blocklist, error) {
	b, err := parseBlocklist(entries)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return b, nil
}

func parseBlocklist(entries []string) (*Blocklist, error) {
	if entries == nil {
		entries = DefaultBlocklist
	}
	b := &Blocklist{hosts: map[string]bool{}}
	var errs []error
	for _, e := range entries {
		e = strings.TrimSpace(e)
		switch {
		case e == "":
		case strings.Contains(e, "/"):
			p, err := netip.ParsePrefix(e)
			if err != nil {
				errs = append(errs, fmt.Errorf("blocklist entry %q: %w", e, err))
				continue
			}
			b.nets = append(b.nets, p.Masked())
		default:
			if a, err := netip.ParseAddr(e); err == nil {
				b.nets = append(b.nets, netip.PrefixFrom(a, a.BitLen()))
				continue
			}
			b.hosts[strings.ToLower(strings.TrimSuffix(e, "."))] = true
		}
	}
	if len(errs) > 0 {
		return b, errors.Join(errs...)
	}
	return b, nil
}

// checkURL refuses a URL naming a blocked host or address; the addresses
// a name resolves to are checked at the dial. A host written as
// resolvers' inet_aton reads it (2130706433, 0x7f.1, 0177.0.0.1) is
// checked as the address it stands for.
func (b *Blocklist) checkURL(u *url.URL) error {
	host := strings.ToLower(strings.TrimSuffix(u.Hostname(), "."))
	if blocked, ok := b.blockedHost(host); ok {
		return fmt.Errorf("%w: %s: host %s is on the blocklist (as %s)", ErrBlocked, u.Redacted(), host, blocked)
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		a, err = parseInetAton(host)
	}
	if err == nil {
		if err := b.checkAddr(a); err != nil {
			return fmt.Errorf("%s: %w", u.Redacted(), err)
		}
	}
	return nil
}

// blockedHost returns the blocklist's host name that host is or is
// under.
func (b *Blocklist) blockedHost(host string) (string, bool) {
	for name := host; name != ""; {
		if b.hosts[name] {
			return name, true
		}
		_, rest, ok := strings.Cut(name, ".")
		if !ok {
			break
		}
		name = rest
	}
	return "", false
}

// checkAddr refuses an address any of whose destinations is on the
// blocklist.
func (b *Blocklist) checkAddr(a netip.Addr) error {
	for _, d := range destinations(a) {
		for _, p := range b.nets {
			if p.Contains(d) {
				if d == a {
					return fmt.Errorf("%w: address %s is in %s, on the blocklist", ErrBlocked, a, p)
				}
				return fmt.Errorf("%w: address %s reaches %s, in %s, on the blocklist", ErrBlocked, a, d, p)
			}
		}
	}
	return nil
}

// dialer connects with the resolved address checked just before the
// connection is made.
func (b *Blocklist) dialer(timeout time.Duration) *net.Dialer {
	return &net.Dialer{
		Timeout: timeout,
		Control: func(_, address string, _ syscall.RawConn) error {
			ap, err := netip.ParseAddrPort(address)
			if err != nil {
				return fmt.Errorf("%w: cannot check address %q", ErrBlocked, address)
			}
			return b.checkAddr(ap.Addr())
		},
	}
}

// Transport is an HTTP transport that refuses, before any request is
// sent, a URL naming a blocked host or address, and connects only to
// addresses the blocklist allows: for the registry calls of image
// verification. tlsConfig may be nil (the system roots). No proxy: the
// address checked must be the one called.
func (b *Blocklist) Transport(tlsConfig *tls.Config, dialTimeout time.Duration) http.RoundTripper {
	if tlsConfig == nil {
		tlsConfig = &tls.Config{MinVersion: tls.VersionTLS12}
	}
	d := b.dialer(dialTimeout)
	return &blockingTransport{block: b, next: &http.Transport{
		Proxy: nil,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			return d.DialContext(ctx, network, addr)
		},
		TLSClientConfig:     tlsConfig,
		TLSHandshakeTimeout: dialTimeout,
		MaxIdleConnsPerHost: 4,
		IdleConnTimeout:     90 * time.Second,
		ForceAttemptHTTP2:   true,
	}}
}

type blockingTransport struct {
	block *Blocklist
	next  http.RoundTripper
}

func (t *blockingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.block.checkURL(req.URL); err != nil {
		return nil, err
	}
	return t.next.RoundTrip(req)
}
