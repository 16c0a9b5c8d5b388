package celeval

import (
	"bytes"
	"compress/gzip"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"strings"
	"testing"
	"time"
)

// TestKyvernoLibraries: Kyverno's CEL library functions that need nothing
// outside the expression, with the results Kyverno's give (its
// libraries' tests and source, kyverno/sdk extensions/cel/libs).
func TestKyvernoLibraries(t *testing.T) {
	cert := testCertPEM(t)
	bomb := gzipBomb(t, maxDecompressedBytes+1)
	for _, tc := range []struct {
		expr string
		want any    // the value, as JSON
		err  string // a substring of the error, instead
	}{
		{expr: `sha256('abc')`, want: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{expr: `hash.sha256('abc') == sha256('abc')`, want: true},
		{expr: `sha1('abc')`, want: "a9993e364706816aba3e25717850c26c9cd0d89d"},
		{expr: `hash.sha1('')`, want: "da39a3ee5e6b4b0d3255bfef95601890afd80709"},
		{expr: `md5('abc')`, want: "900150983cd24fb0d6963f7d28e17f72"},
		{expr: `hash.md5('abc') == md5('abc')`, want: true},
		{expr: `math.round(3.14159, 2)`, want: 3.14},
		{expr: `math.round(2.5, 0)`, want: 3.0},
		{expr: `math.round(-2.5, 0)`, want: -3.0},
		{expr: `math.round(1234.5, -2)`, want: 1200.0},
		{expr: `random('[a-f]{6}').matches('^[a-f]{6}$')`, want: true},
		{expr: `random().matches('^[0-9a-z]{8}$')`, want: true},
		{expr: `random.random('x{3}')`, want: "xxx"},
		{expr: `random('(')`, err: "random"},
		{expr: `time.toCron(timestamp('2024-03-05T13:42:00Z'))`, want: "42 13 5 3 2"},
		{expr: `time.truncate(timestamp('2024-03-05T13:42:17Z'), duration('1h')) == timestamp('2024-03-05T13:00:00Z')`, want: true},
		{expr: `listObjToMap([{'name': 'a'}, {'name': 'b'}], [{'v': dyn(1)}, {'v': dyn('x')}], 'name', 'v')`, want: map[string]any{"a": 1.0, "b": "x"}},
		{expr: `transform.listObjToMap([{'k': 'a'}], [{'v': true}], 'k', 'v')`, want: map[string]any{"a": true}},
		{expr: `listObjToMap([{'k': 'a'}], [], 'k', 'v')`, err: "lists of equal length"},
		{expr: `listObjToMap([{'k': 1}], [{'v': 1}], 'k', 'v')`, err: "cannot be handled as a string"},
		{expr: `parseServiceAccount('system:serviceaccount:team-a:builder')`, want: map[string]any{"namespace": "team-a", "name": "builder"}},
		{expr: `user.parseServiceAccount('alice@example.com')`, want: map[string]any{"namespace": "", "name": ""}},
		{expr: `parseServiceAccount('system:serviceaccount:broken')`, want: map[string]any{"namespace": "", "name": ""}},
		{expr: `x509.decode('` + cert + `').Subject.CommonName`, want: "verdict.test"},
		{expr: `x509.decode('not a certificate')`, err: "PEM"},
		// Kyverno's x509 decoding reads RSA keys only (its JMESPath
		// x509_decode's rule).
		{expr: `json.unmarshal('{"a": [1, "b"]}').a[1]`, want: "b"},
		{expr: `json.marshal({'b': dyn(1), 'a': dyn([true])})`, want: `{"a":[true],"b":1}`},
		{expr: `json.unmarshal('{')`, err: "unexpected end"},
		{expr: `yaml.parse('a:\n  - 1\n  - x\n').a[1]`, want: "x"},
		{expr: `yaml.parse(': :')`, err: "yaml"},
		{expr: `gzip.decompress(gzip.compress('hello, world'))`, want: "hello, world"},
		{expr: `gzip.compress('a') == gzip.compress('a')`, want: true},
		{expr: `gzip.decompress(b'not gzip')`, err: "gzip"},
		{expr: `gzip.decompress(` + bomb + `)`, err: "expands beyond"},
	} {
		t.Run(tc.expr[:min(len(tc.expr), 60)], func(t *testing.T) {
			p, err := Compile(tc.expr, Any)
			if err != nil {
				t.Fatal(err)
			}
			v, err := NewEvaluation(t.Context(), Input{}, nil, 0).Eval(p)
			if tc.err != "" {
				if err == nil || !strings.Contains(strings.ToLower(err.Error()), strings.ToLower(tc.err)) {
					t.Fatalf("got %v, %v; want an error with %q", v, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, err := JSONOf(v)
			if err != nil {
				t.Fatal(err)
			}
			if !equalJSON(got, tc.want) {
				t.Errorf("got %#v, want %#v", got, tc.want)
			}
		})
	}
}

func equalJSON(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k := range x {
			if !equalJSON(x[k], y[k]) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !equalJSON(x[i], y[i]) {
				return false
			}
		}
		return true
	}
	return a == b
}

// testCertPEM is a self-signed certificate for verdict.test, on one line
// with \n escapes (as a CEL string literal holds it).
func testCertPEM(t *testing.T) string {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "verdict.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return strings.ReplaceAll(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})), "\n", `\n`)
}

// gzipBomb is a bytes literal of gzip data that expands to n zero bytes.
func gzipBomb(t *testing.T, n int) string {
	t.Helper()
	var buf bytes.Buffer
	w, err := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(make([]byte, n)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	var lit strings.Builder
	lit.WriteString("b'")
	for _, c := range buf.Bytes() {
		fmt.Fprintf(&lit, `\x%02x`, c)
	}
	lit.WriteString("'")
	return lit.String()
}
