package engine_test

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// manifestSigner signs manifests as `kubectl sigstore sign` does with a
// key: the YAML files in a .tar.gz, gzipped and base64-encoded in the
// message annotation, a cosign blob signature (ECDSA P-256 over SHA-256,
// base64) of the .tar.gz in the signature annotations.
type manifestSigner struct {
	key *ecdsa.PrivateKey
	pem string
}

func newManifestSigner(t *testing.T) *manifestSigner {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	return &manifestSigner{key: k, pem: string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}))}
}

// tarGz packs files (name, content) into a .tar.gz.
func tarGz(t *testing.T, files ...[2]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, f := range files {
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o644, Size: int64(len(f[1])), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(f[1])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func gz(t *testing.T, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// sign returns the message and signature annotations of msg (the
// .tar.gz), signed by each signer, as signature, signature_1, ...
func sign(t *testing.T, msg []byte, signers ...*manifestSigner) map[string]any {
	t.Helper()
	a := map[string]any{"cosign.sigstore.dev/message": base64.StdEncoding.EncodeToString(gz(t, msg))}
	for i, s := range signers {
		d := sha256.Sum256(msg)
		sig, err := ecdsa.SignASN1(rand.Reader, s.key, d[:])
		if err != nil {
			t.Fatal(err)
		}
		k := "cosign.sigstore.dev/signature"
		if i > 0 {
			k += "_" + string(rune('0'+i))
		}
		a[k] = base64.StdEncoding.EncodeToString(sig)
	}
	return a
}

const signedService = `apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: team
spec:
  selector: {app: web}
  ports:
  - {name: http, port: 80, targetPort: 8080}
  - {name: https, port: 443, targetPort: 8443}
`

// manifestsPolicy requires Services to be signed by each set of keys:
// one set per argument, each of its keys an entry, count given.
func manifestsPolicy(t *testing.T, eng *engine.Engine, count int, extra string, keys ...string) *engine.Policy {
	t.Helper()
	var entries []string
	for _, k := range keys {
		b, _ := json.Marshal(k)
		entries = append(entries, `{"keys":{"publicKeys":`+string(b)+`}}`)
	}
	c := ""
	if count > 0 {
		c = `"count":` + string(rune('0'+count)) + `,`
	}
	return compile(t, eng, `{"apiVersion":"kyverno.io/v1","kind":"ClusterPolicy","metadata":{"name":"signed"},
"spec":{"validationFailureAction":"Enforce","rules":[{"name":"manifests","match":{"any":[{"resources":{"kinds":["Service"]}}]},
"validate":{"manifests":{`+extra+`"attestors":[{`+c+`"entries":[`+strings.Join(entries, ",")+`]}]}}}]}}`)
}

// service is signedService as the API server would store it (a cluster
// IP, a uid, the defaults of a Service), with annotations and changes.
func service(t *testing.T, annotations map[string]any, change func(map[string]any)) map[string]any {
	t.Helper()
	o := obj(t, signedService)
	md := o["metadata"].(map[string]any)
	md["uid"], md["resourceVersion"], md["creationTimestamp"] = "7f1c", "41", "2026-11-27T20:00:00Z"
	if annotations != nil {
		md["annotations"] = annotations
	}
	spec := o["spec"].(map[string]any)
	spec["clusterIP"], spec["type"], spec["sessionAffinity"] = "10.0.0.12", "ClusterIP", "None"
	if change != nil {
		change(o)
	}
	return o
}

// TestValidateManifests: a Service signed as `kubectl sigstore sign`
// signs it is verified with the signer's key, the fields the API server
// sets ignored; a change to a signed field, a signature of another key,
// a resource without a signature, a signed message that holds another
// resource, a list reordered (compared by index, as Kyverno does) fail
// with Kyverno's reasons; an attestor set needs its count
// of keys; ignoreFields lets a field differ; a message that decompresses
// beyond the bound fails without being read whole; a DELETE gives no
// result, a dry run passes.
func TestValidateManifests(t *testing.T) {
	eng := newEngine(t)
	alice, bob, eve := newManifestSigner(t), newManifestSigner(t), newManifestSigner(t)
	msg := tarGz(t, [2]string{"manifests/service.yaml", signedService}, [2]string{"manifests/README", "not a manifest"})
	run := func(p *engine.Policy, o map[string]any, mods ...func(*engine.Request)) engine.RuleResponse {
		t.Helper()
		req := &engine.Request{Operation: engine.OpCreate, Object: o}
		for _, m := range mods {
			m(req)
		}
		r := statuses(t, eng, p, req)["manifests"]
		return r
	}
	anyKey := manifestsPolicy(t, eng, 1, "", alice.pem, bob.pem)
	both := manifestsPolicy(t, eng, 0, "", alice.pem, bob.pem)

	if r := run(anyKey, service(t, sign(t, msg, alice), nil)); r.Status != engine.StatusPass || !strings.HasPrefix(r.Message, "verified manifest signatures; manifest verification succeeded; verifiedCount 1; requiredCount 1") {
		t.Errorf("signed by alice, any key: %s %q", r.Status, r.Message)
	}
	if r := run(both, service(t, sign(t, msg, alice, bob), nil)); r.Status != engine.StatusPass {
		t.Errorf("signed by both, both required: %s %q", r.Status, r.Message)
	}

	for name, c := range map[string]struct {
		p    *engine.Policy
		o    map[string]any
		want string
	}{
		"a signed field changed": {anyKey, service(t, sign(t, msg, alice), func(o map[string]any) {
			o["spec"].(map[string]any)["selector"] = map[string]any{"app": "evil"}
		}), `.attestors[0].entries[0].keys: failed to verify signature. diff found; {"items":[{"key":"spec.selector.app","before":"web","after":"evil"}]}`},
		"a field added": {anyKey, service(t, sign(t, msg, alice), func(o map[string]any) {
			o["spec"].(map[string]any)["externalIPs"] = []any{"203.0.113.9"}
		}), `"key":"spec.externalIPs.0","before":null,"after":"203.0.113.9"`},
		"signed by another key": {anyKey, service(t, sign(t, msg, eve), nil), ".attestors[0].entries[0].keys: failed to verify signature: none of the 1 signatures verifies with the key"},
		"not signed":            {anyKey, service(t, nil, nil), "manifest verification failed; verifiedCount 0; requiredCount 1; message .attestors[0].entries[0].keys: YAML manifest not found for this resource"},
		"one of two keys":       {both, service(t, sign(t, msg, alice), nil), "manifest verification failed; verifiedCount 1; requiredCount 2"},
		"another resource signed": {anyKey, service(t, sign(t, msg, alice), func(o map[string]any) {
			o["metadata"].(map[string]any)["name"] = "other"
		}), "the signed message has no Service other"},
		"ports reordered": {anyKey, service(t, sign(t, msg, alice), func(o map[string]any) {
			ports := o["spec"].(map[string]any)["ports"].([]any)
			ports[0], ports[1] = ports[1], ports[0]
		}), `{"key":"spec.ports.0.name","before":"http","after":"https"}`},
		"a decompression bomb": {anyKey, service(t, sign(t, gz(t, make([]byte, 64<<20)), alice), nil), "larger than"},
	} {
		r := run(c.p, c.o)
		if r.Status != engine.StatusFail || !strings.Contains(r.Message, c.want) {
			t.Errorf("%s: %s %q, want fail with %q", name, r.Status, r.Message, c.want)
		}
	}

	ignoring := manifestsPolicy(t, eng, 1, `"ignoreFields":[{"objects":[{"kind":"Service","name":"w*"}],"fields":["spec.selector"]}],`, alice.pem)
	changed := service(t, sign(t, msg, alice), func(o map[string]any) { o["spec"].(map[string]any)["selector"] = map[string]any{"app": "other"} })
	if r := run(ignoring, changed); r.Status != engine.StatusPass {
		t.Errorf("an ignored field changed: %s %q", r.Status, r.Message)
	}

	if r := run(anyKey, service(t, nil, nil), func(r *engine.Request) { r.DryRun = true }); r.Status != engine.StatusPass || r.Message != "allowed because of DryRun request" {
		t.Errorf("dry run: %s %q", r.Status, r.Message)
	}
	resps, _ := eng.Apply(t.Context(), &engine.Request{Operation: engine.OpDelete, OldObject: service(t, nil, nil)}, &engine.Set{Policies: []*engine.Policy{anyKey}})
	for _, resp := range resps {
		if len(resp.Rules) != 0 {
			t.Errorf("DELETE: %+v, want no result", resp.Rules)
		}
	}

	keyless := compile(t, eng, `{"apiVersion":"kyverno.io/v1","kind":"ClusterPolicy","metadata":{"name":"signed"},
"spec":{"validationFailureAction":"Enforce","rules":[{"name":"manifests","match":{"any":[{"resources":{"kinds":["Service"]}}]},
"validate":{"manifests":{"attestors":[{"entries":[{"keyless":{"subject":"dev@example.com","issuer":"https://issuer.example","rekor":{"url":"https://rekor.example"}}}]}]}}}]}}`)
	if r := run(keyless, service(t, sign(t, msg, alice), nil)); r.Status != engine.StatusError || !r.Unsupported {
		t.Errorf("keyless: %s unsupported=%v %q, want an unsupported error", r.Status, r.Unsupported, r.Message)
	}
}
