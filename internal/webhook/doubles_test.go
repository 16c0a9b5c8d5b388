package webhook

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Test doubles of the sinks: production wires the JetStream sinks of
// internal/webhook/app.

// MemoryResultSink keeps every event, for tests.
type MemoryResultSink struct {
	mu      sync.Mutex
	events  []ResultEvent
	flushes int
}

// Publish appends the events.
func (s *MemoryResultSink) Publish(_ context.Context, events []ResultEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, events...)
}

// Flush counts the call.
func (s *MemoryResultSink) Flush(context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.flushes++
	return nil
}

// Events returns a copy of what was published.
func (s *MemoryResultSink) Events() []ResultEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]ResultEvent(nil), s.events...)
}

// Flushes returns how many times Flush was called.
func (s *MemoryResultSink) Flushes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.flushes
}

// MemoryWorkSink keeps every acknowledged item, for tests. Fail, when set,
// is returned by every Publish; Delay makes Publish wait (or the context
// end) first, like a slow queue.
type MemoryWorkSink struct {
	Fail  error
	Delay time.Duration
	// Waiting counts the calls of Publish under way.
	Waiting atomic.Int64

	mu    sync.Mutex
	items []WorkItem
}

// Publish stores the item unless Fail is set or ctx ends first.
func (s *MemoryWorkSink) Publish(ctx context.Context, item WorkItem) error {
	s.Waiting.Add(1)
	defer s.Waiting.Add(-1)
	if s.Delay > 0 {
		t := time.NewTimer(s.Delay)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	}
	if s.Fail != nil {
		return s.Fail
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.items = append(s.items, item)
	return nil
}

// Items returns a copy of the acknowledged items.
func (s *MemoryWorkSink) Items() []WorkItem {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]WorkItem(nil), s.items...)
}

// memoryDecisionSink keeps every decision, for tests.
type memoryDecisionSink struct {
	mu        sync.Mutex
	decisions []Decision
}

func (s *memoryDecisionSink) Record(d Decision) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.decisions = append(s.decisions, d)
}

func (s *memoryDecisionSink) Flush(context.Context) error { return nil }

// drain returns what was recorded since the last drain or take, at once.
func (s *memoryDecisionSink) drain() []Decision {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.decisions
	s.decisions = nil
	return out
}

// take returns what was recorded since the last take, once there is
// something (a decision is recorded after its answer went out, so the
// client may see the answer first), waiting at most 5 s.
func (s *memoryDecisionSink) take() []Decision {
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		s.mu.Lock()
		out := s.decisions
		s.decisions = nil
		s.mu.Unlock()
		if len(out) > 0 {
			return out
		}
	}
	return nil
}
