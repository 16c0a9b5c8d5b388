package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoMessage is returned by LastMsg when the subject has no message,
// and by MsgAt when the sequence has none.
var ErrNoMessage = errors.New("no message on the subject")

// Purge removes every message of stream whose subject matches subject
// (wildcards allowed, for example ResultsOfResource(uid)). It returns how
// many were removed. Purging subjects nobody has is not an error.
func (c *Conn) Purge(ctx context.Context, stream, subject string) (uint64, error) {
	if subject == "" {
		return 0, fmt.Errorf("%w: purge needs a subject filter", ErrInvalidOption)
	}
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("purge %s: stream %s: %w", subject, stream, err)
	}
	before, err := s.Info(ctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, fmt.Errorf("purge %s: %w", subject, err)
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSubject(subject)); err != nil {
		return 0, fmt.Errorf("purge %s: %w", subject, err)
	}
	var n uint64
	for _, v := range before.State.Subjects {
		n += v
	}
	return n, nil
}

// LastMsg returns the last message stored on subject (a literal subject),
// or ErrNoMessage.
func (c *Conn) LastMsg(ctx context.Context, stream, subject string) (ReplayMsg, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return ReplayMsg{}, fmt.Errorf("last message of %s: stream %s: %w", subject, stream, err)
	}
	m, err := s.GetLastMsgForSubject(ctx, subject)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return ReplayMsg{}, ErrNoMessage
	case err != nil:
		return ReplayMsg{}, fmt.Errorf("last message of %s: %w", subject, err)
	}
	return ReplayMsg{Subject: m.Subject, Data: m.Data, Header: m.Header, Sequence: m.Sequence, Published: m.Time}, nil
}

// MsgAt returns the message of stream at sequence seq, or ErrNoMessage
// when there is none (deleted, purged, or never stored).
func (c *Conn) MsgAt(ctx context.Context, stream string, seq uint64) (ReplayMsg, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return ReplayMsg{}, fmt.Errorf("message %d: stream %s: %w", seq, stream, err)
	}
	m, err := s.GetMsg(ctx, seq)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return ReplayMsg{}, ErrNoMessage
	case err != nil:
		return ReplayMsg{}, fmt.Errorf("message %d of %s: %w", seq, stream, err)
	}
	return ReplayMsg{Subject: m.Subject, Data: m.Data, Header: m.Header, Sequence: m.Sequence, Published: m.Time}, nil
}

// DeleteMsg removes the message of stream at sequence seq (for example a
// result found to be forged, so that no replay brings it back). Deleting a
// message that is already gone is not an error.
func (c *Conn) DeleteMsg(ctx context.Context, stream string, seq uint64) error {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("delete message %d: stream %s: %w", seq, stream, err)
	}
	// The server's answer to deleting a missing message carries no code:
	// look first, and again after a failure (another replica may have
	// deleted it in between).
	gone := func() bool {
		_, err := s.GetMsg(ctx, seq)
		return errors.Is(err, jetstream.ErrMsgNotFound)
	}
	if gone() {
		return nil
	}
	if err := s.DeleteMsg(ctx, seq); err != nil && !gone() {
		return fmt.Errorf("delete message %d of %s: %w", seq, stream, err)
	}
	return nil
}
