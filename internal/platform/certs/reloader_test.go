package certs_test

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/testproc"
)

// TestFileReloader serves from files that appear after start, rotate and
// break, as a mounted Secret's do: a TLS listener presents each new
// certificate without a restart, and a broken pair keeps the one in use
// (and is logged once, not at every check).
func TestFileReloader(t *testing.T) {
	secret := &mountedSecret{dir: t.TempDir()}
	certFile, keyFile := secret.path("tls.crt"), secret.path("tls.key")
	pair := func(cert, key *certs.KeyPair) map[string][]byte {
		return map[string][]byte{"tls.crt": cert.CertPEM, "tls.key": key.KeyPEM}
	}
	var logs testproc.LogBuffer
	r, err := certs.NewFileReloader(certFile, keyFile, 10*time.Millisecond, zerolog.New(&logs))
	if err != nil {
		t.Fatal(err)
	}
	var changes atomic.Int32
	r.AddListener(listener(func() { changes.Add(1) }))
	if _, err := r.GetCertificate(nil); !errors.Is(err, certs.ErrNoCertificate) || r.Loaded() {
		t.Fatalf("before the files exist: %v, loaded %v", err, r.Loaded())
	}
	addr := serveTLS(t, &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12})
	if presented(addr) != nil {
		t.Fatal("a handshake succeeded without a certificate")
	}
	go func() { _ = r.Run(t.Context()) }()

	ca, err := certs.NewCA("test-ca", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	issue := func() *certs.KeyPair {
		kp, err := certs.NewServing(ca, []string{"verdict.test"}, nil, time.Now(), time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return kp
	}
	first, second, third := issue(), issue(), issue()

	secret.write(t, pair(first, first))
	testkit.EventuallyTrue(t, 10*time.Second, "the first certificate served", func() bool { return isCert(presented(addr), first) })
	if c, k := r.CurrentCertKeyContent(); !bytes.Equal(c, first.CertPEM) || !bytes.Equal(k, first.KeyPEM) {
		t.Fatal("CurrentCertKeyContent is not the loaded pair")
	}
	testkit.EventuallyTrue(t, 10*time.Second, "listeners told of the first certificate", func() bool { return changes.Load() == 1 })

	secret.write(t, pair(second, second))
	testkit.EventuallyTrue(t, 10*time.Second, "the rotated certificate served", func() bool { return isCert(presented(addr), second) })

	// A mismatched pair: the second stays, and the failure is said once.
	before := len(logs.String())
	secret.write(t, pair(second, third))
	time.Sleep(200 * time.Millisecond)
	if !isCert(presented(addr), second) {
		t.Fatal("a mismatched pair replaced the certificate")
	}
	if n := strings.Count(logs.String()[before:], "serving certificate reload failed"); n != 1 {
		t.Fatalf("reload failure logged %d times, want once:\n%s", n, logs.String()[before:])
	}
	secret.write(t, pair(third, third))
	testkit.EventuallyTrue(t, 10*time.Second, "the repaired pair served", func() bool { return isCert(presented(addr), third) })
	// Told of each certificate once: not of the broken pair, nor of
	// checks that found the files unchanged.
	testkit.EventuallyTrue(t, 10*time.Second, "listeners told of three certificates", func() bool { return changes.Load() == 3 })
	time.Sleep(50 * time.Millisecond)
	if n := changes.Load(); n != 3 {
		t.Fatalf("listeners told %d times after three certificates", n)
	}
}

// TestFileCABundle: a bundle without certificates is refused at start; a
// new bundle is picked up, a broken one keeps the bundle in use.
func TestFileCABundle(t *testing.T) {
	file := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(file, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := certs.NewFileCABundle(file, time.Second, zerolog.Nop()); !errors.Is(err, certs.ErrInvalid) {
		t.Fatalf("an empty bundle at start: %v", err)
	}
	oldCA, newCA := newCA(t), newCA(t)
	if err := os.WriteFile(file, oldCA.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := certs.NewFileCABundle(file, 10*time.Millisecond, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	go b.Run(t.Context())
	if !trusts(b.Pool(), oldCA) || trusts(b.Pool(), newCA) {
		t.Fatal("the bundle at start is not the file's")
	}
	if err := os.WriteFile(file, newCA.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 10*time.Second, "the new bundle", func() bool { return trusts(b.Pool(), newCA) })
	if err := os.WriteFile(file, []byte("garbage"), 0o600); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	if !trusts(b.Pool(), newCA) {
		t.Fatal("a broken file replaced the bundle")
	}
}

type listener func()

func (l listener) Enqueue() { l() }

func newCA(t testing.TB) *certs.KeyPair {
	t.Helper()
	ca, err := certs.NewCA("test-ca", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// trusts reports whether a certificate ca issued verifies against pool.
func trusts(pool *x509.CertPool, ca *certs.KeyPair) bool {
	kp, err := certs.NewServing(ca, []string{"verdict.test"}, nil, time.Now(), time.Hour)
	if err != nil {
		return false
	}
	_, err = kp.Cert().Verify(x509.VerifyOptions{Roots: pool, DNSName: "verdict.test"})
	return err == nil
}

// serveTLS accepts TLS connections on loopback until the test ends,
// completing each handshake.
func serveTLS(t testing.TB, cfg *tls.Config) string {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_ = c.(*tls.Conn).Handshake()
			_ = c.Close()
		}
	}()
	return ln.Addr().String()
}

// presented is the leaf certificate addr presents, nil when the handshake
// fails.
func presented(addr string) []byte {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test checks which certificate, not the chain
	if err != nil {
		return nil
	}
	defer func() { _ = conn.Close() }()
	if peer := conn.ConnectionState().PeerCertificates; len(peer) > 0 {
		return peer[0].Raw
	}
	return nil
}

func isCert(raw []byte, kp *certs.KeyPair) bool { return raw != nil && bytes.Equal(raw, kp.Cert().Raw) }

// mountedSecret is a folder of files kept as kubelet keeps a mounted
// Secret's: each file a symlink into ..data, itself a symlink to the
// current version's folder, swapped in one rename.
type mountedSecret struct {
	dir      string
	versions int
}

func (m *mountedSecret) path(name string) string { return filepath.Join(m.dir, name) }

// write makes files the folder's content at once.
func (m *mountedSecret) write(t testing.TB, files map[string][]byte) {
	t.Helper()
	m.versions++
	version := fmt.Sprintf("..v%d", m.versions)
	if err := os.Mkdir(m.path(version), 0o700); err != nil {
		t.Fatal(err)
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(m.path(version), name), data, 0o600); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Lstat(m.path(name)); err != nil {
			if err := os.Symlink(filepath.Join("..data", name), m.path(name)); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.Symlink(version, m.path("..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(m.path("..data_tmp"), m.path("..data")); err != nil {
		t.Fatal(err)
	}
}
