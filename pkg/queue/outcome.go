package queue

import (
	"fmt"
	"time"
)

// Outcome is what a handler decided about one message. Make one with Done,
// Skip, Retry, RetryAfter or Poison; the zero Outcome is treated as Retry
// (and logged), so a forgotten return value never acknowledges work.
//
// An outcome may name its reason (For), a word from a fixed vocabulary of
// the handler's ("applied", "policyGone", "apiError"), and its detail
// (Because, or Skip's and Poison's text). The runner counts every message
// by consumer, work kind, outcome and reason
// (verdict_queue_work_items_total), and logs it (workItemHandled) with the
// detail: a worker needs no bookkeeping of its own.
type Outcome struct {
	kind    outcomeKind
	skipped bool
	delay   time.Duration
	// reason is the metric's reason label; cause the free text a dead
	// letter carries and the log's detail.
	reason string
	cause  string
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

// Skip: there was nothing to do, for reason (detail says more); the
// message is acknowledged as with Done, and counted as skipped.
func Skip(reason, detail string) Outcome {
	return Outcome{kind: outcomeDone, skipped: true, reason: reason, cause: detail}
}

// Retry: a transient failure; the message is delivered again after the
// runner's backoff for its delivery count (see WithRetryDelays).
func Retry() Outcome { return Outcome{kind: outcomeRetry} }

// RetryAfter: a transient failure; the message is delivered again after d
// (d <= 0 means the runner's backoff, as Retry).
func RetryAfter(d time.Duration) Outcome { return Outcome{kind: outcomeRetry, delay: d} }

// Poison: the message can never be processed; it goes to the dead-letter
// stream at once, without further attempts, with why: "poison: why", or
// "poison: reason: why" when the outcome names its reason (For).
func Poison(why string) Outcome { return Outcome{kind: outcomePoison, cause: why} }

// Because attaches the cause of a retry; if the attempts run out, it is
// the reason the dead letter carries.
func (o Outcome) Because(err error) Outcome {
	if err != nil {
		o.cause = err.Error()
	}
	return o
}

// For names the outcome's reason, the reason label of the runner's
// metric: one of a handful of words, never free text.
func (o Outcome) For(reason string) Outcome {
	o.reason = reason
	return o
}

// Detailed attaches free text saying more (logged with the outcome).
func (o Outcome) Detailed(detail string) Outcome {
	o.cause = detail
	return o
}

// Reason is the outcome's reason (For, Skip), "" when it names none.
func (o Outcome) Reason() string { return o.reason }

// Detail is the outcome's free text: a skip's detail, a retry's cause, why
// a message is poison.
func (o Outcome) Detail() string { return o.cause }

// Results of a handled message, as Result names them.
const (
	ResultProcessed    = "processed"
	ResultSkipped      = "skipped"
	ResultRetried      = "retried"
	ResultDeadLettered = "deadLettered"
)

// Result says what the runner does with m for this outcome: processed,
// skipped, retried, or deadLettered (poison, or a retry on m's last
// attempt).
func (o Outcome) Result(m *Msg) string {
	switch {
	case o.kind == outcomeDone && o.skipped:
		return ResultSkipped
	case o.kind == outcomeDone:
		return ResultProcessed
	case o.kind == outcomePoison, m != nil && m.LastAttempt():
		return ResultDeadLettered
	}
	return ResultRetried
}

// deadLetterReason is the reason a dead letter of a poison outcome
// carries.
func (o Outcome) deadLetterReason() string {
	if o.reason != "" {
		return "poison: " + o.reason + ": " + o.cause
	}
	return "poison: " + o.cause
}

// String describes the outcome for logs and tests.
func (o Outcome) String() string {
	switch o.kind {
	case outcomeDone:
		if o.skipped {
			return "skipped: " + o.reason
		}
		return "done"
	case outcomeRetry:
		if o.delay > 0 {
			return fmt.Sprintf("retry after %s", o.delay)
		}
		return "retry"
	case outcomePoison:
		return o.deadLetterReason()
	}
	return "unset"
}
