package imageverify_test

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	"github.com/verdict-dev/verdict/pkg/imageverify"
)

// TestVerifyTransparencyLog: with rekor.pubkey, the transparency log is
// checked offline: a signature carrying its log entry, whose SET the
// log's key verifies, passes; one without an entry, one whose entry
// another log signed, and one whose entry records another signature
// fail; without rekor.pubkey (the public Rekor) the check is
// unsupported, never skipped.
func TestVerifyTransparencyLog(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	key := ocitest.NewKey(t)
	log, otherLog := ocitest.NewRekorLog(t), ocitest.NewRekorLog(t)
	logged := reg.PushImage(t, "team/logged", "v1")
	reg.Sign(t, logged.Ref, key, ocitest.InRekor(log))
	unlogged := reg.PushImage(t, "team/unlogged", "v1")
	reg.Sign(t, unlogged.Ref, key)
	elsewhere := reg.PushImage(t, "team/elsewhere", "v1")
	reg.Sign(t, elsewhere.Ref, key, ocitest.InRekor(otherLog))
	ca := ocitest.NewCA(t)
	keyless := reg.PushImage(t, "team/keyless", "v1")
	reg.Sign(t, keyless.Ref, ca.Issue(t, ocitest.Identity{Email: "dev@example.com", Issuer: "https://issuer.example"}), ocitest.InRekor(log))
	v, err := imageverify.New(imageverify.WithRemoteOptions(append(reg.RemoteOptions(), remote.WithRetryBackoff(remote.Backoff{Steps: 1}))...))
	if err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	withLog := func(rekor string) string {
		return `{"imageReferences":["*"],"attestors":[{"entries":[{"keys":{"publicKeys":` + q(key.PublicKeyPEM()) + `,"rekor":` + rekor + `,"ctlog":{"ignoreSCT":true}}}]}]}`
	}
	ours := withLog(`{"url":"https://rekor.internal.example","pubkey":` + q(log.PublicKeyPEM()) + `}`)
	res, err := v.Verify(t.Context(), request(t, logged.Tag, entry(t, ours)))
	if err != nil || !res.Verified || res.Digest != logged.Digest {
		t.Fatalf("a logged signature: %+v, %v", res, err)
	}
	for name, image := range map[string]string{"no log entry": unlogged.Tag, "another log's entry": elsewhere.Tag} {
		res, err := v.Verify(t.Context(), request(t, image, entry(t, ours)))
		if err != nil || res.Verified || !strings.HasPrefix(res.Message, "failed to verify image "+image+": .attestors[0].entries[0].keys: ") {
			t.Errorf("%s: %+v, %v; want a failure", name, res, err)
		}
		t.Logf("%s: %s", name, res.Message)
	}
	// Keyless: the certificate's validity is checked at the entry's time.
	kl := `{"imageReferences":["*"],"attestors":[{"entries":[{"keyless":{"roots":` + q(ca.RootsPEM()) + `,"subject":"dev@example.com","issuer":"https://issuer.example",` +
		`"rekor":{"pubkey":` + q(log.PublicKeyPEM()) + `},"ctlog":{"ignoreSCT":true}}}]}]}`
	if res, err := v.Verify(t.Context(), request(t, keyless.Tag, entry(t, kl))); err != nil || !res.Verified {
		t.Errorf("a logged keyless signature: %+v, %v", res, err)
	}
	if _, err := v.Verify(t.Context(), request(t, logged.Tag, entry(t, withLog(`{"url":"https://rekor.sigstore.dev"}`)))); !errors.Is(err, imageverify.ErrUnsupported) {
		t.Errorf("the public Rekor: %v, want an unsupported error", err)
	}
}

// TestVerifyTrustedRoot: with the operator's Sigstore trusted root, the
// checks that need the public instance's keys are made offline: a
// keyless signature without roots chains to the root's Fulcio CA, and
// its log entry verifies with the root's Rekor log (the policy's
// defaults: transparency log on); a signature without an entry fails,
// and a policy's own roots are never widened to the trusted root's CA.
// Without a trusted root, the same policy is unsupported.
func TestVerifyTrustedRoot(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	fulcio, other := ocitest.NewCA(t, ocitest.WithIntermediate()), ocitest.NewCA(t)
	log := ocitest.NewRekorLog(t)
	id := ocitest.Identity{Email: "dev@example.com", Issuer: "https://issuer.example"}
	logged := reg.PushImage(t, "team/logged", "v1")
	reg.Sign(t, logged.Ref, fulcio.Issue(t, id), ocitest.InRekor(log))
	unlogged := reg.PushImage(t, "team/unlogged", "v1")
	reg.Sign(t, unlogged.Ref, fulcio.Issue(t, id))
	key := ocitest.NewKey(t)
	keyed := reg.PushImage(t, "team/keyed", "v1")
	reg.Sign(t, keyed.Ref, key, ocitest.InRekor(log))

	path := t.TempDir() + "/trusted_root.json"
	if err := os.WriteFile(path, ocitest.TrustedRoot(t, fulcio, log), 0o600); err != nil {
		t.Fatal(err)
	}
	tm, err := imageverify.LoadTrustedRoot(path)
	if err != nil {
		t.Fatal(err)
	}
	opts := append(reg.RemoteOptions(), remote.WithRetryBackoff(remote.Backoff{Steps: 1}))
	v, err := imageverify.New(imageverify.WithRemoteOptions(opts...), imageverify.WithTrustedRoot(tm))
	if err != nil {
		t.Fatal(err)
	}
	q := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	keyless := func(extra string) string {
		return `{"imageReferences":["*"],"attestors":[{"entries":[{"keyless":{"subject":"dev@example.com","issuer":"https://issuer.example",` + extra + `"ctlog":{"ignoreSCT":true}}}]}]}`
	}
	if res, err := v.Verify(t.Context(), request(t, logged.Tag, entry(t, keyless("")))); err != nil || !res.Verified || res.Digest != logged.Digest {
		t.Fatalf("keyless, logged, the trusted root's CA and log: %+v, %v", res, err)
	}
	if res, err := v.Verify(t.Context(), request(t, unlogged.Tag, entry(t, keyless("")))); err != nil || res.Verified {
		t.Errorf("keyless without a log entry: %+v, %v; want a failure", res, err)
	}
	if res, err := v.Verify(t.Context(), request(t, logged.Tag, entry(t, keyless(`"roots":`+q(other.RootsPEM())+`,`)))); err != nil || res.Verified {
		t.Errorf("the policy's own roots, another CA: %+v, %v; want a failure", res, err)
	}
	if res, err := v.Verify(t.Context(), request(t, logged.Tag, entry(t, keyless(`"roots":`+q(fulcio.RootsPEM())+`,`)))); err != nil || !res.Verified {
		t.Errorf("the policy's own roots, the signer's CA, the trusted root's log: %+v, %v", res, err)
	}
	byKey := `{"imageReferences":["*"],"attestors":[{"entries":[{"keys":{"publicKeys":` + q(key.PublicKeyPEM()) + `}}]}]}`
	if res, err := v.Verify(t.Context(), request(t, keyed.Tag, entry(t, byKey))); err != nil || !res.Verified {
		t.Errorf("a key, the log by default: %+v, %v", res, err)
	}

	bare, err := imageverify.New(imageverify.WithRemoteOptions(opts...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bare.Verify(t.Context(), request(t, logged.Tag, entry(t, keyless("")))); !errors.Is(err, imageverify.ErrUnsupported) {
		t.Errorf("without a trusted root: %v, want an unsupported error", err)
	}
}
