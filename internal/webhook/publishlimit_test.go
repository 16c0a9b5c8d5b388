package webhook

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/testkit"
)

// A flood of forged reviews from a caller without a client certificate
// (issue 28, finding 9) publishes at most the caller's rate of results
// (twice that in a burst): the rest are dropped and counted, and every
// review is still answered. Work past the caller's rate is refused and
// the request denied (OnWorkPublishFailure deny) with the reason.
func TestUnverifiedCallersPublishAtTheirRate(t *testing.T) {
	const rate = 10 // results a second; the burst is 20
	decisions := &memoryDecisionSink{}
	h := newHarness(t, staticSource(t, auditLatest, generateNetpol), testConfig(func(c *Config) {
		c.UnverifiedResultsPerSecond = rate
		c.UnverifiedWorkPerSecond = 1
	}), WithDecisionSink(decisions))
	start := time.Now()
	const flood = 200
	for i := range flood {
		resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("p"+string(rune('a'+i%26)))))
		if !resp.Allowed {
			t.Fatalf("review %d denied: %v", i, resp.Result)
		}
	}
	allowed := 2*rate + int(time.Since(start).Seconds()*rate) + 1
	got := len(h.results.Events())
	if got > allowed || got < 2*rate {
		t.Errorf("%d results published from %d forged reviews, want %d to %d", got, flood, 2*rate, allowed)
	}
	if n := counter(t, h.reg, "verdict_webhook_unverified_publish_limited_total", map[string]string{"what": limitedResults}); int(n) != flood-got {
		t.Errorf("limited results counted %v, want %d", n, flood-got)
	}
	// The admission log takes the forged reviews' decisions at the same
	// rate, each marked unverified (issue 34).
	var logged []Decision
	testkit.EventuallyTrue(t, 5*time.Second, "every decision logged or limited", func() bool {
		logged = append(logged, decisions.drain()...)
		n := counter(t, h.reg, "verdict_webhook_unverified_publish_limited_total", map[string]string{"what": limitedDecisions})
		return len(logged)+int(n) == flood
	})
	if len(logged) > allowed || len(logged) < 2*rate {
		t.Errorf("%d decisions logged from %d forged reviews, want %d to %d", len(logged), flood, 2*rate, allowed)
	}
	for _, d := range logged {
		if d.Verified {
			t.Fatalf("a forged review's decision says verified: %+v", d)
		}
	}

	// Work: two items per Namespace; the burst of 2 takes the first.
	if resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, namespaceObj("team-a"))); !resp.Allowed {
		t.Fatalf("first generate trigger denied: %v", resp.Result)
	}
	resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, namespaceObj("team-b")))
	if resp.Allowed || !strings.Contains(resp.Result.Message, ErrPublishLimited.Error()) {
		t.Fatalf("a generate trigger past the rate: allowed %v, %v; want a denial saying %q", resp.Allowed, resp.Result, ErrPublishLimited)
	}
	if n := counter(t, h.reg, "verdict_webhook_unverified_publish_limited_total", map[string]string{"what": limitedWork}); n < 1 {
		t.Errorf("limited work counted %v, want at least 1", n)
	}
}

// The API server, verified by its client certificate (mutual TLS), is
// never limited.
func TestVerifiedCallerUnlimited(t *testing.T) {
	apiServerCA := newTestCA(t, "webhook-client-ca")
	caFile := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(caFile, apiServerCA.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _, _ := selfSigned(t, "webhook.test")
	results := &MemoryResultSink{}
	decisions := &memoryDecisionSink{}
	reg := prometheus.NewRegistry()
	s, err := New(testConfig(func(c *Config) {
		c.ClientCAFile = caFile
		c.UnverifiedResultsPerSecond = 1
	}), WithPolicySource(staticSource(t, auditLatest)), WithCertSource(certs.Static(cert)),
		WithResultSink(results), WithRegistry(reg), WithLogger(testLogger(t)), WithDecisionSink(decisions))
	if err != nil {
		t.Fatal(err)
	}
	sv := serve(t, s)
	testkit.EventuallyTrue(t, 10*time.Second, "ready with mutual TLS on", func() bool { return s.Ready(t.Context()) == nil })
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // test client: the server side is what is tested
		Certificates:       []tls.Certificate{apiServerCA.client(t, "kube-apiserver-webhook-client")},
	}}}
	const reviews = 50
	for i := range reviews {
		body, err := json.Marshal(reviewOf(t, admissionv1.Create, pod("p"+string(rune('a'+i%26)))))
		if err != nil {
			t.Fatal(err)
		}
		resp, err := client.Post("https://"+sv.addr+PathValidate, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("review %d: status %d", i, resp.StatusCode)
		}
	}
	if got := len(results.Events()); got != reviews {
		t.Errorf("%d results published for %d reviews of the verified API server, want all", got, reviews)
	}
	if n := counter(t, reg, "verdict_webhook_unverified_publish_limited_total", map[string]string{"what": limitedResults}); n != 0 {
		t.Errorf("limited results counted %v for a verified caller", n)
	}
	var logged []Decision
	testkit.EventuallyTrue(t, 5*time.Second, "every decision logged", func() bool {
		logged = append(logged, decisions.drain()...)
		return len(logged) >= reviews
	})
	for _, d := range logged {
		if !d.Verified {
			t.Fatalf("the verified API server's decision says unverified: %+v", d)
		}
	}
}

// The buckets: a caller's rate refills with time, callers do not share
// one, and past maxLimitedCallers addresses the rest share one.
func TestCallerLimiter(t *testing.T) {
	now := time.Unix(0, 0)
	l := newCallerLimiter(10, func() time.Time { return now })
	if !l.allow("a", 20) || l.allow("a", 1) {
		t.Fatal("the burst is twice the rate, and no more")
	}
	if !l.allow("b", 20) {
		t.Fatal("another caller has a bucket of its own")
	}
	now = now.Add(500 * time.Millisecond)
	if !l.allow("a", 5) || l.allow("a", 1) {
		t.Fatal("half a second refills half the rate")
	}
	for i := range maxLimitedCallers {
		l.allow(string(rune(0x1000+i)), 0)
	}
	if !l.allow("late-1", 20) || l.allow("late-2", 1) {
		t.Fatal("callers past the bound share one bucket")
	}
	now = now.Add(2 * callerIdle)
	if !l.allow("late-2", 20) || !l.allow("late-3", 20) {
		t.Fatal("idle callers are forgotten, making room")
	}
}
