package imageverify_test

import (
	"context"
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/imageverify"
)

// TestDockerConfigKeychain: the credentials of image pull Secrets, in
// both of their forms, are given to the registry they name (host and
// port, Docker Hub under any of its names) and to no other; a malformed
// configuration is an error that quotes none of it.
func TestDockerConfigKeychain(t *testing.T) {
	auth := base64.StdEncoding.EncodeToString([]byte("hub-user:hub-pass"))
	kc, err := imageverify.DockerConfigKeychain(
		[]byte(`{"auths":{"registry.example:5000":{"username":"u1","password":"p1"},"https://index.docker.io/v1/":{"auth":"`+auth+`"}}}`),
		[]byte(`{"https://ghcr.io/v2/":{"username":"u2","password":"p2"},"registry.example:5000":{"username":"later","password":"ignored"}}`),
	)
	if err != nil {
		t.Fatal(err)
	}
	for image, want := range map[string]string{
		"registry.example:5000/team/app:v1": "u1:p1",
		"nginx:latest":                      "hub-user:hub-pass",
		"docker.io/library/nginx":           "hub-user:hub-pass",
		"ghcr.io/org/tool:v2":               "u2:p2",
		"registry.example/team/app:v1":      "", // another port: another registry
		"quay.io/org/x:1":                   "",
	} {
		ref, err := name.ParseReference(image)
		if err != nil {
			t.Fatal(err)
		}
		a, err := kc.Resolve(ref.Context())
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := a.Authorization()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Trim(cfg.Username+":"+cfg.Password, ":"); got != want {
			t.Errorf("%s: credentials %q, want %q", image, got, want)
		}
	}
	for name, bad := range map[string]string{
		"not JSON":     `hunter2-not-json`,
		"auth not b64": `{"auths":{"r.example":{"auth":"hunter2!!"}}}`,
		"auth no pass": `{"auths":{"r.example":{"auth":"` + base64.StdEncoding.EncodeToString([]byte("hunter2")) + `"}}}`,
	} {
		_, err := imageverify.DockerConfigKeychain([]byte(bad))
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("%s: %v, want an error quoting nothing of the configuration", name, err)
		}
	}
}

// staticCredentials gives every request the same keychain, and counts
// the requests.
type staticCredentials struct {
	kc    authn.Keychain
	err   error
	calls int
	keys  map[string]string // by namespace/name
}

func (c *staticCredentials) Keychain(context.Context, engine.ImageVerifyRequest) (authn.Keychain, error) {
	c.calls++
	return c.kc, c.err
}

func (c *staticCredentials) PublicKey(_ context.Context, _ engine.ImageVerifyRequest, namespace, name string) (string, error) {
	k, ok := c.keys[namespace+"/"+name]
	if !ok {
		return "", errors.New("secret " + namespace + "/" + name + " not found")
	}
	return k, nil
}

// TestVerifyPrivateRegistry: a registry behind a login is verified with
// the request's credentials (WithCredentials); without them the image
// fails, with no password in the message; credentials that cannot be
// read are no verdict (an error).
func TestVerifyPrivateRegistry(t *testing.T) {
	const password = "s3cret-registry-password"
	reg := ocitest.NewRegistry(t, ocitest.WithBasicAuth("robot", password))
	key := ocitest.NewKey(t)
	img := reg.PushImage(t, "private/app", "v1")
	reg.Sign(t, img.Ref, key)
	kc, err := imageverify.DockerConfigKeychain([]byte(`{"auths":{"` + reg.Host() + `":{"username":"robot","password":"` + password + `"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	e := entry(t, keysEntry(key.PublicKeyPEM()))

	creds := &staticCredentials{kc: kc}
	v, err := imageverify.New(imageverify.WithCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	if res, err := v.Verify(t.Context(), request(t, img.Tag, e)); err != nil || !res.Verified || res.Digest != img.Digest {
		t.Fatalf("with credentials: %+v, %v", res, err)
	}
	if d, err := v.ResolveDigest(t.Context(), request(t, img.Tag, e)); err != nil || d != img.Digest {
		t.Fatalf("digest with credentials: %q, %v", d, err)
	}
	if creds.calls != 2 {
		t.Errorf("credentials read %d times, want once per call", creds.calls)
	}

	anonymous, err := imageverify.New()
	if err != nil {
		t.Fatal(err)
	}
	res, err := anonymous.Verify(t.Context(), request(t, img.Tag, e))
	if err == nil && res.Verified {
		t.Fatalf("without credentials: %+v", res)
	}
	if strings.Contains(res.Message, password) || (err != nil && strings.Contains(err.Error(), password)) {
		t.Errorf("the password in the answer: %q, %v", res.Message, err)
	}

	broken, err := imageverify.New(imageverify.WithCredentials(&staticCredentials{err: errors.New("secret team/regcred not found")}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := broken.Verify(t.Context(), request(t, img.Tag, e)); err == nil || !strings.Contains(err.Error(), "failed to read registry credentials: secret team/regcred not found") {
		t.Errorf("unreadable credentials: %v, want an error", err)
	}
}

// TestVerifyKeyFromSecret: an attestor's key read from a Secret
// (keys.secret, or a k8s:// reference) verifies as the key itself does;
// a Secret that cannot be read is no verdict (an error), and without
// Credentials (the CLI) such a key is unsupported.
func TestVerifyKeyFromSecret(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	key := ocitest.NewKey(t)
	img := reg.PushImage(t, "team/app", "v1")
	reg.Sign(t, img.Ref, key)
	creds := &staticCredentials{keys: map[string]string{"team/cosign": key.PublicKeyPEM()}}
	v, err := imageverify.New(imageverify.WithRemoteOptions(reg.RemoteOptions()...), imageverify.WithCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	logs := `,"rekor":{"ignoreTlog":true},"ctlog":{"ignoreSCT":true}`
	for name, keys := range map[string]string{
		"keys.secret":   `{"secret":{"namespace":"team","name":"cosign"}` + logs + `}`,
		"k8s reference": `{"publicKeys":"k8s://team/cosign"` + logs + `}`,
	} {
		e := entry(t, `{"imageReferences":["*"],"attestors":[{"entries":[{"keys":`+keys+`}]}]}`)
		if res, err := v.Verify(t.Context(), request(t, img.Tag, e)); err != nil || !res.Verified {
			t.Errorf("%s: %+v, %v", name, res, err)
		}
	}
	missing := entry(t, `{"imageReferences":["*"],"attestors":[{"entries":[{"keys":{"secret":{"namespace":"team","name":"gone"}`+logs+`}}]}]}`)
	if _, err := v.Verify(t.Context(), request(t, img.Tag, missing)); err == nil || !strings.Contains(err.Error(), "failed to read the key's Secret: secret team/gone not found") {
		t.Errorf("a missing Secret: %v, want an error", err)
	}
	plain, err := imageverify.New(imageverify.WithRemoteOptions(reg.RemoteOptions()...))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plain.Verify(t.Context(), request(t, img.Tag, missing)); !errors.Is(err, imageverify.ErrUnsupported) {
		t.Errorf("without Credentials: %v, want ErrUnsupported", err)
	}
}
