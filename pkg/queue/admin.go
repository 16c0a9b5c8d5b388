package queue

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// The operator's view of the work queue: what is pending in the work
// stream, what is dead in the dead-letter stream (both named by the Conn's
// Topology), putting a dead letter back once its cause
// is fixed, and purging. Reads go through the stream's get API (one
// message at a time, by sequence and subject), never through a consumer:
// listing neither delivers nor takes anything, and needs no consumer on a
// work-queue stream, where consumers may not overlap.

// HeaderRequeued is set on a message that Requeue put back: the sequence
// of the dead letter it came from in the dead-letter stream. A message dead-lettered
// again keeps it, so its new dead letter says it was re-queued before.
const HeaderRequeued = "Verdict-Requeued"

// ListOption configures ListWork and ListDead.
type ListOption func(*listOptions) error

type listOptions struct {
	kind  WorkKind
	limit int
}

// WithListKind lists only the work of one kind (for ListDead: the dead
// letters that came from work of that kind). The list fails with
// ErrInvalidKind for a kind the topology does not name.
func WithListKind(kind WorkKind) ListOption {
	return func(o *listOptions) error {
		if kind == "" {
			return fmt.Errorf("%w: empty work kind", ErrInvalidKind)
		}
		o.kind = kind
		return nil
	}
}

// WithListLimit lists at most n messages, the oldest first (0: all).
func WithListLimit(n int) ListOption {
	return func(o *listOptions) error {
		if n < 0 {
			return fmt.Errorf("%w: list limit %d", ErrInvalidOption, n)
		}
		o.limit = n
		return nil
	}
}

func newListOptions(t Topology, opts []ListOption) (listOptions, error) {
	var o listOptions
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return o, err
		}
	}
	if o.kind != "" {
		return o, t.checkKind(o.kind)
	}
	return o, nil
}

// PendingWork is a message of the work stream: work not yet done.
type PendingWork struct {
	Sequence  uint64 // in the work stream
	Subject   string
	Kind      WorkKind // "" for a subject that is not a work subject
	Key       string
	Published time.Time
	Header    nats.Header
	Data      []byte
	// Consumer is the durable consumer whose filter selects the message,
	// "" when none does (nothing takes it).
	Consumer string
	// Delivered: the consumer has handed the message out at least once and
	// it is not done, so a handler has it now or it waits for a retry
	// after a failed attempt. The server does not say how many times.
	Delivered bool
}

// ListWork lists the messages of the work stream, oldest first, and
// whether there are more than the limit. It fails with ErrNoStream when
// the stream does not exist.
func (c *Conn) ListWork(ctx context.Context, opts ...ListOption) ([]PendingWork, bool, error) {
	t, err := c.Topology()
	if err != nil {
		return nil, false, err
	}
	o, err := newListOptions(t, opts)
	if err != nil {
		return nil, false, err
	}
	s, err := c.adminStream(ctx, t.WorkStream)
	if err != nil {
		return nil, false, err
	}
	consumers, err := workConsumers(ctx, s)
	if err != nil {
		return nil, false, err
	}
	var out []PendingWork
	more, err := each(ctx, s, t.WorkFilter(o.kind), o.limit, func(m *jetstream.RawStreamMsg) {
		p := PendingWork{Sequence: m.Sequence, Subject: m.Subject, Published: m.Time, Header: m.Header, Data: m.Data}
		if kind, key, err := t.ParseWorkSubject(m.Subject); err == nil {
			p.Kind, p.Key = kind, key
		}
		for _, cs := range consumers {
			if cs.selects(m.Subject) {
				p.Consumer, p.Delivered = cs.name, m.Sequence <= cs.delivered
				break
			}
		}
		out = append(out, p)
	})
	return out, more, err
}

// DeadEntry is a message of the dead-letter stream.
type DeadEntry struct {
	// Sequence is its sequence in the dead-letter stream: what Requeue
	// takes.
	Sequence uint64
	// Stored is when it was dead-lettered, as the stream says, and
	// StoredSubject its subject there (DeadSubject of the origin).
	Stored        time.Time
	StoredSubject string
	// DeadLetter is what its headers say (ParseDeadLetter): the reason,
	// the origin and the attempts. Its Sequence (the origin's, in its
	// stream) is DeadLetter.Sequence; Sequence above is the dead-letter
	// stream's.
	DeadLetter
	// Kind and Key are the work kind and key of the origin subject, empty
	// when the origin is not a work subject.
	Kind WorkKind
	Key  string
	// Header is every header it carries.
	Header nats.Header
	// Invalid is why it is not a dead letter a runner wrote (its headers
	// are missing or unreadable), nil for a dead letter.
	Invalid error
}

// ListDead lists the messages of the dead-letter stream, oldest first, and whether
// there are more than the limit. With WithListKind, only the dead letters
// of that kind of work. It fails with ErrNoStream when the stream does not
// exist.
func (c *Conn) ListDead(ctx context.Context, opts ...ListOption) ([]DeadEntry, bool, error) {
	t, err := c.Topology()
	if err != nil {
		return nil, false, err
	}
	o, err := newListOptions(t, opts)
	if err != nil {
		return nil, false, err
	}
	s, err := c.adminStream(ctx, t.DeadStream)
	if err != nil {
		return nil, false, err
	}
	var out []DeadEntry
	more, err := each(ctx, s, t.DeadFilter(o.kind), o.limit, func(m *jetstream.RawStreamMsg) {
		out = append(out, t.deadEntry(m))
	})
	return out, more, err
}

// DeadAt reads the message of the dead-letter stream at seq. It fails
// with ErrNoDeadLetter when there is none at seq.
func (c *Conn) DeadAt(ctx context.Context, seq uint64) (DeadEntry, error) {
	t, err := c.Topology()
	if err != nil {
		return DeadEntry{}, err
	}
	s, err := c.adminStream(ctx, t.DeadStream)
	if err != nil {
		return DeadEntry{}, err
	}
	return t.deadAt(ctx, s, seq)
}

func (t Topology) deadAt(ctx context.Context, s jetstream.Stream, seq uint64) (DeadEntry, error) {
	if seq == 0 {
		return DeadEntry{}, fmt.Errorf("%w: sequence 0 (sequences start at 1)", ErrNoDeadLetter)
	}
	m, err := s.GetMsg(ctx, seq)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return DeadEntry{}, fmt.Errorf("%w: nothing at %s sequence %d", ErrNoDeadLetter, t.DeadStream, seq)
	case err != nil:
		return DeadEntry{}, fmt.Errorf("%s sequence %d: %w", t.DeadStream, seq, err)
	}
	return t.deadEntry(m), nil
}

func (t Topology) deadEntry(m *jetstream.RawStreamMsg) DeadEntry {
	d, err := ParseDeadLetter(m.Header, m.Data)
	e := DeadEntry{Sequence: m.Sequence, Stored: m.Time, StoredSubject: m.Subject, DeadLetter: d, Header: m.Header, Invalid: err}
	if kind, key, err := t.ParseWorkSubject(d.Subject); err == nil {
		e.Kind, e.Key = kind, key
	}
	return e
}

// Requeued says where Requeue put a dead letter.
type Requeued struct {
	DeadSequence uint64 // the dead letter's sequence in the dead-letter stream (now deleted)
	Subject      string // its origin subject, where it was published again
	Stream       string // the stream that stored it
	Sequence     uint64 // its new sequence there
	// Duplicate: the stream already had this re-queue (an earlier Requeue
	// of the same dead letter published it and failed to delete the dead
	// letter), so it was not stored twice.
	Duplicate bool
}

// Requeue puts the dead letter at seq of the dead-letter stream back where it came
// from: its payload and headers (without the dead-letter headers and NATS'
// own, with HeaderRequeued) are published again to its origin subject, in
// its origin stream, and only once that stream has acknowledged it is the
// dead letter deleted. The message id is derived from the dead letter, not
// the original's: the original's id may still be in the duplicate window,
// which would swallow the message; a repeated Requeue of the same dead
// letter (the delete failed) is stored once.
//
// It fails with ErrNoDeadLetter when there is no dead letter at seq (or
// the message there is not one), with ErrNoStream when the origin stream
// does not exist, and with the errors of PublishSync; in all of these the
// dead letter stays. If the publish succeeds and the delete fails, the
// result says where it went and the error says the dead letter stays.
func (c *Conn) Requeue(ctx context.Context, seq uint64) (Requeued, error) {
	t, err := c.Topology()
	if err != nil {
		return Requeued{}, err
	}
	dead, err := c.adminStream(ctx, t.DeadStream)
	if err != nil {
		return Requeued{}, err
	}
	d, err := t.deadAt(ctx, dead, seq)
	if err != nil {
		return Requeued{}, err
	}
	if d.Invalid != nil {
		return Requeued{}, fmt.Errorf("%w: %s sequence %d: %w", ErrNoDeadLetter, t.DeadStream, seq, d.Invalid)
	}
	origin, err := c.adminStream(ctx, d.Stream)
	if err != nil {
		return Requeued{}, fmt.Errorf("re-queue %d to %s: %w", seq, d.Subject, err)
	}
	if !selectsAny(origin.CachedInfo().Config.Subjects, d.Subject) {
		return Requeued{}, fmt.Errorf("%w: re-queue %d: %s no longer takes %s", ErrInvalidSubject, seq, d.Stream, d.Subject)
	}
	h := make(nats.Header, len(d.Header))
	for k, v := range d.Header {
		if strings.HasPrefix(k, "Nats-") || strings.HasPrefix(k, "Verdict-Dead-") {
			continue
		}
		h[k] = v
	}
	h.Set(HeaderRequeued, strconv.FormatUint(seq, 10))
	msg := Message{
		Subject: d.Subject,
		ID:      MsgID("requeue", t.DeadStream, strconv.FormatUint(seq, 10), d.Stream, strconv.FormatUint(d.DeadLetter.Sequence, 10)),
		Data:    d.Data,
		Header:  h,
	}
	ack, err := c.PublishSync(ctx, msg)
	if err != nil {
		return Requeued{}, fmt.Errorf("re-queue %d to %s: %w", seq, d.Subject, err)
	}
	res := Requeued{DeadSequence: seq, Subject: d.Subject, Stream: ack.Stream, Sequence: ack.Sequence, Duplicate: ack.Duplicate}
	if err := c.DeleteMsg(ctx, t.DeadStream, seq); err != nil {
		return res, fmt.Errorf("re-queued %d to %s, but the dead letter stays (re-queue it again to delete it; it is not stored twice within the duplicate window): %w", seq, d.Subject, err)
	}
	c.log.Info().Uint64(logKeySequence, seq).Str(logKeySubject, d.Subject).Msg("deadLetterRequeued")
	return res, nil
}

// PurgeDead removes the dead letters of one kind of work, or all of them
// (kind ""), and says how many.
func (c *Conn) PurgeDead(ctx context.Context, kind WorkKind) (uint64, error) {
	t, err := c.Topology()
	if err != nil {
		return 0, err
	}
	if kind != "" {
		if err := t.checkKind(kind); err != nil {
			return 0, err
		}
	}
	if _, err := c.adminStream(ctx, t.DeadStream); err != nil {
		return 0, err
	}
	return c.Purge(ctx, t.DeadStream, t.DeadFilter(kind))
}

// PurgeWork removes the pending work of one kind (done or not, in a
// handler or waiting) and says how many. A handler that has one of them
// finishes it; its answer then finds nothing to acknowledge.
func (c *Conn) PurgeWork(ctx context.Context, kind WorkKind) (uint64, error) {
	t, err := c.Topology()
	if err != nil {
		return 0, err
	}
	if err := t.checkKind(kind); err != nil {
		return 0, err
	}
	if _, err := c.adminStream(ctx, t.WorkStream); err != nil {
		return 0, err
	}
	return c.Purge(ctx, t.WorkStream, t.WorkFilter(kind))
}

// NoStreamError says which stream does not exist; it is an ErrNoStream.
type NoStreamError struct{ Stream string }

func (e *NoStreamError) Error() string { return ErrNoStream.Error() + ": " + e.Stream }

// Is makes errors.Is(err, ErrNoStream) hold.
func (e *NoStreamError) Is(target error) bool { return target == ErrNoStream }

// adminStream looks a stream up, with ErrNoStream when it does not exist
// and ErrNoJetStream when nothing answers JetStream's API.
func (c *Conn) adminStream(ctx context.Context, name string) (jetstream.Stream, error) {
	s, err := c.js.Stream(ctx, name)
	switch {
	case err == nil:
		return s, nil
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, &NoStreamError{Stream: name}
	case errors.Is(err, jetstream.ErrJetStreamNotEnabled), errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount),
		errors.Is(err, nats.ErrNoResponders):
		return nil, fmt.Errorf("%w: stream %s: %w", ErrNoJetStream, name, err)
	}
	return nil, fmt.Errorf("stream %s: %w", name, err)
}

// each hands fn the messages of s whose subjects match filter, oldest
// first, at most limit (0: all), and reports whether there are more.
func each(ctx context.Context, s jetstream.Stream, filter string, limit int, fn func(*jetstream.RawStreamMsg)) (bool, error) {
	seq := max(s.CachedInfo().State.FirstSeq, 1)
	for n := 0; ; n++ {
		m, err := s.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(filter))
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
			return false, nil
		case err != nil:
			return false, fmt.Errorf("read %s at %d: %w", s.CachedInfo().Config.Name, seq, err)
		}
		if limit > 0 && n == limit {
			return true, nil
		}
		fn(m)
		seq = m.Sequence + 1
	}
}

// consumerState is what ListWork needs of a consumer of the work stream.
type consumerState struct {
	name      string
	filters   []string
	delivered uint64 // the last stream sequence it delivered
}

func (cs consumerState) selects(subject string) bool { return selectsAny(cs.filters, subject) }

func workConsumers(ctx context.Context, s jetstream.Stream) ([]consumerState, error) {
	var out []consumerState
	lister := s.ListConsumers(ctx)
	for info := range lister.Info() {
		filters := info.Config.FilterSubjects
		if f := info.Config.FilterSubject; f != "" {
			filters = append(filters, f)
		}
		if len(filters) == 0 {
			filters = []string{">"}
		}
		out = append(out, consumerState{name: info.Name, filters: filters, delivered: info.Delivered.Stream})
	}
	if err := lister.Err(); err != nil {
		return nil, fmt.Errorf("consumers of %s: %w", s.CachedInfo().Config.Name, err)
	}
	return out, nil
}

// selectsAny reports whether one of the filters (with * and > wildcards)
// matches the literal subject.
func selectsAny(filters []string, subject string) bool {
	for _, f := range filters {
		if SubjectMatches(f, subject) {
			return true
		}
	}
	return false
}

// SubjectMatches reports whether filter matches the literal subject: '*'
// matches one token, a final '>' one or more.
func SubjectMatches(filter, subject string) bool {
	for {
		ft, frest, fmore := strings.Cut(filter, ".")
		st, srest, smore := strings.Cut(subject, ".")
		switch {
		case ft == ">" && !fmore:
			return st != ""
		case ft != "*" && ft != st:
			return false
		case fmore != smore:
			return false
		case !fmore:
			return true
		}
		filter, subject = frest, srest
	}
}
