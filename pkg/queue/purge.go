package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoMessage is returned by LastMsg when the subject has no message.
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
