package queue

import (
	"fmt"
	"time"
)

// Outcome is what a handler decided about one message. Make one with Done,
// Retry, RetryAfter or Poison; the zero Outcome is treated as Retry (and
// logged), so a forgotten return value never acknowledges work.
type Outcome struct {
	kind   outcomeKind
	delay  time.Duration
	reason string
}

type outcomeKind uint8

const (
	outcomeUnset outcomeKind = iota
	outcomeDone
	outcomeRetry
	outcomePoison
)

// Done: the work is finished; the message is acknowledged (and, on a
// work-queue stream, removed).
func Done() Outcome { return Outcome{kind: outcomeDone} }

// Retry: a transient failure; the message is delivered again after the
// runner's backoff for its delivery count (see WithRetryDelays).
func Retry() Outcome { return Outcome{kind: outcomeRetry} }

// RetryAfter: a transient failure; the message is delivered again after d
// (d <= 0 means the runner's backoff, as Retry).
func RetryAfter(d time.Duration) Outcome { return Outcome{kind: outcomeRetry, delay: d} }

// Poison: the message can never be processed; it goes to the dead-letter
// stream with reason at once, without further attempts.
func Poison(reason string) Outcome { return Outcome{kind: outcomePoison, reason: reason} }

// Because attaches the cause of a retry; if the attempts run out, it is
// the reason the dead letter carries.
func (o Outcome) Because(err error) Outcome {
	if err != nil {
		o.reason = err.Error()
	}
	return o
}

// String describes the outcome for logs and tests.
func (o Outcome) String() string {
	switch o.kind {
	case outcomeDone:
		return "done"
	case outcomeRetry:
		if o.delay > 0 {
			return fmt.Sprintf("retry after %s", o.delay)
		}
		return "retry"
	case outcomePoison:
		return "poison: " + o.reason
	}
	return "unset"
}
