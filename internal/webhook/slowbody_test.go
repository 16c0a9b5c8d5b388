package webhook

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net/http"
	"runtime"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/testkit"
)

// slowBody is one connection of a slow-body flood: it declares a large
// body and sends a byte a second.
type slowBody struct {
	start  time.Time
	ended  time.Duration // when the server answered or cut it
	status int           // the answer's status, 0 when cut without one
}

// sendSlowBody opens a TLS connection to addr, sends the headers of a
// review that declares size bytes, then a byte a second until the server
// answers or cuts the connection.
func sendSlowBody(t *testing.T, addr string, size int, sb *slowBody) {
	t.Helper()
	sb.start = time.Now()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // test client
	if err != nil {
		t.Errorf("dial: %v", err)
		return
	}
	defer func() { _ = conn.Close() }()
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", PathValidate, size); err != nil {
		t.Errorf("write headers: %v", err)
		return
	}
	answered := make(chan int, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			answered <- 0
			return
		}
		_ = resp.Body.Close()
		answered <- resp.StatusCode
	}()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case sb.status = <-answered:
			sb.ended = time.Since(sb.start)
			return
		case <-tick.C:
			_, _ = conn.Write([]byte(" "))
		}
	}
}

// TestSlowBodiesHoldNoSlot: issue 28, finding 3. Connections that declare
// a large body and send a byte a second held every evaluation slot (the
// body was read inside one, and cut only at the request timeout plus
// 10 s): every other review was answered 429. Bodies are read outside the
// slots and within the request's deadline: twice as many slow connections
// as slots, and a review sent meanwhile is answered, correctly, within a
// second; each slow one is answered 408 at its deadline.
func TestSlowBodiesHoldNoSlot(t *testing.T) {
	const slots, slow = 8, 16
	cert, _, _ := selfSigned(t, "webhook.test")
	reg := prometheus.NewRegistry()
	cfg := testConfig(func(c *Config) {
		c.MaxConcurrentEvaluations = slots
		c.RequestTimeout = 3 * time.Second
	})
	s, err := New(cfg, WithPolicySource(staticSource(t, enforcePrivileged)), WithCertSource(certs.Static(cert)),
		WithRegistry(reg), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	sv := serve(t, s)
	testkit.EventuallyTrue(t, 10*time.Second, "the server to serve", func() bool { return s.addr.Load() != nil })

	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	flood := make([]slowBody, slow)
	var wg sync.WaitGroup
	for i := range flood {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sendSlowBody(t, sv.addr, 1<<20, &flood[i])
		}()
	}
	// The flood's headers are in and its bodies trickle.
	time.Sleep(1500 * time.Millisecond)
	var during runtime.MemStats
	runtime.ReadMemStats(&during)

	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test client
	var latencies []time.Duration
	for i, tc := range []struct {
		pod     map[string]any
		allowed bool
	}{{pod("ok-1"), true}, {pod("bad", privileged), false}, {pod("ok-2"), true}} {
		body := mustJSON(t, reviewOf(t, admissionv1.Create, tc.pod))
		start := time.Now()
		resp, err := client.Post("https://"+sv.addr+PathValidate, contentTypeJSON, bytes.NewReader(body))
		if err != nil {
			t.Fatalf("review %d during the flood: %v", i, err)
		}
		var out admissionv1.AdmissionReview
		err = json.NewDecoder(resp.Body).Decode(&out)
		_ = resp.Body.Close()
		took := time.Since(start)
		latencies = append(latencies, took)
		if resp.StatusCode != http.StatusOK || err != nil || out.Response == nil || out.Response.Allowed != tc.allowed {
			t.Fatalf("review %d during the flood: status %d after %s (%v), want 200 and allowed %v", i, resp.StatusCode, took, err, tc.allowed)
		}
		if took > time.Second {
			t.Fatalf("review %d during the flood answered after %s, want under 1s", i, took)
		}
	}
	wg.Wait()
	var ends []time.Duration
	for i, sb := range flood {
		if sb.status != http.StatusRequestTimeout || sb.ended > cfg.RequestTimeout+time.Second {
			t.Fatalf("slow connection %d: status %d after %s, want 408 by the %s deadline", i, sb.status, sb.ended, cfg.RequestTimeout)
		}
		ends = append(ends, sb.ended)
	}
	sort.Slice(ends, func(i, j int) bool { return ends[i] < ends[j] })
	if got := counter(t, reg, "verdict_webhook_refused_reviews_total", map[string]string{"reason": refusedBodyTimeout}); got != slow {
		t.Fatalf("refused_reviews_total{reason=%q} = %v, want %d", refusedBodyTimeout, got, slow)
	}
	t.Logf("%d slow bodies on %d slots: reviews answered in %v; slow ones answered 408 after %s to %s; heap in use %d KiB before, %d KiB during",
		slow, slots, latencies, ends[0].Round(time.Millisecond), ends[len(ends)-1].Round(time.Millisecond), before.HeapInuse>>10, during.HeapInuse>>10)
}

// TestAnswerBeforeTheDeadline: an evaluation that overruns the request's
// deadline (it does not look at it) still gets the request answered, a
// 504 Status the API server treats as the webhook's failure (its
// failurePolicy decides), before the deadline rather than a connection
// cut after it. Its slot stays taken until it ends.
func TestAnswerBeforeTheDeadline(t *testing.T) {
	src := stuckSource{release: make(chan struct{})}
	var once sync.Once
	release := func() { once.Do(func() { close(src.release) }) }
	t.Cleanup(release)
	h := newHarness(t, src, testConfig())
	body := mustJSON(t, reviewOf(t, admissionv1.Create, pod("p")))
	for _, timeout := range []time.Duration{time.Second, 2 * time.Second} {
		start := time.Now()
		code, out := h.post(fmt.Sprintf("%s?timeout=%s", PathValidate, timeout), contentTypeJSON, body)
		took := time.Since(start)
		if code != http.StatusGatewayTimeout || took > timeout {
			t.Fatalf("timeout %s: status %d after %s, want 504 before the deadline: %s", timeout, code, took, out)
		}
		t.Logf("timeout %s: answered %d after %s", timeout, code, took.Round(time.Millisecond))
	}
	if got := gaugeValue(h.s.metrics.inFlight); got != 2 {
		t.Fatalf("%v evaluations in flight, want the 2 overrunning ones", got)
	}
	release()
	testkit.EventuallyTrue(t, 10*time.Second, "the overrunning evaluations to give their slots back", func() bool { return gaugeValue(h.s.metrics.inFlight) == 0 })
	testkit.EventuallyTrue(t, 10*time.Second, "the two to be counted as timed out", func() bool {
		return counter(t, h.reg, "verdict_webhook_requests_total", map[string]string{"endpoint": "validate", "outcome": string(OutcomeTimedOut)}) == 2
	})
}

// startBody opens a TLS connection to addr and sends the headers of a
// review that declares size bytes, then sent bytes of it; the connection
// stays open (closed at the test's end).
func startBody(t *testing.T, addr string, size, sent int) *tls.Conn {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // test client
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	if _, err := fmt.Fprintf(conn, "POST %s HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", PathValidate, size, bytes.Repeat([]byte(" "), sent)); err != nil {
		t.Fatal(err)
	}
	return conn
}

// TestBodyLimits: the bodies being read are bounded in number
// (MaxConcurrentBodyReads) and in the bytes they hold
// (MaxBodyBytesInFlight, charged as bytes arrive, not as declared): past
// either, a review is answered 429 at once and counted by reason; once
// the bodies holding them are done (answered at their deadline), reviews
// pass again.
func TestBodyLimits(t *testing.T) {
	tests := map[string]struct {
		mod func(*Config)
		// hold starts the bodies that hold the limit.
		hold   func(t *testing.T, addr string)
		reason string
	}{
		"readers": {
			mod: func(c *Config) { c.MaxConcurrentBodyReads = 2 },
			hold: func(t *testing.T, addr string) {
				startBody(t, addr, 100, 1)
				startBody(t, addr, 100, 1)
			},
			reason: refusedBodyReaders,
		},
		"bytes": {
			mod: func(c *Config) { c.MaxRequestBytes, c.MaxBodyBytesInFlight = 1<<20, 1<<20 },
			// 600 KB of a declared MiB: its buffer has grown to the MiB.
			hold:   func(t *testing.T, addr string) { startBody(t, addr, 1<<20, 600<<10) },
			reason: refusedBodyBytes,
		},
		"declared, not sent": {
			// Sixteen bodies that declare 1 MiB and send a byte hold 64 KiB
			// each: a review still fits in 2 MiB.
			mod: func(c *Config) { c.MaxRequestBytes, c.MaxBodyBytesInFlight = 1<<20, 2<<20 },
			hold: func(t *testing.T, addr string) {
				for range 16 {
					startBody(t, addr, 1<<20, 1)
				}
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			cert, _, _ := selfSigned(t, "webhook.test")
			reg := prometheus.NewRegistry()
			cfg := testConfig(tc.mod, func(c *Config) { c.RequestTimeout = 2 * time.Second })
			s, err := New(cfg, WithPolicySource(staticSource(t, enforcePrivileged)), WithCertSource(certs.Static(cert)),
				WithRegistry(reg), WithLogger(testLogger(t)))
			if err != nil {
				t.Fatal(err)
			}
			sv := serve(t, s)
			testkit.EventuallyTrue(t, 10*time.Second, "the server to serve", func() bool { return s.addr.Load() != nil })
			tc.hold(t, sv.addr)
			time.Sleep(300 * time.Millisecond)

			client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test client
			post := func() (int, time.Duration) {
				start := time.Now()
				resp, err := client.Post("https://"+sv.addr+PathValidate, contentTypeJSON, bytes.NewReader(mustJSON(t, reviewOf(t, admissionv1.Create, pod("p")))))
				if err != nil {
					t.Fatal(err)
				}
				_ = resp.Body.Close()
				return resp.StatusCode, time.Since(start)
			}
			code, took := post()
			if tc.reason == "" {
				if code != http.StatusOK {
					t.Fatalf("status %d, want 200", code)
				}
				return
			}
			if code != http.StatusTooManyRequests || took > 500*time.Millisecond {
				t.Fatalf("status %d after %s, want 429 at once", code, took)
			}
			if got := counter(t, reg, "verdict_webhook_refused_reviews_total", map[string]string{"reason": tc.reason}); got != 1 {
				t.Fatalf("refused_reviews_total{reason=%q} = %v, want 1", tc.reason, got)
			}
			// The holders are answered at their deadline and let go.
			time.Sleep(cfg.RequestTimeout)
			if code, _ := post(); code != http.StatusOK {
				t.Fatalf("after the holders' deadline: status %d, want 200", code)
			}
		})
	}
}
