package bus

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/imageref"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/imageverify"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// TestImageCacheShared: three webhook replicas and the reporter, each a
// verifier with its own memory in front of the shared bucket and its own
// NATS user from deploy/nats/verdict-auth.conf, verify one signed image
// for 100 admissions and scans: the registry sees one verification, and
// no user is refused. With JetStream gone, the cache is a miss within
// its bound and the image is verified against the registry again.
func TestImageCacheShared(t *testing.T) {
	url, seeds := authServer(t)
	reg := ocitest.NewRegistry(t)
	key := ocitest.NewKey(t)
	img := reg.PushImage(t, "team/app", "v1")
	reg.Sign(t, img.Ref, key)

	pem, err := json.Marshal(key.PublicKeyPEM())
	if err != nil {
		t.Fatal(err)
	}
	var iv policy.ImageVerification
	if err := json.Unmarshal([]byte(`{"imageReferences":["*"],"attestors":[{"entries":[{"keys":{"publicKeys":`+string(pem)+
		`,"rekor":{"url":"u","ignoreTlog":true},"ctlog":{"ignoreSCT":true}}}]}]}`), &iv); err != nil {
		t.Fatal(err)
	}
	ref, err := imageref.Parse(img.Tag, imageref.DefaultRegistry, true)
	if err != nil {
		t.Fatal(err)
	}
	req := engine.ImageVerifyRequest{Image: engine.Image{Image: img.Tag, Ref: ref}, Verification: &iv, Policy: "signed", PolicyVersion: "7", Rule: "r"}

	var verifiers []*imageverify.Verifier
	var conns []*queue.Conn
	var metrics []*prometheus.Registry
	for _, user := range []string{"WEBHOOK", "WEBHOOK", "WEBHOOK", "REPORTER"} {
		c, m, err := connectAs(t, url, seeds[user])
		if err != nil {
			t.Fatal(err)
		}
		conns, metrics = append(conns, c), append(metrics, m)
		shared := NewImageCache(func() *queue.Conn { return c }, time.Hour, 1, 1<<20)
		v, err := imageverify.New(imageverify.WithRemoteOptions(reg.RemoteOptions()...),
			imageverify.WithCache(imageverify.Layered(imageverify.NewMemoryCache(time.Hour, 100), shared)))
		if err != nil {
			t.Fatal(err)
		}
		verifiers = append(verifiers, v)
	}
	plain, err := imageverify.New(imageverify.WithRemoteOptions(reg.RemoteOptions()...))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	reg.ResetLog()
	if res, err := plain.Verify(ctx, req); err != nil || !res.Verified {
		t.Fatal(res, err)
	}
	one := reg.Fetches("team/app")

	// The first admission verifies; its entry reaches the bucket in the
	// background (a Put never delays an admission), before the next
	// admissions, which come over seconds in a cluster.
	reg.ResetLog()
	if res, err := verifiers[0].Verify(ctx, req); err != nil || !res.Verified {
		t.Fatal(res, err)
	}
	cacheKey, err := imageverify.CacheKey(req)
	if err != nil {
		t.Fatal(err)
	}
	shared := NewImageCache(func() *queue.Conn { return conns[3] }, time.Hour, 1, 1<<20)
	testkit.EventuallyTrue(t, 5*time.Second, "the verification in the shared bucket", func() bool {
		_, ok, _ := shared.Get(ctx, cacheKey)
		return ok
	})
	for i := range 100 {
		res, err := verifiers[i%len(verifiers)].Verify(ctx, req)
		if err != nil || !res.Verified || res.Digest != img.Digest {
			t.Fatalf("admission %d: %+v, %v", i, res, err)
		}
	}
	if n := reg.Fetches("team/app"); n != one {
		t.Errorf("100 admissions over 4 replicas made %d registry requests; one verification makes %d", n, one)
	}
	time.Sleep(200 * time.Millisecond) // asynchronous refusals arrive
	for i, m := range metrics {
		if n := refusals(t, m); n != 0 {
			t.Errorf("replica %d's NATS user was refused %v times using the shared cache", i, n)
		}
	}

	// JetStream gone: a new key misses within the bound, and the image
	// is verified against the registry.
	for _, c := range conns {
		c.Close()
	}
	other := req
	other.PolicyVersion = "8"
	start := time.Now()
	res, err := verifiers[0].Verify(ctx, other)
	if err != nil || !res.Verified || res.Cached {
		t.Fatalf("with JetStream gone: %+v, %v", res, err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("a verification with JetStream gone took %s", d)
	}
}
