package imageverify_test

import (
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	"github.com/verdict-dev/verdict/pkg/imageverify"
)

// TestResponseBudget: through WithTransport, what the registry answers
// one verification is counted; past the budget the verification stops
// with no verdict (an error), so a hostile image's thousand-layer
// signature cannot fill the memory; each verification has a budget of
// its own.
func TestResponseBudget(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	key := ocitest.NewKey(t)
	img := reg.PushImage(t, "team/app", "v1")
	reg.Sign(t, img.Ref, key)
	e := entry(t, keysEntry(key.PublicKeyPEM()))

	roomy, err := imageverify.New(imageverify.WithTransport(reg.Transport()))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if res, err := roomy.Verify(t.Context(), request(t, img.Tag, e)); err != nil || !res.Verified {
			t.Fatalf("verification %d within the default budget: %+v, %v", i, res, err)
		}
	}

	tight, err := imageverify.New(imageverify.WithTransport(reg.Transport()), imageverify.WithMaxResponseBytes(300))
	if err != nil {
		t.Fatal(err)
	}
	res, err := tight.Verify(t.Context(), request(t, img.Tag, e))
	if err == nil || !strings.Contains(err.Error(), "registry responses exceed the verification's budget (300 bytes)") {
		t.Fatalf("past the budget: %+v, %v; want an error", res, err)
	}
	if _, err := imageverify.New(imageverify.WithMaxResponseBytes(0)); err == nil {
		t.Error("a budget of 0 bytes accepted")
	}
}
