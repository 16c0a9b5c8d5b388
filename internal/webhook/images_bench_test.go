package webhook

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/imageverify"
)

// imageBench is a webhook verifying images against a registry in the
// benchmark's process: a ClusterPolicy requiring the images of the
// registry's trusted/ path to be signed by a key and pinning them to
// their digests, and a signed image.
type imageBench struct {
	h      *harness
	review []byte
	pinned string
}

func newImageBench(b *testing.B, useCache bool) *imageBench {
	b.Helper()
	reg := ocitest.NewRegistry(b)
	key := ocitest.NewKey(b)
	img := reg.PushImage(b, "trusted/app", "v1")
	reg.Sign(b, img.Ref, key)
	k, err := json.Marshal(key.PublicKeyPEM())
	if err != nil {
		b.Fatal(err)
	}
	cache := "true"
	if !useCache {
		cache = "false"
	}
	dir := b.TempDir()
	policy := `{"apiVersion":"kyverno.io/v1","kind":"ClusterPolicy","metadata":{"name":"signed-images"},
"spec":{"validationFailureAction":"Enforce","webhookTimeoutSeconds":15,"rules":[{"name":"signed",
"match":{"any":[{"resources":{"kinds":["Pod"]}}]},
"verifyImages":[{"imageReferences":["` + reg.Host() + `/trusted/*"],"useCache":` + cache + `,"attestors":[{"entries":[{"keys":{"publicKeys":` + string(k) + `,
"rekor":{"url":"https://rekor.example","ignoreTlog":true},"ctlog":{"ignoreSCT":true}}}]}]}]}]}}`
	if err := os.WriteFile(filepath.Join(dir, "policy.json"), []byte(policy), 0o600); err != nil {
		b.Fatal(err)
	}
	v, err := imageverify.New(imageverify.WithRemoteOptions(reg.RemoteOptions()...), imageverify.WithCache(imageverify.NewMemoryCache(time.Hour, 1000)))
	if err != nil {
		b.Fatal(err)
	}
	eng, err := engine.New(engine.WithImageVerifier(v))
	if err != nil {
		b.Fatal(err)
	}
	src, err := LoadStaticSource(eng, []string{dir}, testLogger(b), nil)
	if err != nil || len(src.Invalid()) > 0 {
		b.Fatalf("policy: %v %v", err, src.Invalid())
	}
	h := newHarness(b, src, testConfig(func(c *Config) { c.UnverifiedResultsPerSecond, c.UnverifiedWorkPerSecond = 0, 0 }),
		WithEngineOptions(engine.WithImageVerifier(v)))
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "app", "namespace": "team"},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": img.Tag}}}}
	return &imageBench{h: h, review: mustJSON(b, reviewOf(b, admissionv1.Create, pod)), pinned: img.Tag + "@" + img.Digest}
}

// admit posts the review to /mutate and checks that the image was
// verified and pinned.
func (ib *imageBench) admit(b *testing.B) {
	code, body := ib.h.post(PathMutate, "application/json", ib.review)
	if code != 200 {
		b.Fatalf("status %d: %s", code, body)
	}
	var ar admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &ar); err != nil {
		b.Fatal(err)
	}
	if ar.Response == nil || !ar.Response.Allowed || !strings.Contains(string(ar.Response.Patch), ib.pinned) {
		b.Fatalf("not admitted and pinned to %s: %s", ib.pinned, body)
	}
}

// BenchmarkAdmitSignedImage is one /mutate round trip (TLS) of a Pod whose
// image, named by tag, a verifyImages rule verifies (a cosign key
// signature) and pins to its digest, against a registry in the
// benchmark's process on loopback:
//
//   - cached: the verification is kept, as on every replica once one of
//     them verified the image (the steady state);
//
//   - uncached: the entry says useCache: false, so every admission
//     verifies against the registry (the manifest, the signature and its
//     layer): what a cold cache costs, less a real registry's distance.
//
//     go test -run '^$' -bench BenchmarkAdmitSignedImage -benchmem ./internal/webhook/
func BenchmarkAdmitSignedImage(b *testing.B) {
	for _, c := range []struct {
		name  string
		cache bool
	}{{"cached", true}, {"uncached", false}} {
		b.Run(c.name, func(b *testing.B) {
			ib := newImageBench(b, c.cache)
			ib.admit(b) // the first verification, outside the measure
			for b.Loop() {
				ib.admit(b)
			}
		})
	}
}
