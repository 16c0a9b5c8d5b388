package queue

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// ErrSpoolFull is returned by Spool.Append when the spool holds its
// bound: the message is not kept on disk (it may still be published).
var ErrSpoolFull = errors.New("spool full")

// Spool bounds.
const (
	// spoolSegmentBytes and spoolSegmentAge close a segment: the smaller
	// the segments, the fewer acknowledged messages a restart publishes
	// again (the stream's duplicate window drops those it still knows).
	spoolSegmentBytes = 256 << 10
	spoolSegmentAge   = time.Second
	spoolSuffix       = ".spool"
	// maxSpoolRecord bounds one record as read back (a torn or foreign
	// file is not trusted for a length).
	maxSpoolRecord = 16 << 20
)

// Spool keeps messages in files of a local folder from the moment they
// are taken until the stream acknowledges them (an AsyncPublisher's
// WithAckHandler calls Acked), so that what a process held when it was
// killed (SIGKILL, the OOM killer) is published when it starts again
// (Recover), and what its publisher gave up on (NATS away past the
// messages' deadline, a full buffer: GivenUp) is published again later
// (Resend). Files are written, not synced: they survive the process, not
// the machine. Messages are kept in segments; a segment whose messages
// are all acknowledged is deleted. A message published again under its id
// within the stream's duplicate window is stored once.
type Spool struct {
	dir      string
	maxBytes int64
	now      func() time.Time

	mu    sync.Mutex
	cur   *spoolSegment
	segs  map[uint64]*spoolSegment // by number, the current one included
	where map[string]*spoolSegment // unacknowledged message ids
	bytes int64
	next  uint64
	buf   []byte
}

type spoolSegment struct {
	n       uint64
	path    string
	f       *os.File // the current segment's; nil once closed
	size    int64
	opened  time.Time
	pending int // messages not acknowledged
	givenUp int // of which the publisher gave up on
}

// OpenSpool opens (creating it) the spool in dir, bounded to maxBytes on
// disk. Segments a previous process left are not read here: Recover
// publishes them.
func OpenSpool(dir string, maxBytes int64) (*Spool, error) {
	if maxBytes <= 0 {
		return nil, fmt.Errorf("%w: spool bound %d", ErrInvalidOption, maxBytes)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	s := &Spool{dir: dir, maxBytes: maxBytes, now: time.Now, segs: map[uint64]*spoolSegment{}, where: map[string]*spoolSegment{}}
	old, err := s.segmentFiles()
	if err != nil {
		return nil, err
	}
	for _, n := range old {
		s.next = max(s.next, n+1)
	}
	return s, nil
}

// segmentFiles lists the segment numbers in the folder, in order.
func (s *Spool) segmentFiles() ([]uint64, error) {
	entries, err := os.ReadDir(s.dir)
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	var out []uint64
	for _, e := range entries {
		name, ok := strings.CutSuffix(e.Name(), spoolSuffix)
		if !ok || e.IsDir() {
			continue
		}
		if n, err := strconv.ParseUint(name, 10, 64); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (s *Spool) segmentPath(n uint64) string {
	return filepath.Join(s.dir, fmt.Sprintf("%020d%s", n, spoolSuffix))
}

// Recover publishes, through publish, what the segments a previous
// process left hold: each message is kept again (in a new segment) before
// its old segment is deleted, so a process killed meanwhile loses
// nothing. It returns how many messages it handed to publish; a record
// cut short (the process was killed in the middle of a write) ends its
// segment.
func (s *Spool) Recover(publish func(Message) error) (int, error) {
	s.mu.Lock()
	limit := s.next
	s.mu.Unlock()
	old, err := s.segmentFiles()
	if err != nil {
		return 0, err
	}
	n := 0
	for _, seg := range old {
		if seg >= limit {
			continue // written by this process
		}
		path := s.segmentPath(seg)
		msgs, err := readSpoolSegment(path)
		if err != nil {
			return n, err
		}
		for _, m := range msgs {
			if err := s.Append(m); err != nil && !errors.Is(err, ErrSpoolFull) {
				return n, err
			}
			if err := publish(m); err != nil {
				s.GivenUp(m.ID)
			}
			n++
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return n, fmt.Errorf("spool: %w", err)
		}
	}
	return n, nil
}

// Append keeps m on disk until Acked(m.ID). It fails with ErrSpoolFull
// past the spool's bound.
func (s *Spool) Append(m Message) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, held := s.where[m.ID]; held {
		return nil // kept already (published again)
	}
	s.buf = appendSpoolRecord(s.buf[:0], m)
	if s.bytes+int64(len(s.buf)) > s.maxBytes {
		return fmt.Errorf("%w: %d of %d bytes", ErrSpoolFull, s.bytes, s.maxBytes)
	}
	if s.cur == nil || s.cur.size >= spoolSegmentBytes || s.now().Sub(s.cur.opened) >= spoolSegmentAge {
		if err := s.rotate(); err != nil {
			return err
		}
	}
	if _, err := s.cur.f.Write(s.buf); err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	s.cur.size += int64(len(s.buf))
	s.bytes += int64(len(s.buf))
	s.cur.pending++
	s.where[m.ID] = s.cur
	return nil
}

// rotate closes the current segment (deleted if nothing in it is
// pending) and opens the next.
func (s *Spool) rotate() error {
	if c := s.cur; c != nil {
		_ = c.f.Close()
		c.f = nil
		s.cur = nil
		if c.pending == 0 {
			s.remove(c)
		}
	}
	n := s.next
	path := s.segmentPath(n)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("spool: %w", err)
	}
	s.next++
	s.cur = &spoolSegment{n: n, path: path, f: f, opened: s.now()}
	s.segs[n] = s.cur
	return nil
}

func (s *Spool) remove(seg *spoolSegment) {
	delete(s.segs, seg.n)
	s.bytes -= seg.size
	_ = os.Remove(seg.path)
}

// Acked forgets the message id: the stream has it.
func (s *Spool) Acked(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	seg, ok := s.where[id]
	if !ok {
		return
	}
	delete(s.where, id)
	seg.pending--
	if seg.pending == 0 && seg.f == nil {
		s.remove(seg)
	}
}

// GivenUp says the publisher gave up on message id: Resend publishes it
// again.
func (s *Spool) GivenUp(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if seg, ok := s.where[id]; ok {
		seg.givenUp++
	}
}

// Resend publishes again, through publish, the messages the publisher
// gave up on, segment by segment (each kept again in the current segment
// first), and returns how many. Called while the connection is up.
func (s *Spool) Resend(publish func(Message) error) (int, error) {
	s.mu.Lock()
	if c := s.cur; c != nil && c.givenUp > 0 {
		// Closed now: no later message may be coming to rotate it.
		_ = c.f.Close()
		c.f = nil
		s.cur = nil
	}
	var due []*spoolSegment
	for _, seg := range s.segs {
		if seg.givenUp > 0 && seg != s.cur {
			due = append(due, seg)
		}
	}
	s.mu.Unlock()
	slices.SortFunc(due, func(a, b *spoolSegment) int { return int(a.n) - int(b.n) })
	n := 0
	for _, seg := range due {
		msgs, err := readSpoolSegment(seg.path)
		if err != nil {
			return n, err
		}
		var again []Message
		s.mu.Lock()
		for _, m := range msgs {
			if s.where[m.ID] == seg {
				delete(s.where, m.ID)
				seg.pending--
				again = append(again, m)
			}
		}
		if seg.pending == 0 {
			s.remove(seg)
		}
		s.mu.Unlock()
		for _, m := range again {
			if err := s.Append(m); err != nil && !errors.Is(err, ErrSpoolFull) {
				return n, err
			}
			if err := publish(m); err != nil {
				s.GivenUp(m.ID)
			}
			n++
		}
	}
	return n, nil
}

// Stats are what the spool holds: messages not acknowledged, and bytes on
// disk.
func (s *Spool) Stats() (pending int, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.where), s.bytes
}

// Close closes the current segment; what is not acknowledged stays for
// the next process's Recover.
func (s *Spool) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.cur; c != nil {
		s.cur = nil
		err := c.f.Close()
		c.f = nil
		if c.pending == 0 {
			s.remove(c)
		}
		return err
	}
	return nil
}

// A record: its length (uint32, big endian, of what follows), then the
// subject, the id and the data, each with its uint32 length.
func appendSpoolRecord(b []byte, m Message) []byte {
	n := 12 + len(m.Subject) + len(m.ID) + len(m.Data)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	for _, f := range [][]byte{[]byte(m.Subject), []byte(m.ID), m.Data} {
		b = binary.BigEndian.AppendUint32(b, uint32(len(f)))
		b = append(b, f...)
	}
	return b
}

// readSpoolSegment reads a segment's records; a record cut short ends it.
func readSpoolSegment(path string) ([]Message, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("spool: %w", err)
	}
	defer func() { _ = f.Close() }()
	r := bufio.NewReader(f)
	var out []Message
	var head [4]byte
	for {
		if _, err := io.ReadFull(r, head[:]); err != nil {
			return out, nil // the end, or a length cut short
		}
		n := binary.BigEndian.Uint32(head[:])
		if n < 12 || n > maxSpoolRecord {
			return out, nil // not a record: the rest is not trusted
		}
		rec := make([]byte, n)
		if _, err := io.ReadFull(r, rec); err != nil {
			return out, nil // cut short
		}
		var fields [3][]byte
		ok := true
		for i := range fields {
			if len(rec) < 4 {
				ok = false
				break
			}
			l := binary.BigEndian.Uint32(rec)
			rec = rec[4:]
			if uint64(l) > uint64(len(rec)) {
				ok = false
				break
			}
			fields[i], rec = rec[:l], rec[l:]
		}
		if !ok || len(rec) != 0 {
			return out, nil
		}
		m := Message{Subject: string(fields[0]), ID: string(fields[1]), Data: fields[2]}
		if m.Validate() != nil {
			return out, nil
		}
		out = append(out, m)
	}
}
