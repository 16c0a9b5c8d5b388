package jmespath

import (
	"context"
	"net"
	"net/url"

	"github.com/jmespath-community/go-jmespath/pkg/functions"
)

// internalIP reports whether ip cannot be reached from outside the host or
// its private network: loopback, private (RFC 1918, RFC 4193), link-local
// (including the 169.254.169.254 cloud metadata address) and unspecified.
func internalIP(ip net.IP) bool {
	return ip.IsLoopback() || ip.IsPrivate() || ip.IsLinkLocalUnicast() ||
		ip.IsLinkLocalMulticast() || ip.IsInterfaceLocalMulticast() || ip.IsUnspecified()
}

// is_external_url(url string) boolean: false when the URL's host is an
// internal IP address or a name that resolves to at least one; true
// otherwise. A URL without a host, or a name that does not resolve within
// the lookup timeout, is an error.
func jpIsExternalURL(o *options) functions.JpFunction {
	return func(a []any) (any, error) {
		const name = "is_external_url"
		s, err := stringArg(name, a, 0)
		if err != nil {
			return nil, err
		}
		u, err := url.Parse(s)
		if err != nil {
			return nil, fnWrap(name, err)
		}
		host := u.Hostname()
		if host == "" {
			return nil, fnErrorf(name, "url %q has no host", s)
		}
		if ip := net.ParseIP(host); ip != nil {
			return !internalIP(ip), nil
		}
		ctx, cancel := context.WithTimeout(context.Background(), o.lookupTimeout) //nolint:contextcheck // a JMESPath function has no caller context; the lookup has its own deadline
		defer cancel()
		addrs, err := o.resolver.LookupIPAddr(ctx, host)
		if err != nil {
			return nil, fnWrap(name, err)
		}
		if len(addrs) == 0 {
			return nil, fnErrorf(name, "host %q resolves to no address", host)
		}
		for _, addr := range addrs {
			if internalIP(addr.IP) {
				return false, nil
			}
		}
		return true, nil
	}
}
