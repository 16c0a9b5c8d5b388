package procstat

import (
	"os"
	"testing"
	"time"
)

// TestReadSelf: the test's own process has used CPU time, and it grows
// with work; its resident set is positive and below its peak.
func TestReadSelf(t *testing.T) {
	before, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if before.RSS <= 0 || before.PeakRSS < before.RSS {
		t.Fatalf("RSS %d, peak %d", before.RSS, before.PeakRSS)
	}
	deadline := time.Now().Add(200 * time.Millisecond)
	x := 0
	for time.Now().Before(deadline) {
		x++
	}
	after, err := Read(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if after.CPU-before.CPU < 50*time.Millisecond {
		t.Fatalf("CPU %v then %v after 200ms of a busy loop (%d)", before.CPU, after.CPU, x)
	}
	if _, err := Read(1 << 30); err == nil {
		t.Fatal("a process that does not exist was read")
	}
}
