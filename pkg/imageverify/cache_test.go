package imageverify_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/imageverify"
)

// TestVerifyCache: with a cache, twenty admissions of one signed image
// at once reach the registry as one verification; the next is answered
// from the cache ("verified from cache", with the digest verified), and
// so is the image pinned to that digest; an entry with other attestors, or useCache false, is verified again; a
// failure is never kept, so an image signed later passes at once.
func TestVerifyCache(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	key, other := ocitest.NewKey(t), ocitest.NewKey(t)
	img := reg.PushImage(t, "team/app", "v1")
	reg.Sign(t, img.Ref, key)
	later := reg.PushImage(t, "team/later", "v1")
	cache := imageverify.NewMemoryCache(time.Hour, 100)
	v, err := imageverify.New(imageverify.WithRemoteOptions(reg.RemoteOptions()...), imageverify.WithCache(cache))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	e := entry(t, keysEntry(key.PublicKeyPEM()))
	verifications := func() int { return reg.Fetches("team/app") }

	// What one verification costs the registry, without a cache.
	plain, err := imageverify.New(imageverify.WithRemoteOptions(reg.RemoteOptions()...))
	if err != nil {
		t.Fatal(err)
	}
	reg.ResetLog()
	if res, err := plain.Verify(ctx, request(t, img.Tag, e)); err != nil || !res.Verified {
		t.Fatal(res, err)
	}
	single := verifications()
	if single == 0 {
		t.Fatal("no registry request counted")
	}

	reg.ResetLog()
	var wg sync.WaitGroup
	results := make([]engine.ImageVerifyResult, 20)
	errs := make([]error, 20)
	for i := range results {
		wg.Go(func() { results[i], errs[i] = v.Verify(ctx, request(t, img.Tag, e)) })
	}
	wg.Wait()
	for i := range results {
		if errs[i] != nil || !results[i].Verified || results[i].Digest != img.Digest {
			t.Fatalf("admission %d: %+v, %v", i, results[i], errs[i])
		}
	}
	if n := verifications(); n != single {
		t.Errorf("20 concurrent admissions made %d registry requests, one verification makes %d", n, single)
	}

	res, err := v.Verify(ctx, request(t, img.Tag, e))
	if err != nil || !res.Cached || res.Message != "verified from cache" || res.Digest != img.Digest {
		t.Fatalf("cached: %+v, %v", res, err)
	}
	// The image pinned to the digest verified (what mutateDigest makes of
	// it) is verified too.
	res, err = v.Verify(ctx, request(t, img.Tag+"@"+img.Digest, e))
	if err != nil || !res.Cached || res.Digest != img.Digest {
		t.Fatalf("pinned to the digest verified: %+v, %v; want it from the cache", res, err)
	}
	if n := verifications(); n != single {
		t.Errorf("the pinned image reached the registry: %d requests, want %d", n, single)
	}

	reg.ResetLog()
	if res, err := v.Verify(ctx, request(t, img.Tag, entry(t, keysEntry(other.PublicKeyPEM())))); err != nil || res.Verified || res.Cached {
		t.Errorf("other attestors: %+v, %v; want verified again, and failing", res, err)
	}
	noCache := entry(t, `{"imageReferences":["*"],"useCache":false,"attestors":[{"entries":[{"keys":{"publicKeys":`+quote(key.PublicKeyPEM())+
		`,"rekor":{"url":"u","ignoreTlog":true},"ctlog":{"ignoreSCT":true}}}]}]}`)
	if res, err := v.Verify(ctx, request(t, img.Tag, noCache)); err != nil || !res.Verified || res.Cached {
		t.Errorf("useCache false: %+v, %v", res, err)
	}
	if verifications() == 0 {
		t.Error("other attestors and useCache false made no registry request")
	}

	if res, err := v.Verify(ctx, request(t, later.Tag, e)); err != nil || res.Verified {
		t.Fatalf("unsigned: %+v, %v", res, err)
	}
	reg.Sign(t, later.Ref, key)
	if res, err := v.Verify(ctx, request(t, later.Tag, e)); err != nil || !res.Verified || res.Cached {
		t.Errorf("signed after a failure: %+v, %v; want verified (a failure is not kept)", res, err)
	}
}

// TestMemoryCacheBounds: entries expire, and a full cache drops the
// entry closest to expiry.
func TestMemoryCacheBounds(t *testing.T) {
	ctx := t.Context()
	c := imageverify.NewMemoryCache(50*time.Millisecond, 2)
	for _, k := range []string{"a", "b", "c"} {
		if err := c.Put(ctx, k, "sha256:"+k); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Millisecond)
	}
	if c.Len() != 2 {
		t.Errorf("%d entries, want 2", c.Len())
	}
	if _, ok, _ := c.Get(ctx, "a"); ok {
		t.Error("the oldest entry was kept in a full cache")
	}
	if d, ok, _ := c.Get(ctx, "c"); !ok || d != "sha256:c" {
		t.Errorf("c: %q %v", d, ok)
	}
	time.Sleep(60 * time.Millisecond)
	if _, ok, _ := c.Get(ctx, "c"); ok {
		t.Error("an expired entry was returned")
	}
}
