package ocitest_test

import (
	"crypto/tls"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
)

func TestRegistryPushAndCount(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	if !strings.HasPrefix(reg.Host(), "127.0.0.1:") {
		t.Errorf("host = %q", reg.Host())
	}
	img := reg.PushImage(t, "team/app", "v1")
	if img.Tag != reg.Host()+"/team/app:v1" || img.Ref != reg.Host()+"/team/app@"+img.Digest || img.Repo != "team/app" {
		t.Errorf("image = %+v", img)
	}
	reg.ResetLog()

	got, err := remote.Image(parse(t, img.Tag), reg.RemoteOptions()...)
	if err != nil {
		t.Fatalf("pull: %v", err)
	}
	d, err := got.Digest()
	if err != nil || d.String() != img.Digest {
		t.Fatalf("pulled digest %v, %v, want %s", d, err, img.Digest)
	}
	if n := reg.ManifestFetches("team/app", "v1"); n != 1 {
		t.Errorf("manifest v1 fetched %d times, want 1: %v", n, reg.Requests())
	}
	cfg, err := got.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := got.RawConfigFile(); err != nil {
		t.Fatal(err)
	}
	if n := reg.BlobFetches("team/app", cfg.String()); n != 1 {
		t.Errorf("config blob fetched %d times, want 1: %v", n, reg.Requests())
	}
	if n := reg.Fetches("team/app"); n != 2 {
		t.Errorf("%d fetches in team/app, want 2: %v", n, reg.Requests())
	}
	if n := reg.Fetches("other"); n != 0 {
		t.Errorf("%d fetches in other, want 0", n)
	}
}

func TestRegistryIndex(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	idx := reg.PushIndex(t, "multi", "latest")
	ii, err := remote.Index(parse(t, idx.Tag), reg.RemoteOptions()...)
	if err != nil {
		t.Fatalf("pull index: %v", err)
	}
	m, err := ii.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Manifests) != 2 || m.Manifests[0].Platform == nil || m.Manifests[1].Platform.Architecture != "arm64" {
		t.Fatalf("index manifests = %+v", m.Manifests)
	}
	for i, c := range idx.Children {
		if m.Manifests[i].Digest.String() != c.Digest {
			t.Errorf("child %d digest %s, want %s", i, c.Digest, m.Manifests[i].Digest)
		}
		if _, err := remote.Image(parse(t, c.Ref), reg.RemoteOptions()...); err != nil {
			t.Errorf("pull child %d: %v", i, err)
		}
	}
}

func TestRegistryFailures(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	img := reg.PushImage(t, "app", "v1")

	reg.FailWhere(func(r ocitest.Request) bool { return r.Kind == ocitest.KindManifest && r.Repo == "app" }, http.StatusServiceUnavailable)
	noRetry := remote.WithRetryBackoff(remote.Backoff{Steps: 1})
	_, err := remote.Image(parse(t, img.Ref), append(reg.RemoteOptions(), noRetry)...)
	var terr *transport.Error
	if !errors.As(err, &terr) || terr.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("pull while failing: %v, want a 503", err)
	}
	reqs := reg.Requests()
	if last := reqs[len(reqs)-1]; last.Status != http.StatusServiceUnavailable || last.Kind != ocitest.KindManifest {
		t.Errorf("last request %+v, want the failed manifest", last)
	}

	reg.FailWith(0)
	if _, err := remote.Image(parse(t, img.Ref), reg.RemoteOptions()...); err != nil {
		t.Fatalf("pull after FailWith(0): %v", err)
	}

	reg.FailWith(http.StatusUnauthorized)
	if _, err := remote.Image(parse(t, img.Ref), reg.RemoteOptions()...); err == nil {
		t.Fatal("pull while every request fails: no error")
	}
	reg.FailWith(0)

	reg.Close()
	if _, err := remote.Image(parse(t, img.Ref), reg.RemoteOptions()...); err == nil {
		t.Fatal("pull from a closed registry: no error")
	}
}

func TestRegistryTLS(t *testing.T) {
	ca := ocitest.NewCA(t)
	reg := ocitest.NewRegistry(t, ocitest.WithTLS(ca))
	if !strings.HasPrefix(reg.URL(), "https://") || reg.RootsPEM() != ca.RootsPEM() {
		t.Fatalf("url %q, roots %q", reg.URL(), reg.RootsPEM())
	}
	img := reg.PushImage(t, "app", "v1")
	key := ocitest.NewKey(t)
	reg.Sign(t, img.Tag, key)
	if _, err := verifyKey(t, reg, img.Ref, key); err != nil {
		t.Fatalf("verify over TLS: %v", err)
	}

	// A client that trusts the system roots only fails; one that skips
	// verification (an "insecure registry") gets through.
	if _, err := remote.Image(parse(t, img.Ref), remote.WithTransport(&http.Transport{})); err == nil {
		t.Fatal("pull without the CA: no error")
	}
	insecure := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // the case under test
	if _, err := remote.Image(parse(t, img.Ref), remote.WithTransport(insecure)); err != nil {
		t.Fatalf("pull skipping verification: %v", err)
	}
}

func TestTamperedSignature(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	signed := reg.PushImage(t, "app", "signed")
	other := reg.PushImage(t, "app", "other")
	key := ocitest.NewKey(t)
	sigTag := reg.Sign(t, signed.Ref, key)
	// The signature of one image copied to the other's signature tag:
	// its payload names the first digest, and the claim check fails.
	reg.Retag(t, sigTag, "app", strings.Replace(other.Digest, ":", "-", 1)+".sig")
	if _, err := verifyKey(t, reg, other.Ref, key); err == nil {
		t.Fatal("verify a copied signature: no error")
	}
	if _, err := verifyKey(t, reg, signed.Ref, key); err != nil {
		t.Fatalf("verify the signed image: %v", err)
	}
}

// TestRegistryBasicAuth: a private registry answers 401 with a Basic
// challenge to an anonymous client, serves one with the user and
// password, and logs who was served; its own helpers authenticate.
func TestRegistryBasicAuth(t *testing.T) {
	reg := ocitest.NewRegistry(t, ocitest.WithBasicAuth("robot", "s3cret"))
	img := reg.PushImage(t, "private/app", "v1") // the helpers authenticate
	ref, err := name.ParseReference(img.Ref)
	if err != nil {
		t.Fatal(err)
	}
	var terr *transport.Error
	if _, err := remote.Head(ref); !errors.As(err, &terr) || terr.StatusCode != http.StatusUnauthorized {
		t.Fatalf("anonymous: %v, want 401", err)
	}
	if _, err := remote.Head(ref, remote.WithAuth(&authn.Basic{Username: "robot", Password: "wrong"})); !errors.As(err, &terr) || terr.StatusCode != http.StatusUnauthorized {
		t.Fatalf("wrong password: %v, want 401", err)
	}
	reg.ResetLog()
	if _, err := remote.Head(ref, remote.WithAuth(&authn.Basic{Username: "robot", Password: "s3cret"})); err != nil {
		t.Fatalf("with the password: %v", err)
	}
	if n := reg.Count(func(r ocitest.Request) bool {
		return r.Kind == ocitest.KindManifest && r.User == "robot" && r.Status == http.StatusOK
	}); n != 1 {
		t.Errorf("%d manifest requests served to robot, want 1: %v", n, reg.Requests())
	}
}
