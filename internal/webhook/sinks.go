package webhook

import (
	"context"
	"sync"
	"time"

	evt "github.com/verdict-dev/verdict/internal/events"
)

// The event schema lives in internal/events, shared with the worker
// services; these names keep the webhook's API readable.
type (
	ResourceRef = evt.ResourceRef
	PolicyRef   = evt.PolicyRef
	RuleResult  = evt.RuleResult
	ResultEvent = evt.ResultEvent
	WorkKind    = evt.WorkKind
	WorkItem    = evt.WorkItem
)

// WorkGenerate is the work kind of generate rules.
const WorkGenerate = evt.WorkGenerate

// ResultSink receives rule results. Publish must not block: an
// implementation buffers (and counts what it cannot buffer); the admission
// answer never waits on it. Flush waits until everything published so far
// has left the process, or ctx ends; the server calls it at shutdown.
type ResultSink interface {
	Publish(ctx context.Context, events []ResultEvent)
	Flush(ctx context.Context) error
}

// WorkSink takes work that must be durable before the webhook answers:
// Publish returns nil only once the item is acknowledged, and returns when
// ctx (which carries the publish deadline) ends.
type WorkSink interface {
	Publish(ctx context.Context, item WorkItem) error
}

// NopResultSink discards results.
type NopResultSink struct{}

// Publish discards the events.
func (NopResultSink) Publish(context.Context, []ResultEvent) {}

// Flush has nothing to flush.
func (NopResultSink) Flush(context.Context) error { return nil }

// NopWorkSink acknowledges and discards every item. It is for tests and
// local experiments: in a cluster, discarded work is lost work.
type NopWorkSink struct{}

// Publish discards the item.
func (NopWorkSink) Publish(context.Context, WorkItem) error { return nil }

// unavailableWorkSink is the default when no work sink is wired in: every
// publish fails, and Config.OnWorkPublishFailure decides.
type unavailableWorkSink struct{}

func (unavailableWorkSink) Publish(context.Context, WorkItem) error { return ErrWorkSinkUnavailable }

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

	mu    sync.Mutex
	items []WorkItem
}

// Publish stores the item unless Fail is set or ctx ends first.
func (s *MemoryWorkSink) Publish(ctx context.Context, item WorkItem) error {
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
