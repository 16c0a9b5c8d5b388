package policyhttp_test

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/platform/policyhttp"
)

func newClient(t *testing.T, cfg policyhttp.Config) *policyhttp.Client {
	t.Helper()
	cfg.Enabled = true
	c, err := policyhttp.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// echo answers JSON describing the request, redirects /redirect?to=URL,
// and answers /big with more than a kilobyte and /missing with 404.
func echo(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/redirect":
			http.Redirect(w, r, r.URL.Query().Get("to"), http.StatusFound)
		case "/big":
			_, _ = io.WriteString(w, `"`+strings.Repeat("x", 2000)+`"`)
		case "/missing":
			http.NotFound(w, r)
		default:
			b, _ := io.ReadAll(r.Body)
			_, _ = fmt.Fprintf(w, `{"method": %q, "path": %q, "token": %q, "body": %q}`, r.Method, r.URL.Path, r.Header.Get("Authorization"), b)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestDisabled: without an operator's say-so, no call is made.
func TestDisabled(t *testing.T) {
	c, err := policyhttp.New(policyhttp.Config{})
	if err != nil || c != nil {
		t.Fatalf("New(disabled) = %v, %v", c, err)
	}
	if _, err := c.Do(t.Context(), "GET", "https://example.com", "", nil, nil); !errors.Is(err, policyhttp.ErrDisabled) {
		t.Fatalf("a call through the disabled client: %v", err)
	}
}

// TestDefaultBlocklist: by default loopback, link-local and the metadata
// services are refused, by address or by a name resolving to one, before
// any byte is sent.
func TestDefaultBlocklist(t *testing.T) {
	srv := echo(t)
	c := newClient(t, policyhttp.Config{})
	port := srv.URL[strings.LastIndexByte(srv.URL, ':'):]
	for _, u := range []string{
		srv.URL + "/x",                   // 127.0.0.1
		"http://[::1]" + port + "/x",     // IPv6 loopback
		"http://localhost" + port + "/x", // a name on the list
		"http://169.254.169.254/latest/meta-data/",
		"http://[fd00:ec2::254]/latest/meta-data/",
		"http://metadata.google.internal/computeMetadata/v1/",
		"http://[::ffff:127.0.0.1]" + port + "/x", // loopback mapped into IPv6
		"file:///etc/passwd",
	} {
		if _, err := c.Do(t.Context(), "GET", u, "", nil, nil); !errors.Is(err, policyhttp.ErrBlocked) {
			t.Errorf("GET %s: %v, want a refusal", u, err)
		}
	}
}

// TestResolvedAddressChecked: a name that is not on the list but resolves
// to a blocked address is refused where the connection is made.
func TestResolvedAddressChecked(t *testing.T) {
	srv := echo(t)
	c := newClient(t, policyhttp.Config{Blocklist: []string{"127.0.0.0/8", "::1/128"}})
	port := srv.URL[strings.LastIndexByte(srv.URL, ':'):]
	if _, err := c.Do(t.Context(), "GET", "http://localhost"+port+"/x", "", nil, nil); !errors.Is(err, policyhttp.ErrBlocked) {
		t.Fatalf("a name resolving to loopback: %v", err)
	}
}

// TestCalls: with loopback allowed (a test server), GET and POST reach
// the server with their headers and body; a redirect to a blocked
// address, a response above the limit and a non-2xx status are errors.
func TestCalls(t *testing.T) {
	srv := echo(t)
	c := newClient(t, policyhttp.Config{Blocklist: []string{"169.254.0.0/16"}, MaxBytes: 1024})
	b, err := c.Do(t.Context(), "POST", srv.URL+"/check", "", []byte(`{"a":1}`), map[string]string{"Authorization": "Bearer t"})
	if err != nil || string(b) != `{"method": "POST", "path": "/check", "token": "Bearer t", "body": "{\"a\":1}"}` {
		t.Fatalf("POST: %s, %v", b, err)
	}
	if _, err := c.Do(t.Context(), "GET", srv.URL+"/redirect?to=http://169.254.169.254/", "", nil, nil); !errors.Is(err, policyhttp.ErrBlocked) {
		t.Errorf("a redirect to the metadata service: %v", err)
	}
	if _, err := c.Do(t.Context(), "GET", srv.URL+"/big", "", nil, nil); err == nil || !strings.Contains(err.Error(), "larger than 1024 bytes") {
		t.Errorf("a response above the limit: %v", err)
	}
	if _, err := c.Do(t.Context(), "GET", srv.URL+"/missing", "", nil, nil); err == nil || !strings.Contains(err.Error(), "status 404") {
		t.Errorf("a 404: %v", err)
	}
}

// TestAllowlist: with an allowlist, only URLs under one of its prefixes
// (by whole path segments) are called, redirects included.
func TestAllowlist(t *testing.T) {
	srv := echo(t)
	c := newClient(t, policyhttp.Config{Blocklist: []string{}, Allowlist: []string{srv.URL + "/api", srv.URL + "/redirect"}})
	for u, allowed := range map[string]bool{
		srv.URL + "/api":          true,
		srv.URL + "/api/v1/check": true,
		srv.URL + "/apiary":       false,
		srv.URL + "/other":        false,
		strings.Replace(srv.URL, "http:", "https:", 1) + "/api": false,
		srv.URL + "/redirect?to=" + srv.URL + "/api/x":          true,
		srv.URL + "/redirect?to=" + srv.URL + "/other":          false,
	} {
		_, err := c.Do(t.Context(), "GET", u, "", nil, nil)
		if allowed && err != nil {
			t.Errorf("GET %s: %v", u, err)
		}
		if !allowed && !errors.Is(err, policyhttp.ErrBlocked) {
			t.Errorf("GET %s: %v, want a refusal", u, err)
		}
	}
}

// TestInvalidConfig: entries that are neither CIDRs, addresses nor host
// names, and allowlist entries that are not http(s) prefixes, are refused
// at start.
func TestInvalidConfig(t *testing.T) {
	for _, cfg := range []policyhttp.Config{
		{Enabled: true, Blocklist: []string{"10.0.0.0/33"}},
		{Enabled: true, Allowlist: []string{"example.com"}},
		{Enabled: true, Allowlist: []string{"ftp://example.com"}},
	} {
		if _, err := policyhttp.New(cfg); !errors.Is(err, policyhttp.ErrInvalidConfig) {
			t.Errorf("%+v: %v", cfg, err)
		}
	}
}

// TestEverySpellingOfTheBlockedClasses: unspecified, loopback and
// link-local addresses are refused by the default blocklist whatever
// their spelling: IPv4-mapped, IPv4-compatible and NAT64 IPv6, the
// decimal, octal, hex and short forms that resolvers accept (inet_aton),
// zones, and names under localhost. 0.0.0.0 and [::] connect to the
// pod's own loopback, as the test server shows. Public addresses in the
// same spellings, and names that only begin like a blocked one, are not
// refused (their calls fail for want of a network, not by the list).
func TestEverySpellingOfTheBlockedClasses(t *testing.T) {
	srv := echo(t)
	c := newClient(t, policyhttp.Config{Timeout: 300 * time.Millisecond})
	port := srv.URL[strings.LastIndexByte(srv.URL, ':'):]
	for name, tc := range map[string]struct {
		host    string
		allowed bool
	}{
		"unspecified IPv4":          {host: "0.0.0.0"},
		"unspecified IPv4, short":   {host: "0"},
		"this network":              {host: "0.1.2.3"},
		"unspecified IPv6":          {host: "[::]"},
		"unspecified IPv4-mapped":   {host: "[::ffff:0.0.0.0]"},
		"unspecified NAT64":         {host: "[64:ff9b::]"},
		"loopback decimal":          {host: "2130706433"},
		"loopback hex":              {host: "0x7f000001"},
		"loopback octal":            {host: "0177.0.0.1"},
		"loopback short":            {host: "127.1"},
		"loopback dotted hex":       {host: "0x7f.0x0.0x0.0x1"},
		"loopback IPv4-mapped hex":  {host: "[::ffff:7f00:1]"},
		"loopback IPv4-compatible":  {host: "[::127.0.0.1]"},
		"loopback NAT64":            {host: "[64:ff9b::127.0.0.1]"},
		"loopback NAT64 hex":        {host: "[64:ff9b::7f00:1]"},
		"loopback local-use NAT64":  {host: "[64:ff9b:1::7f00:1]"},
		"loopback with a zone":      {host: "[::1%25lo]"},
		"localhost with a dot":      {host: "localhost."},
		"localhost in capitals":     {host: "LOCALHOST"},
		"a name under localhost":    {host: "api.localhost"},
		"link-local with a zone":    {host: "[fe80::1%25lo]"},
		"link-local IPv4-mapped":    {host: "[::ffff:169.254.169.254]"},
		"link-local NAT64":          {host: "[64:ff9b::a9fe:a9fe]"},
		"link-local decimal":        {host: "2852039166"},
		"link-local octal":          {host: "0251.0376.0251.0376"},
		"link-local multicast IPv4": {host: "224.0.0.1"},
		"link-local multicast IPv6": {host: "[ff02::1]"},
		"metadata with a dot":       {host: "metadata.google.internal."},
		"metadata over IPv6":        {host: "[fd00:ec2::254]"},
		"public decimal":            {host: "134744072", allowed: true},
		"public NAT64":              {host: "[64:ff9b::808:808]", allowed: true},
		"a name like localhost":     {host: "localhost-api.invalid", allowed: true},
	} {
		t.Run(name, func(t *testing.T) {
			u := "http://" + tc.host + port + "/x"
			b, err := c.Do(t.Context(), "GET", u, "", nil, nil)
			if blocked := errors.Is(err, policyhttp.ErrBlocked); blocked == tc.allowed {
				t.Errorf("GET %s: %q, %v; want refused %v", u, b, err, !tc.allowed)
			}
		})
	}
}
