package cli

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// benchDir holds the fixed workloads of ../shared/bench.
const benchDir = "../../../shared/bench"

// BenchmarkApplyPSS1000 is `verdict apply -p pss-classic -r
// pods-1000.yaml` in process, table output discarded: 24 Pod Security
// policies against 1,000 Pods (24,000 results).
func BenchmarkApplyPSS1000(b *testing.B) {
	if _, err := os.Stat(benchDir + "/pods-1000.yaml"); err != nil {
		b.Skipf("bench workloads not found: %v", err)
	}
	opts := ApplyOptions{
		Policies:  []string{benchDir + "/pss-classic"},
		Resources: []string{benchDir + "/pods-1000.yaml"},
	}
	for b.Loop() {
		counts, err := Apply(b.Context(), opts, bytes.NewReader(nil), io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		if counts.Pass != 20892 || counts.Fail != 3108 {
			b.Fatalf("pass %d fail %d, want 20892 and 3108", counts.Pass, counts.Fail)
		}
	}
}

// BenchmarkApplyCEL is `verdict apply` of the CEL workloads on the 1,000
// Pods: pss-vpol (16 ValidatingPolicies) and pss-cel (ClusterPolicies
// with validate.cel), with the reference CLI's counts.
func BenchmarkApplyCEL(b *testing.B) {
	if _, err := os.Stat(benchDir + "/pods-1000.yaml"); err != nil {
		b.Skipf("bench workloads not found: %v", err)
	}
	for _, w := range []struct {
		name       string
		pass, fail int
	}{{"pss-vpol", 14955, 1045}, {"pss-cel", 17905, 1095}} {
		b.Run(w.name, func(b *testing.B) {
			opts := ApplyOptions{
				Policies:  []string{benchDir + "/" + w.name},
				Resources: []string{benchDir + "/pods-1000.yaml"},
			}
			for b.Loop() {
				counts, err := Apply(b.Context(), opts, bytes.NewReader(nil), io.Discard)
				if err != nil {
					b.Fatal(err)
				}
				if counts.Pass != w.pass || counts.Fail != w.fail {
					b.Fatalf("pass %d fail %d, want %d and %d", counts.Pass, counts.Fail, w.pass, w.fail)
				}
			}
		})
	}
}
