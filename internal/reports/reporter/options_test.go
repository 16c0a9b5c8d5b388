package reporter

import (
	"errors"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/queue"
)

func TestOptionsRejectBadValues(t *testing.T) {
	for name, err := range map[string]error{
		"nil client":  func() error { _, err := NewWriter(nil); return err }(),
		"window":      WithWindow(0)(&projectorOptions{}),
		"concurrency": WithConcurrency(0)(&projectorOptions{}),
		"workers":     WithFlushWorkers(0)(&projectorOptions{}),
		"read batch":  WithReadBatch(0)(&projectorOptions{}),
		"durable":     WithDurable("")(&projectorOptions{}),
		"attempts":    WithAttempts(0, time.Second, time.Minute)(&projectorOptions{}),
		"progress":    WithProgressEvery(0)(&projectorOptions{}),
		"shutdown":    WithShutdownTimeout(0)(&projectorOptions{}),
		"pending":     WithPendingLimit(-1, 1)(&projectorOptions{}),
		"pending b":   WithPendingLimit(1, -1)(&projectorOptions{}),
		"rechecks":    WithPendingRechecks(-1)(&projectorOptions{}),
		"qps":         WithWriteQPS(0, 1)(&writerOptions{}),
		"conflicts":   WithConflictRetries(0, time.Millisecond, time.Second)(&writerOptions{}),
		"memory":      WithMemory(-1)(&writerOptions{}),
		"metrics":     WithMetrics(nil)(&writerOptions{}),
		"rebuild":     WithRebuildWorkers(0)(&rebuildOptions{}),
		"progress fn": WithRebuildProgress(time.Second, nil)(&rebuildOptions{}),
		"checker":     WithChecker(nil)(&projectorOptions{}),
		"rebuild chk": WithRebuildChecker(nil)(&rebuildOptions{}),
		"no checker":  func() error { _, err := NewProjector(&queue.Conn{}, &Writer{}); return err }(),
	} {
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := NewMetrics(nil); err != nil {
		t.Fatal(err)
	}
}
