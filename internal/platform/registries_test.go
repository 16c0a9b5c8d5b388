package platform_test

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/platform/policyhttp"
	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/imageref"
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
	v, err := cfg.Verifier()
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
	if v, err = cfg.Verifier(); err != nil {
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
	if _, err := cfg.Verifier(); !errors.Is(err, platform.ErrInvalidConfig) {
		t.Errorf("a CA file without a certificate: %v, want ErrInvalidConfig", err)
	}
}
