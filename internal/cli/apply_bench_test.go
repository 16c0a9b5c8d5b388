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
