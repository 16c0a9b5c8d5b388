package platform_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/platform/policyhttp"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/imageref"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// TestRegistriesBlocklist: a policy names the registry, so registry
// calls go through the blocklist: with the defaults, a registry on the
// loopback (or the metadata service's addresses) is refused before a
// byte is sent, and counted as an error (no verdict), never a pass;
// replacing the list lets an operator allow it. A CA file without a
// certificate is a configuration error.
func TestRegistriesBlocklist(t *testing.T) {
	ca := ocitest.NewCA(t)
	reg := ocitest.NewRegistry(t, ocitest.WithTLS(ca))
	img := reg.PushImage(t, "team/app", "v1")
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, []byte(reg.RootsPEM()), 0o600); err != nil {
		t.Fatal(err)
	}
	ref, err := imageref.Parse(img.Tag, imageref.DefaultRegistry, true)
	if err != nil {
		t.Fatal(err)
	}
	req := engine.ImageVerifyRequest{Image: engine.Image{Image: img.Tag, Ref: ref}}

	cfg := platform.DefaultRegistries()
	cfg.CAFile = caFile
	v, err := cfg.Verifier(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := len(reg.Requests())
	if _, err := v.ResolveDigest(t.Context(), req); !errors.Is(err, policyhttp.ErrBlocked) {
		t.Fatalf("loopback registry with the default blocklist: %v, want ErrBlocked", err)
	}
	if n := len(reg.Requests()) - before; n != 0 {
		t.Errorf("the blocked registry received %d requests", n)
	}

	cfg.Blocklist = []string{"169.254.0.0/16"}
	if v, err = cfg.Verifier(nil, nil, nil); err != nil {
		t.Fatal(err)
	}
	if d, err := v.ResolveDigest(t.Context(), req); err != nil || d != img.Digest {
		t.Fatalf("allowed registry: %q, %v; want %s", d, err, img.Digest)
	}

	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg.CAFile = empty
	if _, err := cfg.Verifier(nil, nil, nil); !errors.Is(err, platform.ErrInvalidConfig) {
		t.Errorf("a CA file without a certificate: %v, want ErrInvalidConfig", err)
	}
}

// TestRegistriesMetrics: the verifier's metrics count verifications by
// outcome and whether they came from the cache, cache hits and misses,
// and time registry requests by status class, with no registry or image
// in any label; a second verifier on one registry is refused.
func TestRegistriesMetrics(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	key := ocitest.NewKey(t)
	signed := reg.PushImage(t, "team/app", "v1")
	reg.Sign(t, signed.Ref, key)
	unsigned := reg.PushImage(t, "team/unsigned", "v1")
	cfg := platform.DefaultRegistries()
	cfg.Blocklist = []string{}
	metrics := prometheus.NewRegistry()
	v, err := cfg.Verifier(metrics, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	entry := &policy.ImageVerification{ImageReferences: []string{"*"}, Attestors: []policy.AttestorSet{{Entries: []policy.Attestor{{Keys: &policy.StaticKeyAttestor{
		PublicKeys: key.PublicKeyPEM(), Rekor: &policy.Rekor{IgnoreTlog: true}, CTLog: &policy.CTLog{IgnoreSCT: true}}}}}}}
	verify := func(image string) engine.ImageVerifyResult {
		t.Helper()
		ref, err := imageref.Parse(image, imageref.DefaultRegistry, true)
		if err != nil {
			t.Fatal(err)
		}
		res, _ := v.Verify(t.Context(), engine.ImageVerifyRequest{Image: engine.Image{Image: image, Ref: ref}, Verification: entry, Policy: "p", Rule: "r"})
		return res
	}
	if res := verify(signed.Tag); !res.Verified || res.Cached {
		t.Fatalf("signed: %+v", res)
	}
	if res := verify(signed.Tag); !res.Verified || !res.Cached {
		t.Fatalf("signed again: %+v, want it from the cache", res)
	}
	if res := verify(unsigned.Tag); res.Verified {
		t.Fatalf("unsigned: %+v", res)
	}
	reg.Close()
	verify(reg.Host() + "/team/other:v1")

	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"verdict_image_verifications_total", map[string]string{"outcome": "pass", "cached": "false"}, 1},
		{"verdict_image_verifications_total", map[string]string{"outcome": "pass", "cached": "true"}, 1},
		{"verdict_image_verifications_total", map[string]string{"outcome": "fail", "cached": "false"}, 1},
		{"verdict_image_verifications_total", map[string]string{"outcome": "error", "cached": "false"}, 1},
		{"verdict_image_verifications_total", map[string]string{"outcome": "unsupported", "cached": "false"}, 0},
		{"verdict_image_verification_cache_lookups_total", map[string]string{"result": "hit"}, 1},
		{"verdict_image_verification_cache_lookups_total", map[string]string{"result": "miss"}, 3},
		{"verdict_image_verification_duration_seconds", map[string]string{"outcome": "pass"}, 2},
	} {
		if got, ok := testkit.MetricValue(t, metrics, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	if n, _ := testkit.MetricValue(t, metrics, "verdict_registry_request_duration_seconds", map[string]string{"method": "GET", "code": "2xx"}); n < 2 {
		t.Errorf("registry GET requests answered 2xx: %v, want the signatures' and manifests' fetches", n)
	}
	if n, _ := testkit.MetricValue(t, metrics, "verdict_registry_request_duration_seconds", map[string]string{"code": "error"}); n < 1 {
		t.Errorf("registry requests without an answer: %v, want the closed registry's", n)
	}
	if _, err := cfg.Verifier(metrics, nil, nil); !errors.Is(err, platform.ErrInvalidConfig) {
		t.Errorf("a second verifier on one metrics registry: %v, want ErrInvalidConfig", err)
	}
}

// TestRegistriesTrustedRoot: --sigstore-trusted-root gives the verifier
// the operator's trusted root: a keyless policy without roots verifies
// against its CA and log; a file that is not a trusted root is a
// configuration error naming the flag, not a verifier without it.
func TestRegistriesTrustedRoot(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	ca, log := ocitest.NewCA(t), ocitest.NewRekorLog(t)
	img := reg.PushImage(t, "team/app", "v1")
	reg.Sign(t, img.Ref, ca.Issue(t, ocitest.Identity{Email: "dev@example.com", Issuer: "https://issuer.example"}), ocitest.InRekor(log))
	dir := t.TempDir()
	good, bad := filepath.Join(dir, "trusted_root.json"), filepath.Join(dir, "bad.json")
	if err := os.WriteFile(good, ocitest.TrustedRoot(t, ca, log), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte(`{"mediaType":"text/plain"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := platform.DefaultRegistries()
	r.Blocklist = []string{}
	r.SigstoreTrustedRoot = bad
	if _, err := r.Verifier(nil, nil, nil); !errors.Is(err, platform.ErrInvalidConfig) {
		t.Errorf("a file that is not a trusted root: %v, want ErrInvalidConfig", err)
	}
	r.SigstoreTrustedRoot = good
	v, err := r.Verifier(nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := imageref.Parse(img.Tag, "docker.io", true)
	if err != nil {
		t.Fatal(err)
	}
	iv := &policy.ImageVerification{ImageReferences: []string{"*"}, Attestors: []policy.AttestorSet{{Entries: []policy.Attestor{{
		Keyless: &policy.KeylessAttestor{Subject: "dev@example.com", Issuer: "https://issuer.example", CTLog: &policy.CTLog{IgnoreSCT: true}},
	}}}}}
	res, err := v.Verify(t.Context(), engine.ImageVerifyRequest{Image: engine.Image{Image: img.Tag, Ref: ref}, Verification: iv, Policy: "p", Rule: "r"})
	if err != nil || !res.Verified {
		t.Errorf("keyless without roots, the trusted root's CA and log: %+v, %v", res, err)
	}
}
