package sigmanifest_test

import (
	"encoding/base64"
	"errors"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine/sigmanifest"
)

// TestDiff: fields compare by dotted key, numbers by value; ignored keys
// are prefixes with wildcards; a namespace the manifest leaves out, and
// null against absent, are no difference.
func TestDiff(t *testing.T) {
	manifest := map[string]any{"kind": "ConfigMap", "metadata": map[string]any{"name": "a", "labels": map[string]any{"x": nil}},
		"data": map[string]any{"k": "v", "n": int64(3)}, "list": []any{"a", "b"}}
	obj := map[string]any{"kind": "ConfigMap", "metadata": map[string]any{"name": "a", "namespace": "team", "uid": "u"},
		"data": map[string]any{"k": "v", "n": float64(3)}, "list": []any{"a", "c", "d"}}
	got := sigmanifest.Diff(manifest, obj, []string{"metadata.u"})
	want := []sigmanifest.Difference{{Key: "list.1", Before: "b", After: "c"}, {Key: "list.2", After: "d"}}
	if sigmanifest.String(got) != sigmanifest.String(want) {
		t.Errorf("Diff = %s, want %s", sigmanifest.String(got), sigmanifest.String(want))
	}
	if got := sigmanifest.Diff(manifest, obj, []string{"metadata.u", "list.*"}); len(got) != 0 {
		t.Errorf("with list.* ignored: %s", sigmanifest.String(got))
	}
}

// TestReadErrors: what an annotation holds is the requester's: each
// malformed form is an error, never a panic or an unbounded read.
func TestReadErrors(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString
	for name, c := range map[string]struct {
		annotations map[string]string
		want        error
	}{
		"no message":       {map[string]string{}, sigmanifest.ErrNoMessage},
		"no signature":     {map[string]string{"cosign.sigstore.dev/message": b64([]byte("kind: ConfigMap\n"))}, sigmanifest.ErrNoSignature},
		"not base64":       {map[string]string{"cosign.sigstore.dev/message": "%%%"}, nil},
		"not YAML":         {map[string]string{"cosign.sigstore.dev/message": b64([]byte("{{{")), "cosign.sigstore.dev/signature": "AA=="}, nil},
		"truncated gzip":   {map[string]string{"cosign.sigstore.dev/message": b64([]byte{0x1f, 0x8b, 8, 0}), "cosign.sigstore.dev/signature": "AA=="}, nil},
		"signature base64": {map[string]string{"cosign.sigstore.dev/message": b64([]byte("kind: ConfigMap\n")), "cosign.sigstore.dev/signature": "%%"}, nil},
	} {
		_, err := sigmanifest.Read(c.annotations, "")
		if err == nil || (c.want != nil && !errors.Is(err, c.want)) {
			t.Errorf("%s: %v, want an error (%v)", name, err, c.want)
		}
	}
}

// FuzzRead: no annotation makes Read panic.
func FuzzRead(f *testing.F) {
	f.Add([]byte("kind: ConfigMap\nmetadata: {name: a}\n"), []byte{0x30, 0x06})
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff}, []byte{})
	f.Fuzz(func(t *testing.T, msg, sig []byte) {
		s, err := sigmanifest.Read(map[string]string{
			"cosign.sigstore.dev/message":   base64.StdEncoding.EncodeToString(msg),
			"cosign.sigstore.dev/signature": base64.StdEncoding.EncodeToString(sig),
		}, "")
		if err == nil && (len(s.Manifests) == 0 || len(s.Signatures) != 1) {
			t.Fatalf("read %d manifests, %d signatures without an error", len(s.Manifests), len(s.Signatures))
		}
	})
}
