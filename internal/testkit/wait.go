package testkit

import (
	"errors"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
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
// moment ago, for a process the test starts to listen on (FreeLoopback).
func FreeAddr(t testing.TB) string {
	t.Helper()
	addr, err := FreeLoopback()
	if err != nil {
		t.Fatal(err)
	}
	return addr
}

// FreeLoopback returns a loopback address with a port nothing listened on
// a moment ago. The port is drawn below the kernel's ephemeral range
// (ip_local_port_range): a port the kernel hands out itself (":0") is
// also what it gives the next outgoing connection of any process, so
// under `make test`, with packages running side by side, another
// connection often took it before the started process listened
// ("address already in use").
func FreeLoopback() (string, error) {
	lo, hi := portsBelowEphemeral()
	for range 200 {
		if hi <= lo {
			break
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(lo+rand.IntN(hi-lo)))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // taken: draw again
		}
		_ = l.Close()
		return addr, nil
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer func() { _ = l.Close() }()
	return l.Addr().String(), nil
}

// portsBelowEphemeral is the range [lo, hi) FreeAddr draws from: from
// 10000 to the start of the ephemeral range (32768 where it cannot be
// read).
func portsBelowEphemeral() (lo, hi int) {
	lo, hi = 10000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				hi = n
			}
		}
	}
	return lo, hi
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
