package testkit

import (
	"errors"
	"net"
	"strconv"
	"testing"
	"time"
)

// fakeT records a failure instead of ending the test.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = format
	panic(f)
}

func run(f func(t testing.TB)) (failed bool) {
	ft := &fakeT{}
	defer func() {
		if r := recover(); r != nil {
			if r != ft {
				panic(r)
			}
			failed = true
		}
	}()
	f(ft)
	return false
}

func TestEventually(t *testing.T) {
	n := 0
	if run(func(t testing.TB) {
		Eventually(t, time.Second, "third try", func() error {
			if n++; n < 3 {
				return errors.New("no")
			}
			return nil
		})
	}) || n != 3 {
		t.Fatalf("a condition met on the third try: failed, or tried %d times", n)
	}
	start := time.Now()
	if !run(func(t testing.TB) {
		EventuallyTrue(t, 100*time.Millisecond, "never", func() bool { return false })
	}) {
		t.Fatal("a condition never met did not fail")
	}
	if d := time.Since(start); d < 100*time.Millisecond {
		t.Fatalf("gave up after %s, before the timeout", d)
	}
}

func TestFreeAddr(t *testing.T) {
	addr := FreeAddr(t)
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("%s is not free: %v", addr, err)
	}
	_ = l.Close()
	if p := FreePort(t); p <= 0 || p > 65535 {
		t.Fatalf("port %s", strconv.Itoa(p))
	}
}

func TestUnstructured(t *testing.T) {
	u := Unstructured(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: b}\n")
	if u.GetKind() != "ConfigMap" || u.GetName() != "a" || u.GetNamespace() != "b" {
		t.Fatalf("%v", u.Object)
	}
}
