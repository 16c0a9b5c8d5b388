package webhook

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io"
	"maps"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/rs/zerolog"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// testLogger writes to the test log at debug level.
func testLogger(t testing.TB) zerolog.Logger {
	return zerolog.New(zerolog.NewTestWriter(t)).Level(zerolog.DebugLevel)
}

// selfSigned returns a certificate for localhost and 127.0.0.1 with its PEM
// forms.
func selfSigned(t testing.TB, cn string) (tls.Certificate, []byte, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		DNSNames:     []string{"localhost", cn},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	return cert, certPEM, keyPEM
}

// parsePolicies reads policies and exceptions from YAML documents.
func parsePolicies(t testing.TB, yamls ...string) ([]*policy.Policy, []*policy.Exception) {
	t.Helper()
	var ps []*policy.Policy
	var es []*policy.Exception
	for _, y := range yamls {
		docs, err := policy.Parse([]byte(y), "test")
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, docs.Policies...)
		es = append(es, docs.Exceptions...)
	}
	return ps, es
}

// staticSource compiles YAML policies into a StaticSource.
func staticSource(t testing.TB, yamls ...string) *StaticSource {
	t.Helper()
	eng, err := engine.New()
	if err != nil {
		t.Fatal(err)
	}
	ps, es := parsePolicies(t, yamls...)
	src := NewStaticSource(eng, ps, es, testLogger(t))
	if len(src.Invalid()) > 0 {
		t.Fatalf("invalid test policies: %v", src.Invalid())
	}
	return src
}

// testConfig is the default configuration without shutdown delays.
func testConfig(mods ...func(*Config)) Config {
	cfg := DefaultConfig()
	cfg.ShutdownDelay = 0
	cfg.ShutdownGracePeriod = 5 * time.Second
	cfg.FlushTimeout = time.Second
	for _, m := range mods {
		m(&cfg)
	}
	return cfg
}

// harness is a Server behind an httptest TLS server, with in-memory sinks
// and its own metrics registry.
type harness struct {
	t       testing.TB
	s       *Server
	url     string
	client  *http.Client
	results *MemoryResultSink
	work    *MemoryWorkSink
	reg     *prometheus.Registry
}

func newHarness(t testing.TB, src PolicySource, cfg Config, opts ...Option) *harness {
	t.Helper()
	cert, _, _ := selfSigned(t, "webhook.test")
	h := &harness{t: t, results: &MemoryResultSink{}, work: &MemoryWorkSink{}, reg: prometheus.NewRegistry()}
	base := []Option{
		WithPolicySource(src),
		WithCertSource(certs.Static(cert)),
		WithResultSink(h.results),
		WithWorkSink(h.work),
		WithRegistry(h.reg),
		WithLogger(testLogger(t)),
		WithClock(func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }),
	}
	s, err := New(cfg, append(base, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewUnstartedServer(s.Handler())
	ts.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	ts.StartTLS()
	t.Cleanup(ts.Close)
	h.s, h.url, h.client = s, ts.URL, ts.Client()
	return h
}

// post sends a body and returns the status and the body of the answer.
func (h *harness) post(path, contentType string, body []byte) (int, []byte) {
	h.t.Helper()
	req, err := http.NewRequest(http.MethodPost, h.url+path, bytes.NewReader(body))
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := h.client.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return resp.StatusCode, out
}

// admit sends an AdmissionReview and returns its response.
func (h *harness) admit(path string, ar *admissionv1.AdmissionReview) *admissionv1.AdmissionResponse {
	h.t.Helper()
	body, err := json.Marshal(ar)
	if err != nil {
		h.t.Fatal(err)
	}
	code, out := h.post(path, "application/json", body)
	if code != http.StatusOK {
		h.t.Fatalf("%s: status %d: %s", path, code, out)
	}
	var got admissionv1.AdmissionReview
	if err := json.Unmarshal(out, &got); err != nil {
		h.t.Fatalf("decode answer: %v: %s", err, out)
	}
	if got.APIVersion != admissionAPIVersion || got.Kind != admissionKind || got.Response == nil {
		h.t.Fatalf("answer is not an AdmissionReview response: %s", out)
	}
	if got.Response.UID != ar.Request.UID {
		h.t.Fatalf("answer uid %q, want %q", got.Response.UID, ar.Request.UID)
	}
	return got.Response
}

// counter reads one sample of a counter from the registry (0 if absent).
func counter(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) float64 {
	t.Helper()
	mfs, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelsMatch(m, labels) {
				switch {
				case m.Counter != nil:
					return m.Counter.GetValue()
				case m.Gauge != nil:
					return m.Gauge.GetValue()
				}
			}
		}
	}
	return 0
}

func labelsMatch(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// obj decodes one YAML object.
func obj(t testing.TB, y string) map[string]any {
	t.Helper()
	docs, err := document.DecodeAll([]byte(y))
	if err != nil || len(docs) != 1 {
		t.Fatalf("decode %q: %v", y, err)
	}
	return docs[0].Object
}

// pod builds a Pod with modifiers.
func pod(name string, mods ...func(map[string]any)) map[string]any {
	p := map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"name": name, "namespace": "default", "uid": "uid-" + name, "resourceVersion": "7"},
		"spec": map[string]any{
			"containers": []any{map[string]any{"name": "app", "image": "registry.example.com/app:v1"}},
		},
	}
	for _, m := range mods {
		m(p)
	}
	return p
}

// privileged makes the pod's first container privileged.
func privileged(p map[string]any) {
	c := p["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	c["securityContext"] = map[string]any{"privileged": true}
}

// inNamespace moves the object to a namespace.
func inNamespace(ns string) func(map[string]any) {
	return func(p map[string]any) { p["metadata"].(map[string]any)["namespace"] = ns }
}

// reviewOf builds an AdmissionReview request for an object, with
// modifiers of the request.
func reviewOf(t testing.TB, op admissionv1.Operation, object map[string]any, mods ...func(*admissionv1.AdmissionRequest)) *admissionv1.AdmissionReview {
	t.Helper()
	req := &admissionv1.AdmissionRequest{
		UID:       types.UID("req-" + document.String(object, "metadata", "name")),
		Operation: op,
		Name:      document.String(object, "metadata", "name"),
		Namespace: document.String(object, "metadata", "namespace"),
		UserInfo:  authenticationv1.UserInfo{Username: "alice", UID: "u-1", Groups: []string{"dev", "system:authenticated"}},
	}
	apiVersion := document.String(object, "apiVersion")
	g, v, found := strings.Cut(apiVersion, "/")
	if !found {
		g, v = "", apiVersion
	}
	req.Kind = metav1.GroupVersionKind{Group: g, Version: v, Kind: document.String(object, "kind")}
	if op == admissionv1.Create {
		object = withoutResourceVersion(object)
	}
	raw, err := json.Marshal(object)
	if err != nil {
		t.Fatal(err)
	}
	if op == admissionv1.Delete {
		req.OldObject = runtime.RawExtension{Raw: raw}
	} else {
		req.Object = runtime.RawExtension{Raw: raw}
	}
	for _, m := range mods {
		m(req)
	}
	return &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionAPIVersion, Kind: admissionKind},
		Request:  req,
	}
}

// withoutResourceVersion is object without metadata.resourceVersion, as
// the API server sends the object of a CREATE (it is given one when it is
// stored, after admission).
func withoutResourceVersion(object map[string]any) map[string]any {
	meta, ok := object["metadata"].(map[string]any)
	if _, has := meta["resourceVersion"]; !ok || !has {
		return object
	}
	out, m := maps.Clone(object), maps.Clone(meta)
	delete(m, "resourceVersion")
	out["metadata"] = m
	return out
}

// dryRun marks the request as a dry run.
func dryRun(r *admissionv1.AdmissionRequest) {
	b := true
	r.DryRun = &b
}

// panicSource panics on every Set.
type panicSource struct{}

func (panicSource) Set(context.Context) (*engine.Set, error) { panic("policy cache corrupted") }
func (panicSource) Invalid() []PolicyError                   { return nil }

// serving is a Server serving TLS on a loopback port (no probe listener).
type serving struct {
	addr   string
	cancel context.CancelFunc
	done   chan error
}

// serve starts s.Serve; cancel begins its shutdown and done gets Serve's
// error. The test's cleanup stops it if the test did not.
func serve(t testing.TB, s *Server) *serving {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	sv := &serving{addr: ln.Addr().String(), cancel: cancel, done: make(chan error, 1)}
	go func() { sv.done <- s.Serve(ctx, ln, nil) }()
	t.Cleanup(cancel)
	return sv
}
