package webhook

import (
	"crypto/tls"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/verdict-dev/verdict/internal/testkit/admissiontraffic"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
)

const (
	benchPolicies = "../../../shared/bench/pss-classic"
	benchPods     = "../../../shared/bench/pods-1000.yaml"
)

// loadBench loads the 22 PSS policies and the 1,000 pods of the shared
// benchmark workload, or skips when they are not there.
func loadBench(t testing.TB) (*StaticSource, []map[string]any) {
	t.Helper()
	pods, err := admissiontraffic.ReadPods(benchPods)
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("shared benchmark workload not found")
	}
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New()
	if err != nil {
		t.Fatal(err)
	}
	src, err := LoadStaticSource(eng, []string{benchPolicies}, testLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(src.Invalid()) > 0 || len(src.set.Policies) != 22 {
		t.Fatalf("%d policies, invalid: %v", len(src.set.Policies), src.Invalid())
	}
	return src, pods
}

// TestPSSWorkload sends the shared benchmark pods through /validate with
// the 22 PSS ClusterPolicies (3 Enforce, 19 Audit) and checks every answer
// against the engine run directly: a pod is denied exactly when an Enforce
// rule fails, each Audit failure is one warning, and the admitted pods'
// results reach the result sink. Over the whole workload, the 495 pods
// with violations are exactly those denied or warned.
func TestPSSWorkload(t *testing.T) {
	src, pods := loadBench(t)
	if testing.Short() {
		pods = pods[:100]
	}
	h := newHarness(t, src, testConfig(func(c *Config) { c.MaxWarnings = 100 }))
	eng, err := engine.New()
	if err != nil {
		t.Fatal(err)
	}
	set, _ := src.Set(t.Context())

	type outcome struct {
		denied   bool
		warnings int
		message  string
	}
	got := make([]outcome, len(pods))
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, pods[i]))
				o := outcome{denied: !resp.Allowed, warnings: len(resp.Warnings)}
				if resp.Result != nil {
					o.message = resp.Result.Message
				}
				got[i] = o
			}
		}()
	}
	for i := range pods {
		work <- i
	}
	close(work)
	wg.Wait()

	violating, admitted, wantEvents := 0, 0, 0
	for i, p := range pods {
		req := &engine.Request{Operation: engine.OpCreate, Object: p}
		var want outcome
		var blocking []string
		policies := 0
		for _, pol := range set.Policies {
			resp := eng.Validate(t.Context(), req, pol, set.Exceptions)
			if len(resp.Rules) > 0 {
				policies++
			}
			blocks, failed := false, 0
			for _, rr := range resp.Rules {
				if rr.Status == engine.StatusFail || rr.Status == engine.StatusError {
					failed++
					if rr.Enforce || rr.Status == engine.StatusError {
						blocks = true
					}
				}
			}
			if blocks {
				blocking = append(blocking, pol.Name())
			} else {
				want.warnings += failed
			}
		}
		want.denied = len(blocking) > 0
		name := document.String(p, "metadata", "name")
		g := got[i]
		if g.denied != want.denied {
			t.Errorf("%s: denied %v, engine says %v (%v)", name, g.denied, want.denied, blocking)
			continue
		}
		if g.denied {
			for _, b := range blocking {
				if !strings.Contains(g.message, "\n"+b+":\n") {
					t.Errorf("%s: denial does not name %s:\n%s", name, b, g.message)
				}
			}
			if !strings.HasPrefix(g.message, "\n\nresource Pod/"+document.String(p, "metadata", "namespace")+"/"+name+" was blocked") {
				t.Errorf("%s: message %q", name, g.message)
			}
		} else {
			admitted++
			wantEvents += policies
			if g.warnings != want.warnings {
				t.Errorf("%s: %d warnings, engine says %d", name, g.warnings, want.warnings)
			}
		}
		if g.denied || g.warnings > 0 {
			violating++
		}
	}
	if n := len(h.results.Events()); n != wantEvents {
		t.Errorf("%d result events for %d admitted pods, want %d", n, admitted, wantEvents)
	}
	if len(pods) == 1000 && violating != 495 {
		t.Errorf("%d pods denied or warned, the workload has 495 violating pods", violating)
	}
	t.Logf("%d pods: %d admitted, %d denied or warned", len(pods), admitted, violating)
}

// BenchmarkValidate measures one /validate round trip over TLS with the
// 22 PSS policies. The client stands for the API server, never limited
// with mutual TLS: the publish limits of unverified callers are off, so
// that every result is published.
func BenchmarkValidate(b *testing.B) {
	src, pods := loadBench(b)
	roundTrips(b, newHarness(b, src, testConfig(func(c *Config) { c.UnverifiedResultsPerSecond, c.UnverifiedWorkPerSecond = 0, 0 })), pods)
}

// BenchmarkValidateKyvernoMetrics is BenchmarkValidate with Kyverno's
// metric names on (--kyverno-metrics): every rule timed and its result
// recorded, every request counted twice. What the flag costs is the
// difference; off, it costs nothing (one nil check a request).
//
//	go test -run '^$' -bench 'BenchmarkValidate(KyvernoMetrics)?$' -benchmem ./internal/webhook/
func BenchmarkValidateKyvernoMetrics(b *testing.B) {
	src, pods := loadBench(b)
	roundTrips(b, newHarness(b, src, testConfig(func(c *Config) {
		c.UnverifiedResultsPerSecond, c.UnverifiedWorkPerSecond = 0, 0
		c.KyvernoMetrics = true
	})), pods)
}

// roundTrips posts a review of each pod in turn to h's /validate, one
// per benchmark iteration.
func roundTrips(b *testing.B, h *harness, pods []map[string]any) {
	bodies := make([][]byte, len(pods))
	for i, p := range pods {
		bodies[i] = mustJSON(b, reviewOf(b, admissionv1.Create, p))
	}
	b.ResetTimer()
	i := 0
	for b.Loop() {
		if code, _ := h.post(PathValidate, "application/json", bodies[i%len(bodies)]); code != 200 {
			b.Fatal(code)
		}
		i++
	}
}

// BenchmarkRoundTripBaseline is BenchmarkValidate's client and TLS server
// with a handler that only reads the review and writes a fixed answer:
// what a round trip costs before the webhook does anything. The
// webhook's own allocations per request are BenchmarkValidate's less
// these.
//
//	go test -run '^$' -bench 'BenchmarkValidate$|BenchmarkRoundTripBaseline' -benchmem ./internal/webhook/
func BenchmarkRoundTripBaseline(b *testing.B) {
	_, pods := loadBench(b)
	answer := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"req","allowed":true}}`)
	cert, _, _ := selfSigned(b, "webhook.test")
	ts := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(io.Discard, r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", strconv.Itoa(len(answer)))
		_, _ = w.Write(answer)
	}))
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	ts.StartTLS()
	b.Cleanup(ts.Close)
	roundTrips(b, &harness{t: b, url: ts.URL, client: ts.Client()}, pods)
}
