package webhook

import (
	"context"

	evt "github.com/verdict-dev/verdict/internal/bus"
)

// The event schema lives in internal/bus, shared with the worker
// services; these names keep the webhook's API readable.
type (
	ResourceRef = evt.ResourceRef
	PolicyRef   = evt.PolicyRef
	RuleResult  = evt.RuleResult
	ResultEvent = evt.ResultEvent
	WorkItem    = evt.WorkItem
	Decision    = evt.Decision
	Finding     = evt.Finding
)

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

// DecisionSink records admission decisions: the admission log
// (VERDICT_DECISIONS). Record must not block, as ResultSink.Publish; the
// answer never waits on it and is never changed by it. Flush waits until
// everything recorded so far has left the process, or ctx ends.
type DecisionSink interface {
	Record(d Decision)
	Flush(ctx context.Context) error
}

// NopResultSink discards results.
type NopResultSink struct{}

// Publish discards the events.
func (NopResultSink) Publish(context.Context, []ResultEvent) {}

// Flush has nothing to flush.
func (NopResultSink) Flush(context.Context) error { return nil }

// unavailableWorkSink is the default when no work sink is wired in: every
// publish fails, and Config.OnWorkPublishFailure decides.
type unavailableWorkSink struct{}

func (unavailableWorkSink) Publish(context.Context, WorkItem) error { return ErrWorkSinkUnavailable }
