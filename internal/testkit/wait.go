package testkit

import (
	"errors"
	"net"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// Eventually calls cond until it returns nil, first at once, then at
// intervals that grow from 10 ms to 200 ms; once timeout has passed, it
// fails t with what and cond's last error.
func Eventually(t testing.TB, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	wait := 10 * time.Millisecond
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, timeout, err)
		}
		time.Sleep(wait)
		wait = min(2*wait, 200*time.Millisecond)
	}
}

// EventuallyTrue is Eventually for a condition that says only yes or no.
func EventuallyTrue(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	Eventually(t, timeout, what, func() error {
		if cond() {
			return nil
		}
		return ErrNotYet
	})
}

// ErrNotYet is what a condition of Eventually returns while there is
// nothing to compare yet.
var ErrNotYet = errors.New("not yet")

// FreeAddr returns a loopback address with a port nothing listened on a
// moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String()
}

// FreePort is FreeAddr's port.
func FreePort(t testing.TB) int {
	t.Helper()
	_, port, err := net.SplitHostPort(FreeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	n, err := net.LookupPort("tcp", port)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Unstructured decodes one YAML or JSON object.
func Unstructured(t testing.TB, y string) *unstructured.Unstructured {
	t.Helper()
	v, err := document.Decode([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	m, ok := v.(map[string]any)
	if !ok {
		t.Fatalf("not an object: %T", v)
	}
	return &unstructured.Unstructured{Object: m}
}
