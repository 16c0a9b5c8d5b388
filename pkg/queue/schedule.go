package queue

import (
	"bytes"
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoSchedule is returned by GetSchedule when there is no schedule for
// the kind and key.
var ErrNoSchedule = errors.New("queue: no such schedule")

// Schedule is a recurring JetStream message schedule whose ticks are
// work: it lives in the topology's schedule stream on
// ScheduleSubject(Kind, Key), and at each tick the server stores a message
// with its Data on ScheduleTarget(Kind, Key), which the work stream sources
// as WorkSubject(Kind, Key), where the worker consumers take it. No leader,
// no cron job: the server fires the ticks, and each tick is one work item
// that one worker takes.
type Schedule struct {
	Kind WorkKind
	Key  string
	// Spec is the server's schedule: "@every 1m" (at least a second), a
	// six-field cron expression with seconds first ("0 */5 * * * *"), or
	// @yearly, @annually, @monthly, @weekly, @daily, @midnight, @hourly.
	// A tick that would fire several times (after an outage) fires once.
	Spec string
	// TimeZone is the IANA zone a cron Spec is read in ("": UTC); the
	// server refuses it with @every.
	TimeZone string
	// Data is the body of every tick.
	Data []byte
	// Sequence is the schedule's message in the schedule stream (set by
	// GetSchedule, Schedules and PutSchedule; ignored by PutSchedule).
	Sequence uint64
}

// same reports whether s and o fire the same ticks.
func (s Schedule) same(o Schedule) bool {
	return s.Kind == o.Kind && s.Key == o.Key && s.Spec == o.Spec && s.TimeZone == o.TimeZone && bytes.Equal(s.Data, o.Data)
}

// ScheduleChange is what PutSchedule did.
type ScheduleChange string

// What PutSchedule did.
const (
	// ScheduleCreated: there was no schedule; there is one now.
	ScheduleCreated ScheduleChange = "created"
	// ScheduleReplaced: a different schedule was replaced.
	ScheduleReplaced ScheduleChange = "replaced"
	// ScheduleUnchanged: the same schedule was there; nothing was written
	// (its next tick stays when it was).
	ScheduleUnchanged ScheduleChange = "unchanged"
	// ScheduleKept: a different schedule was there and the caller's
	// guard kept it (another writer's newer one).
	ScheduleKept ScheduleChange = "kept"
)

// scheduleTopology is the Conn's topology when it names a schedule stream.
func (c *Conn) scheduleTopology() (Topology, error) {
	t, err := c.Topology()
	if err == nil && t.ScheduleStream == "" {
		err = fmt.Errorf("%w: its topology names no schedule stream", ErrNoTopology)
	}
	return t, err
}

// parseScheduleSubject splits a ScheduleSubject subject.
func (t Topology) parseScheduleSubject(subject string) (WorkKind, string, error) {
	return t.parseKindKey(subject, t.SchedulePrefix, "schedule")
}

// scheduleFromMsg reads a stored schedule message back.
func (t Topology) scheduleFromMsg(subject string, h nats.Header, data []byte, seq uint64) (Schedule, error) {
	kind, key, err := t.parseScheduleSubject(subject)
	if err != nil {
		return Schedule{}, err
	}
	return Schedule{
		Kind: kind, Key: key,
		Spec:     h.Get(jetstream.ScheduleHeader),
		TimeZone: h.Get(jetstream.ScheduleTimeZoneHeader),
		Data:     data, Sequence: seq,
	}, nil
}

// GetSchedule reads the schedule of kind on key, or fails with
// ErrNoSchedule.
func (c *Conn) GetSchedule(ctx context.Context, kind WorkKind, key string) (Schedule, error) {
	t, err := c.scheduleTopology()
	if err != nil {
		return Schedule{}, err
	}
	subject, err := t.ScheduleSubject(kind, key)
	if err != nil {
		return Schedule{}, err
	}
	m, err := c.LastMsg(ctx, t.ScheduleStream, subject)
	if errors.Is(err, ErrNoMessage) {
		return Schedule{}, fmt.Errorf("%w: %s", ErrNoSchedule, subject)
	}
	if err != nil {
		return Schedule{}, err
	}
	if m.Header.Get(jetstream.ScheduleHeader) == "" {
		// Not a schedule (nothing else should be published there): as
		// good as none; a put replaces it.
		return Schedule{Kind: kind, Key: key, Sequence: m.Sequence}, fmt.Errorf("%w: %s holds a message that is not a schedule", ErrNoSchedule, subject)
	}
	return t.scheduleFromMsg(m.Subject, m.Header, m.Data, m.Sequence)
}

// PutSchedule makes s the schedule of s.Kind on s.Key, idempotently and
// safely from any number of writers at once: an equal schedule is left as
// it is (no write, ScheduleUnchanged); otherwise s is written with the
// sequence of the schedule it replaces as the expected last sequence of
// the subject, so that of two writers racing one wins and the other reads
// again and decides again. A different schedule is replaced unless keep
// (when not nil) says to keep it (ScheduleKept): a guard so that an older
// state never overwrites a newer one. The server checks the schedule: a
// spec it cannot read is ErrPublishRejected.
func (c *Conn) PutSchedule(ctx context.Context, s Schedule, keep func(current Schedule) bool) (ScheduleChange, error) {
	t, err := c.scheduleTopology()
	if err != nil {
		return "", err
	}
	subject, err := t.ScheduleSubject(s.Kind, s.Key)
	if err != nil {
		return "", err
	}
	target, err := t.ScheduleTarget(s.Kind, s.Key)
	if err != nil {
		return "", err
	}
	if s.Spec == "" {
		return "", fmt.Errorf("%w: schedule %s has no spec", ErrInvalidOption, subject)
	}
	for attempt := 0; ; attempt++ {
		cur, err := c.GetSchedule(ctx, s.Kind, s.Key)
		exists := err == nil
		switch {
		case exists && cur.same(s):
			return ScheduleUnchanged, nil
		case exists && keep != nil && keep(cur):
			return ScheduleKept, nil
		case err != nil && !errors.Is(err, ErrNoSchedule):
			return "", err
		}
		msg := nats.NewMsg(subject)
		msg.Data = s.Data
		opts := []jetstream.PublishOpt{
			jetstream.WithScheduleTarget(target),
			jetstream.WithExpectLastSequencePerSubject(cur.Sequence),
		}
		if s.TimeZone != "" {
			opts = append(opts, jetstream.WithScheduleTimeZone(s.TimeZone))
		}
		// The spec is set as written: WithScheduleCron takes any form.
		opts = append(opts, jetstream.WithScheduleCron(s.Spec))
		_, err = c.js.PublishMsg(ctx, msg, opts...)
		switch {
		case err == nil && exists:
			return ScheduleReplaced, nil
		case err == nil:
			return ScheduleCreated, nil
		case wrongLastSequence(err) && attempt < 10:
			continue // another writer won: read again, decide again
		case permanent(err):
			return "", fmt.Errorf("%w: schedule %s (%q): %w", ErrPublishRejected, subject, s.Spec, err)
		}
		return "", fmt.Errorf("put schedule %s: %w", subject, err)
	}
}

// wrongLastSequence reports whether a publish failed its expected last
// subject sequence (another writer was first): code 10071, or 10164 on a
// replicated stream.
func wrongLastSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) &&
		(apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence || apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant)
}

// DeleteSchedule removes the schedule of kind on key when match (nil:
// any) says it is the one to remove, and the last tick it stored and
// the work stream has not sourced yet. It removes the message it read, by
// sequence: a schedule another writer put in between is never removed.
// It reports whether it removed one; no schedule is not an error.
func (c *Conn) DeleteSchedule(ctx context.Context, kind WorkKind, key string, match func(Schedule) bool) (bool, error) {
	t, err := c.scheduleTopology()
	if err != nil {
		return false, err
	}
	cur, err := c.GetSchedule(ctx, kind, key)
	if errors.Is(err, ErrNoSchedule) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if match != nil && !match(cur) {
		return false, nil
	}
	if err := c.DeleteMsg(ctx, t.ScheduleStream, cur.Sequence); err != nil {
		return false, fmt.Errorf("delete schedule %s %s: %w", kind, key, err)
	}
	if target, err := t.ScheduleTarget(kind, key); err == nil {
		if _, err := c.Purge(ctx, t.ScheduleStream, target); err != nil {
			c.log.Warn().Err(err).Str(logKeySubject, target).Msg("scheduleTickNotPurged")
		}
	}
	return true, nil
}

// Schedules lists the schedules of every key of one kind, in stream
// order.
func (c *Conn) Schedules(ctx context.Context, kind WorkKind) ([]Schedule, error) {
	t, err := c.scheduleTopology()
	if err != nil {
		return nil, err
	}
	if err := t.checkKind(kind); err != nil {
		return nil, err
	}
	var out []Schedule
	_, err = c.Replay(ctx, t.ScheduleStream, func(m ReplayMsg) error {
		if m.Header.Get(jetstream.ScheduleHeader) == "" {
			return nil
		}
		s, err := t.scheduleFromMsg(m.Subject, m.Header, m.Data, m.Sequence)
		if err != nil {
			return nil // not one of ours: leave it
		}
		out = append(out, s)
		return nil
	}, WithReplayFilter(t.ScheduleFilter(kind)))
	if err != nil {
		return nil, fmt.Errorf("list %s schedules: %w", kind, err)
	}
	return out, nil
}
