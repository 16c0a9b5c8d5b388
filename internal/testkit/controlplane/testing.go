package controlplane

import (
	"testing"
)

// StartForTest starts a control plane for one test (or, given a testing.B,
// one benchmark) and stops it in t.Cleanup, which runs even when the test
// fails or panics. On failure the end of each component's log is logged.
// Under `go test -short` the test is skipped; otherwise a missing binary is
// built (see EnsureBinaries) and any start-up failure fails the test.
func StartForTest(t testing.TB, opts ...Option) *ControlPlane {
	t.Helper()
	if testing.Short() {
		t.Skip("needs a real control plane (etcd, kube-apiserver); skipped under -short")
	}
	cp, err := Start(t.Context(), opts...)
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range cp.processes() {
				t.Logf("last lines of %s:\n%s", p.name, p.tail(logTailLines))
			}
		}
		if err := cp.Stop(); err != nil {
			t.Errorf("stop control plane: %v", err)
		}
	})
	return cp
}
