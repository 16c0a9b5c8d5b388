package webhook

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
)

func TestBadRequests(t *testing.T) {
	h := newHarness(t, staticSource(t, enforcePrivileged), testConfig(func(c *Config) { c.MaxRequestBytes = 64 << 10 }))
	valid := mustJSON(t, reviewOf(t, admissionv1.Create, pod("p")))
	cases := map[string]struct {
		path        string
		method      string
		contentType string
		body        []byte
		chunked     bool // sent without a Content-Length
		code        int
		reason      string
	}{
		"malformed JSON":        {body: []byte(`{"apiVersion": "admission.k8s.io/v1", "kind": `), code: 400, reason: "malformed AdmissionReview"},
		"not an object":         {body: []byte(`[1,2,3]`), code: 400, reason: "malformed AdmissionReview"},
		"v1beta1":               {body: []byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"1"}}`), code: 400, reason: "expected admission.k8s.io/v1 AdmissionReview"},
		"no request":            {body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), code: 400, reason: "has no request"},
		"no uid":                {body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE","object":{}}}`), code: 400, reason: "uid is empty"},
		"bad operation":         {body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"PATCH","object":{}}}`), code: 400, reason: "operation"},
		"object is a string":    {body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE","object":"pod"}}`), code: 400, reason: "request.object: not a JSON object"},
		"create without object": {body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE"}}`), code: 400, reason: "request.object is required"},
		"empty body":            {body: nil, code: 400, reason: "empty request body"},
		"oversized":             {body: append(append([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE","object":{"x":"`), bytes.Repeat([]byte("a"), 70<<10)...), []byte(`"}}}`)...), code: 413, reason: "exceeds the limit"},
		"wrong content type":    {contentType: "application/yaml", body: valid, code: 415, reason: "is not application/json"},
		"no content type":       {contentType: "-", body: valid, code: 415, reason: "is not application/json"},
		"GET":                   {method: http.MethodGet, code: 405, reason: "use POST"},
		"charset is fine":       {contentType: "application/json; charset=utf-8", body: valid, code: 200},
		"chunked":               {body: valid, chunked: true, code: 200},
		"chunked and oversized": {body: bytes.Repeat([]byte(" "), 70<<10), chunked: true, code: 413, reason: "exceeds the limit"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			path := tc.path
			if path == "" {
				path = PathValidate
			}
			method := tc.method
			if method == "" {
				method = http.MethodPost
			}
			var reqBody io.Reader = bytes.NewReader(tc.body)
			if tc.chunked {
				reqBody = io.MultiReader(reqBody) // no length known
			}
			req, err := http.NewRequest(method, h.url+path, reqBody)
			if err != nil {
				t.Fatal(err)
			}
			if tc.chunked {
				req.ContentLength = -1
			}
			switch tc.contentType {
			case "":
				req.Header.Set("Content-Type", "application/json")
			case "-":
			default:
				req.Header.Set("Content-Type", tc.contentType)
			}
			resp, err := h.client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = resp.Body.Close() }()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tc.code {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, tc.code, body)
			}
			if tc.code == 200 {
				return
			}
			var st metav1.Status
			if err := json.Unmarshal(body, &st); err != nil {
				t.Fatalf("error body is not a Status: %s", body)
			}
			if int(st.Code) != tc.code || !strings.Contains(st.Message, tc.reason) {
				t.Fatalf("status %+v, want code %d and reason %q", st, tc.code, tc.reason)
			}
		})
	}
	rejected := 0
	for _, tc := range cases {
		if tc.code != 200 {
			rejected++
		}
	}
	if got := counter(t, h.reg, "verdict_webhook_requests_total", map[string]string{"endpoint": "validate", "outcome": "rejected"}); got != float64(rejected) {
		t.Fatalf("rejected requests counted %v, want %d", got, rejected)
	}
}

func TestValidatePolicyEndpoint(t *testing.T) {
	h := newHarness(t, staticSource(t), testConfig())
	cases := map[string]struct {
		object  string
		allowed bool
		paths   []string
	}{
		"valid policy": {object: enforcePrivileged, allowed: true},
		"invalid policy": {object: `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: broken}
spec:
  validationFailureAction: Block
  rules:
  - match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "{{ request.object.metadata.[ }}"
      pattern: {spec: {(hostNetwork: false}}
  - name: second
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {deny: {}}
    mutate: {patchStrategicMerge: {metadata: {labels: {a: b}}}}
    bogus: true
`, paths: []string{"spec.validationFailureAction", "spec.rules[0].name", "spec.rules[1]", "spec.rules[1].bogus"}},
		"verdict.dev group": {object: strings.Replace(enforcePrivileged, "kyverno.io/v1", "verdict.dev/v1", 1), allowed: true},
		"valid exception": {object: `apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: ok, namespace: default}
spec:
  match: {any: [{resources: {kinds: [Pod], names: [debug-*]}}]}
  exceptions: [{policyName: disallow-privileged, ruleNames: [privileged-containers]}]
`, allowed: true},
		"invalid exception": {object: `apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: empty, namespace: default}
spec:
  match: {any: [{resources: {kinds: [Pod]}}]}
`, paths: []string{"spec.exceptions"}},
		"exception without match": {object: `apiVersion: verdict.dev/v1
kind: PolicyException
metadata: {name: nomatch, namespace: default}
spec:
  exceptions: [{policyName: disallow-privileged, ruleNames: [privileged-containers]}]
`, paths: []string{"spec.match"}},
		"valid CEL exception": {object: `apiVersion: verdict.dev/v1
kind: PolicyException
metadata: {name: cel, namespace: default}
spec:
  policyRefs: [{name: require-team, kind: ValidatingPolicy}]
  matchConditions: [{name: n, expression: "object.metadata.name == 'x'"}]
`, allowed: true},
		"CEL exception that does not compile": {object: `apiVersion: policies.kyverno.io/v1
kind: PolicyException
metadata: {name: cel, namespace: default}
spec:
  policyRefs: [{name: require-team, kind: ValidatingPolicy}]
  matchConditions: [{name: n, expression: "object.metadata.name =="}]
`, paths: []string{"spec.matchConditions[0].expression"}},
		"valid cleanup policy": {object: `apiVersion: verdict.dev/v1
kind: ClusterCleanupPolicy
metadata: {name: old-pods}
spec:
  schedule: "0 3 * * *"
  match: {any: [{resources: {kinds: [Pod]}}]}
  conditions: {all: [{key: "{{ target.status.phase }}", operator: Equals, value: Succeeded}]}
`, allowed: true},
		"invalid cleanup policy": {object: `apiVersion: verdict.dev/v1
kind: CleanupPolicy
metadata: {name: broken, namespace: team}
spec:
  schedule: "every day"
  match: {any: [{resources: {kinds: [Pod], namespaces: [other]}, roles: [admin]}]}
`, paths: []string{"spec.schedule", "spec.match.any[0].resources.namespaces", "spec.match.any[0].roles"}},
		"not a policy": {object: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: default}\n", allowed: true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			o := obj(t, tc.object)
			resp := h.admit(PathValidatePolicy, reviewOf(t, admissionv1.Create, o))
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed %v, want %v: %+v", resp.Allowed, tc.allowed, resp.Result)
			}
			if tc.allowed {
				return
			}
			if resp.Result.Code != 422 || resp.Result.Reason != metav1.StatusReasonInvalid {
				t.Fatalf("result %+v", resp.Result)
			}
			for _, p := range tc.paths {
				if !strings.Contains(resp.Result.Message, p+":") {
					t.Errorf("message does not name %s: %s", p, resp.Result.Message)
				}
			}
		})
	}
	t.Run("a synchronized GeneratingPolicy is admitted without warnings", func(t *testing.T) {
		o := obj(t, `apiVersion: verdict.dev/v1
kind: GeneratingPolicy
metadata: {name: sync}
spec:
  evaluation: {synchronize: {enabled: true}, generateExisting: {enabled: true}}
  matchConstraints:
    resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [namespaces]}]
  generate:
  - expression: "generator.Apply(object.metadata.name, [])"
`)
		resp := h.admit(PathValidatePolicy, reviewOf(t, admissionv1.Create, o))
		if !resp.Allowed || len(resp.Warnings) != 0 {
			t.Fatalf("allowed %v, warnings %q", resp.Allowed, resp.Warnings)
		}
	})
	t.Run("causes carry field paths", func(t *testing.T) {
		o := obj(t, "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: x}\nspec: {rules: [{name: r, match: {any: [{resources: {kinds: [Pod]}}]}}]}\n")
		resp := h.admit(PathValidatePolicy, reviewOf(t, admissionv1.Create, o))
		if resp.Allowed || resp.Result.Details == nil || len(resp.Result.Details.Causes) == 0 || resp.Result.Details.Causes[0].Field != "spec.rules[0]" {
			t.Fatalf("result %+v", resp.Result)
		}
	})
	t.Run("deleting an invalid policy is allowed", func(t *testing.T) {
		o := obj(t, "apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: x}\nspec: {}\n")
		if resp := h.admit(PathValidatePolicy, reviewOf(t, admissionv1.Delete, o)); !resp.Allowed {
			t.Fatalf("delete denied: %+v", resp.Result)
		}
	})
}

func TestPanicRecovered(t *testing.T) {
	h := newHarness(t, panicSource{}, testConfig())
	body := mustJSON(t, reviewOf(t, admissionv1.Create, pod("p")))
	for _, path := range []string{PathValidate, PathMutate, PathValidate} {
		code, out := h.post(path, "application/json", body)
		if code != http.StatusInternalServerError || !strings.Contains(string(out), "panic while serving") {
			t.Fatalf("%s: status %d: %s", path, code, out)
		}
	}
	if got := counter(t, h.reg, "verdict_webhook_panics_total", map[string]string{"endpoint": "validate"}); got != 2 {
		t.Fatalf("validate panics counted %v, want 2", got)
	}
	if got := counter(t, h.reg, "verdict_webhook_requests_total", map[string]string{"endpoint": "mutate", "outcome": "error"}); got != 1 {
		t.Fatalf("mutate errors counted %v", got)
	}
	resp, err := h.client.Get(h.url + PathHealthz)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("server not alive after panics: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	// The policy endpoint does not use the source and still works.
	if r := h.admit(PathValidatePolicy, reviewOf(t, admissionv1.Create, obj(t, enforcePrivileged))); !r.Allowed {
		t.Fatalf("validate-policy after panics: %+v", r.Result)
	}
}

// erroringSource fails like a source whose caches are not synced.
type erroringSource struct{}

var errNotSynced = errors.New("policy caches not synced")

func (erroringSource) Set(context.Context) (*engine.Set, error) { return nil, errNotSynced }
func (erroringSource) Invalid() []PolicyError                   { return nil }

func TestSourceErrorIs500(t *testing.T) {
	h := newHarness(t, erroringSource{}, testConfig())
	code, out := h.post(PathValidate, "application/json", mustJSON(t, reviewOf(t, admissionv1.Create, pod("p"))))
	if code != http.StatusInternalServerError || !strings.Contains(string(out), errNotSynced.Error()) {
		t.Fatalf("status %d: %s", code, out)
	}
}

// get fetches a URL and returns the status and body.
func get(t testing.TB, c *http.Client, url string) (int, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestReadinessAndShutdown(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	results := &MemoryResultSink{}
	cfg := testConfig(func(c *Config) {
		c.CertFile, c.KeyFile = certFile, keyFile
		c.CertReloadInterval = 20 * time.Millisecond
		c.ShutdownDelay = 300 * time.Millisecond
	})
	s, err := New(cfg,
		WithPolicySource(staticSource(t, enforcePrivileged)),
		WithResultSink(results),
		WithRegistry(prometheus.NewRegistry()),
		WithLogger(testLogger(t)),
	)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	probe, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, probe) }()

	probeURL := "http://" + probe.Addr().String()
	plain := &http.Client{Timeout: 5 * time.Second}
	testkit.EventuallyTrue(t, 10*time.Second, "probe listener", func() bool { code, _ := get(t, plain, probeURL+PathHealthz); return code == 200 })

	// No certificate yet: not ready, and TLS handshakes fail.
	if code, body := get(t, plain, probeURL+PathReadyz); code != 503 || !strings.Contains(body, ErrNoCertificate.Error()) {
		t.Fatalf("readyz without a certificate: %d %q", code, body)
	}
	insecure := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test client
	tlsURL := "https://" + ln.Addr().String()
	if code, _ := get(t, insecure, tlsURL+PathHealthz); code != 0 {
		t.Fatalf("TLS served without a certificate: %d", code)
	}

	// The certificate appears (as a mounted Secret would): ready.
	cert1, c1, k1 := selfSigned(t, "first")
	writeFiles(t, certFile, c1, keyFile, k1)
	testkit.EventuallyTrue(t, 10*time.Second, "ready", func() bool { code, _ := get(t, plain, probeURL+PathReadyz); return code == 200 })
	if code, _ := get(t, insecure, tlsURL+PathReadyz); code != 200 {
		t.Fatalf("readyz over TLS: %d", code)
	}
	if !servedCert(t, ln.Addr().String(), cert1) {
		t.Fatal("first certificate not served")
	}

	// Rotation: the new certificate is served without a restart.
	cert2, c2, k2 := selfSigned(t, "second")
	writeFiles(t, certFile, c2, keyFile, k2)
	testkit.EventuallyTrue(t, 10*time.Second, "rotated certificate", func() bool { return servedCert(t, ln.Addr().String(), cert2) })

	// A half-written pair keeps the current certificate.
	if err := os.WriteFile(keyFile, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if !servedCert(t, ln.Addr().String(), cert2) {
		t.Fatal("a broken key pair replaced the certificate")
	}

	// SIGTERM: readiness fails at once while requests are still served.
	cancel()
	testkit.EventuallyTrue(t, 10*time.Second, "not ready after shutdown began", func() bool {
		code, body := get(t, plain, probeURL+PathReadyz)
		return code == 503 && strings.Contains(body, ErrShuttingDown.Error())
	})
	if code, body := get(t, insecure, tlsURL+PathReadyz); code != 503 {
		t.Fatalf("readyz over TLS during the drain delay: %d %q", code, body)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return")
	}
	if results.Flushes() != 1 {
		t.Fatalf("result sink flushed %d times, want 1", results.Flushes())
	}
	if code, _ := get(t, insecure, tlsURL+PathHealthz); code != 0 {
		t.Fatal("still accepting after shutdown")
	}
}

func writeFiles(t testing.TB, certFile string, certPEM []byte, keyFile string, keyPEM []byte) {
	t.Helper()
	// Write both, then swap in place with renames, as kubelet does with
	// the ..data symlink.
	for _, f := range []struct {
		path string
		data []byte
	}{{certFile, certPEM}, {keyFile, keyPEM}} {
		tmp := f.path + ".tmp"
		if err := os.WriteFile(tmp, f.data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, f.path); err != nil {
			t.Fatal(err)
		}
	}
}

// servedCert reports whether addr presents want.
func servedCert(t testing.TB, addr string, want tls.Certificate) bool {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // test client
	if err != nil {
		return false
	}
	defer func() { _ = conn.Close() }()
	peer := conn.ConnectionState().PeerCertificates
	return len(peer) > 0 && bytes.Equal(peer[0].Raw, want.Certificate[0])
}

func TestInFlightRequestsFinish(t *testing.T) {
	slow := &MemoryWorkSink{Delay: 400 * time.Millisecond}
	cert, _, _ := selfSigned(t, "x")
	results := &MemoryResultSink{}
	s, err := New(testConfig(),
		WithPolicySource(staticSource(t, generateNetpol)),
		WithCertSource(certs.Static(cert)),
		WithWorkSink(slow),
		WithResultSink(results),
		WithRegistry(prometheus.NewRegistry()),
		WithLogger(testLogger(t)),
	)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln, nil) }()
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // test client
	url := "https://" + ln.Addr().String()
	testkit.EventuallyTrue(t, 10*time.Second, "ready", func() bool { return s.Ready(t.Context()) == nil })

	type answer struct {
		code int
		body []byte
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := client.Post(url+PathValidate, "application/json", bytes.NewReader(mustJSON(t, reviewOf(t, admissionv1.Create, namespaceObj("in-flight")))))
		if err != nil {
			got <- answer{body: []byte(err.Error())}
			return
		}
		defer func() { _ = resp.Body.Close() }()
		b, _ := io.ReadAll(resp.Body)
		got <- answer{resp.StatusCode, b}
	}()
	time.Sleep(100 * time.Millisecond) // the request is waiting on the work sink
	cancel()
	a := <-got
	if a.code != 200 {
		t.Fatalf("in-flight request cut: %d %s", a.code, a.body)
	}
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(a.body, &ar); err != nil || !ar.Response.Allowed {
		t.Fatalf("in-flight answer %s", a.body)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(slow.Items()) != 2 || results.Flushes() != 1 {
		t.Fatalf("%d items published, %d flushes", len(slow.Items()), results.Flushes())
	}
}

func TestMetricsEndpoint(t *testing.T) {
	src := staticSource(t, enforcePrivileged)
	src.invalid = append(src.invalid, PolicyError{Kind: "ClusterPolicy", Key: "bad", Err: errors.New("x")})
	h := newHarness(t, src, testConfig())
	h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("p")))
	code, body := get(t, h.client, h.url+PathMetrics)
	if code != 200 {
		t.Fatalf("metrics: %d", code)
	}
	for _, want := range []string{
		`verdict_webhook_requests_total{endpoint="validate",outcome="allowed"} 1`,
		`verdict_webhook_request_duration_seconds_count{endpoint="validate"} 1`,
		`verdict_webhook_invalid_policies 1`,
		`verdict_webhook_certificate_expiry_timestamp_seconds`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	cases := map[string]struct {
		mod  func(*Config)
		want string
	}{
		"defaults":              {mod: func(*Config) {}},
		"bad failure mode":      {mod: func(c *Config) { c.OnWorkPublishFailure = "retry" }, want: "on-work-publish-failure"},
		"cert without key":      {mod: func(c *Config) { c.CertFile = "tls.crt" }, want: "go together"},
		"zero body limit":       {mod: func(c *Config) { c.MaxRequestBytes = 0 }, want: "max-request-bytes"},
		"negative delay":        {mod: func(c *Config) { c.ShutdownDelay = -time.Second }, want: "shutdown-delay"},
		"bad log level":         {mod: func(c *Config) { c.Log.Level = "loud" }, want: "log-level"},
		"bad log format":        {mod: func(c *Config) { c.Log.Format = "xml" }, want: "log-format"},
		"zero publish deadline": {mod: func(c *Config) { c.WorkPublishTimeout = 0 }, want: "work-publish-timeout"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := DefaultConfig()
			tc.mod(&cfg)
			err := cfg.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
	t.Run("New needs a policy source and a certificate source", func(t *testing.T) {
		if _, err := New(DefaultConfig(), WithLogger(testLogger(t))); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("error %v", err)
		}
		if _, err := New(DefaultConfig(), WithLogger(testLogger(t)), WithPolicySource(staticSource(t))); !errors.Is(err, ErrInvalidConfig) {
			t.Fatalf("error %v", err)
		}
	})
}

func TestErrorsMatchByCode(t *testing.T) {
	err := httpError(ErrRequestTooLarge, nil, "body of %d bytes", 10)
	if !errors.Is(err, ErrRequestTooLarge) || errors.Is(err, ErrBadRequest) {
		t.Fatal("errors.Is does not match by code")
	}
	wrapped := errors.Join(errors.New("context"), err)
	if !errors.Is(wrapped, ErrRequestTooLarge) {
		t.Fatal("wrapped error does not match")
	}
}

// TestPprofOnlyOnProbes: Go's profiles are served on the probe address
// when asked for, never on the HTTPS address, and not by default.
func TestPprofOnlyOnProbes(t *testing.T) {
	for _, on := range []bool{false, true} {
		h := newHarness(t, staticSource(t), testConfig(func(c *Config) { c.Pprof = on }))
		probes := httptest.NewServer(h.s.ProbeHandler())
		t.Cleanup(probes.Close)
		want := http.StatusNotFound
		if on {
			want = http.StatusOK
		}
		if code, _ := get(t, probes.Client(), probes.URL+"/debug/pprof/"); code != want {
			t.Errorf("pprof %v: probe address answers %d, want %d", on, code, want)
		}
		if code, _ := get(t, h.client, h.url+"/debug/pprof/"); code != http.StatusNotFound {
			t.Errorf("pprof %v: HTTPS address answers %d, want 404", on, code)
		}
	}
}

// Answers declare their length: one over net/http's 2 KiB buffer (a
// denial with warnings) is not chunked.
func TestAnswersDeclareTheirLength(t *testing.T) {
	for _, n := range []int{0, 100, 5000} {
		body := bytes.Repeat([]byte("x"), n)
		srv := httptest.NewServer(httpHandler(func(context.Context, *http.Request) (*Reply, error) {
			return &Reply{ContentType: contentTypeJSON, Body: body}, nil
		}))
		resp, err := http.Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		srv.Close()
		if resp.ContentLength != int64(n) || len(resp.TransferEncoding) != 0 || len(got) != n {
			t.Errorf("%d bytes: Content-Length %d, transfer encoding %v, read %d", n, resp.ContentLength, resp.TransferEncoding, len(got))
		}
	}
}
