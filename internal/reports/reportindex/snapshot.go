package reportindex

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/reports/model"
)

// A snapshot is the index written out at a stream sequence, for a replica
// to start from instead of folding VERDICT_RESULTS from its first message
// (Feed, WithSnapshots). The fold is idempotent and does not depend on
// the order results arrive in, so a snapshot need not be taken at one
// instant: it records a resume sequence, taken before it is written, at
// which every result of the stream up to it was settled (applied, or left
// out for good); the entries are written a chunk at a time, each as it is
// then, so they hold at least that; and the replica reading it follows the
// stream from the resume sequence on, applying again what the snapshot may
// already hold (a no-op).
//
// The format is binary, little of it fixed: after the magic and the
// format version, the resume sequence and the version the index had
// reached, then entries, each announced by a 1 byte and the whole ended by
// a 0 byte and the entry count. Integers are varints. Strings the index
// interns are written in full the first time (a 0, the length, the bytes)
// and as their number plus one after that; policy versions likewise.
// Every count and length is bounded on reading: a damaged or hostile
// snapshot is an error, never an allocation it dictates.

// snapshotMagic starts every snapshot; snapshotFormat is this format.
// Format 2 adds each rule's properties (a count, then keys and values);
// a format 1 snapshot, whose rules have none, is still read.
const (
	snapshotMagic  = "VRIX"
	snapshotFormat = 2
)

// Bounds a snapshot must keep within.
const (
	maxSnapshotString  = 1 << 20
	maxSnapshotResults = 1 << 16
	maxSnapshotRules   = 1 << 16
)

// snapshotChunk is how many entries are written per hold of the read
// lock: the feed applies results in between.
const snapshotChunk = 1024

// ErrBadSnapshot: the snapshot cannot be read (damaged, truncated, of
// another format).
var ErrBadSnapshot = errors.New("unreadable report index snapshot")

// snapshotResume is the sequence a snapshot taken now resumes from: the
// stream position, or just before the oldest result still pending.
func (x *Index) snapshotResume() uint64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.hold > 0 {
		return min(x.seq, x.hold-1)
	}
	return x.seq
}

// WriteSnapshot writes the index to w as a snapshot that resumes from
// resume, which snapshotResume gave before (so the caller can label what
// it stores before writing it).
func (x *Index) WriteSnapshot(w io.Writer, resume uint64) error {
	x.mu.RLock()
	version := max(x.version, x.seq<<versionShift)
	uids := make([]string, 0, len(x.entries))
	for uid := range x.entries {
		uids = append(uids, uid)
	}
	x.mu.RUnlock()

	enc := snapshotEncoder{strs: map[str]uint64{}, policies: map[*policyVersion]uint64{}}
	enc.buf.WriteString(snapshotMagic)
	enc.uint(snapshotFormat)
	enc.uint(resume)
	enc.uint(version)
	count := 0
	for lo := 0; lo < len(uids); lo += snapshotChunk {
		x.mu.RLock()
		for _, uid := range uids[lo:min(lo+snapshotChunk, len(uids))] {
			e := x.entries[uid]
			if e == nil {
				continue // forgotten since
			}
			enc.buf.WriteByte(1)
			enc.entry(uid, e)
			count++
		}
		x.mu.RUnlock()
		if _, err := w.Write(enc.buf.Bytes()); err != nil {
			return fmt.Errorf("write report index snapshot: %w", err)
		}
		enc.buf.Reset()
	}
	enc.buf.WriteByte(0)
	enc.uint(uint64(count))
	if _, err := w.Write(enc.buf.Bytes()); err != nil {
		return fmt.Errorf("write report index snapshot: %w", err)
	}
	return nil
}

type snapshotEncoder struct {
	buf      bytes.Buffer
	tmp      [binary.MaxVarintLen64]byte
	strs     map[str]uint64
	policies map[*policyVersion]uint64
}

func (s *snapshotEncoder) uint(v uint64) { s.buf.Write(binary.AppendUvarint(s.tmp[:0], v)) }
func (s *snapshotEncoder) int(v int64)   { s.buf.Write(binary.AppendVarint(s.tmp[:0], v)) }

func (s *snapshotEncoder) bytes(v string) {
	s.uint(uint64(len(v)))
	s.buf.WriteString(v)
}

func (s *snapshotEncoder) str(v str) {
	if n, ok := s.strs[v]; ok {
		s.uint(n + 1)
		return
	}
	s.strs[v] = uint64(len(s.strs))
	s.uint(0)
	s.bytes(v.Value())
}

func (s *snapshotEncoder) policy(p *policyVersion) {
	if n, ok := s.policies[p]; ok {
		s.uint(n + 1)
		return
	}
	s.policies[p] = uint64(len(s.policies))
	s.uint(0)
	for _, v := range []string{p.key, p.kind, p.uid, p.resourceVersion, p.category, p.severity} {
		s.str(intern(v))
	}
	s.bool(p.scored)
}

func (s *snapshotEncoder) bool(v bool) {
	if v {
		s.buf.WriteByte(1)
	} else {
		s.buf.WriteByte(0)
	}
}

func (s *snapshotEncoder) entry(uid string, e *entry) {
	s.bytes(uid)
	s.bytes(e.name)
	s.str(e.apiVersion)
	s.str(e.kind)
	s.str(e.namespace)
	s.uint(e.version)
	s.int(e.created)
	s.uint(uint64(len(e.results)))
	for _, c := range e.results {
		s.uint(c.seq)
		s.int(c.evaluated)
		s.int(c.stored)
		s.policy(c.policy)
		s.str(c.resourceVersion)
		s.str(c.retracted)
		s.bool(c.admission)
		s.uint(uint64(len(c.rules)))
		for _, r := range c.rules {
			s.str(r.name)
			s.str(r.typ)
			s.str(r.status)
			s.str(r.message)
			s.str(r.exception)
			s.uint(uint64(len(r.props) / 2))
			for _, p := range r.props {
				s.str(p)
			}
		}
	}
}

// loadedSnapshot is a snapshot read, not yet in an index.
type loadedSnapshot struct {
	resume, version uint64
	entries         map[string]*entry
	results         int
}

// noStr is what a string read after an error is (the zero handle has no
// value to give).
var noStr = intern("")

// snapshotDecoder reads a snapshot; the first error sticks.
type snapshotDecoder struct {
	// format is the snapshot's format version.
	format   uint64
	r        *bufio.Reader
	err      error
	strs     []str
	policies []*policyVersion
	x        *Index
}

// readSnapshot reads a snapshot from r, interning its policy versions in
// x's table.
func (x *Index) readSnapshot(r io.Reader) (*loadedSnapshot, error) {
	d := &snapshotDecoder{r: bufio.NewReaderSize(r, 1<<20), x: x}
	magic := make([]byte, len(snapshotMagic))
	if _, err := io.ReadFull(d.r, magic); err != nil || string(magic) != snapshotMagic {
		return nil, fmt.Errorf("%w: not a snapshot", ErrBadSnapshot)
	}
	if d.format = d.uint(); d.err == nil && (d.format < 1 || d.format > snapshotFormat) {
		return nil, fmt.Errorf("%w: format %d, this replica reads 1 to %d", ErrBadSnapshot, d.format, snapshotFormat)
	}
	l := &loadedSnapshot{resume: d.uint(), version: d.uint(), entries: map[string]*entry{}}
	for d.err == nil {
		tag := d.byte()
		if tag == 0 {
			break
		}
		if tag != 1 {
			d.fail("entry tag %d", tag)
			break
		}
		uid := d.bytes()
		e := d.entry()
		if d.err != nil {
			break
		}
		if _, dup := l.entries[uid]; dup {
			d.fail("resource %s twice", uid)
			break
		}
		l.entries[uid] = e
		l.results += len(e.results)
	}
	if n := d.uint(); d.err == nil && n != uint64(len(l.entries)) {
		d.fail("%d resources announced, %d read", n, len(l.entries))
	}
	// Read to the end: a store that checks what it hands over (the
	// object store's digest) says so there.
	if d.err == nil {
		switch _, err := d.r.ReadByte(); {
		case err == nil:
			d.fail("bytes after its end")
		case !errors.Is(err, io.EOF):
			d.readErr(err)
		}
	}
	if d.err != nil {
		return nil, d.err
	}
	return l, nil
}

func (d *snapshotDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: %s", ErrBadSnapshot, fmt.Sprintf(format, args...))
	}
}

func (d *snapshotDecoder) readErr(err error) {
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if d.err == nil {
		d.err = fmt.Errorf("%w: %w", ErrBadSnapshot, err)
	}
}

func (d *snapshotDecoder) uint() uint64 { return readVarint(d, binary.ReadUvarint) }
func (d *snapshotDecoder) int() int64   { return readVarint(d, binary.ReadVarint) }

// readVarint reads one varint with read, unless an error came before.
func readVarint[T uint64 | int64](d *snapshotDecoder, read func(io.ByteReader) (T, error)) T {
	if d.err != nil {
		return 0
	}
	v, err := read(d.r)
	if err != nil {
		d.readErr(err)
	}
	return v
}

func (d *snapshotDecoder) byte() byte {
	if d.err != nil {
		return 0
	}
	b, err := d.r.ReadByte()
	if err != nil {
		d.readErr(err)
	}
	return b
}

func (d *snapshotDecoder) bool() bool {
	switch b := d.byte(); b {
	case 0:
		return false
	case 1:
		return true
	default:
		d.fail("boolean %d", b)
		return false
	}
}

// count reads a count no larger than limit.
func (d *snapshotDecoder) count(limit uint64, what string) int {
	n := d.uint()
	if n > limit {
		d.fail("%d %s, more than %d", n, what, limit)
		return 0
	}
	return int(n)
}

func (d *snapshotDecoder) bytes() string {
	n := d.count(maxSnapshotString, "bytes in a string")
	if d.err != nil {
		return ""
	}
	b := make([]byte, n)
	if _, err := io.ReadFull(d.r, b); err != nil {
		d.readErr(err)
		return ""
	}
	return string(b)
}

func (d *snapshotDecoder) str() str {
	n := d.uint()
	if d.err != nil {
		return noStr
	}
	if n == 0 {
		s := intern(d.bytes())
		d.strs = append(d.strs, s)
		return s
	}
	if n > uint64(len(d.strs)) {
		d.fail("string %d of %d", n, len(d.strs))
		return noStr
	}
	return d.strs[n-1]
}

func (d *snapshotDecoder) policy() *policyVersion {
	n := d.uint()
	if d.err != nil {
		return nil
	}
	if n == 0 {
		pv := policyVersion{key: d.str().Value(), kind: d.str().Value(), uid: d.str().Value(), resourceVersion: d.str().Value(),
			category: d.str().Value(), severity: d.str().Value(), scored: d.bool()}
		if d.err != nil {
			return nil
		}
		p := d.x.policies[pv]
		if p == nil {
			p = &pv
			d.x.policies[pv] = p
		}
		d.policies = append(d.policies, p)
		return p
	}
	if n > uint64(len(d.policies)) {
		d.fail("policy %d of %d", n, len(d.policies))
		return nil
	}
	return d.policies[n-1]
}

func (d *snapshotDecoder) entry() *entry {
	e := &entry{name: d.bytes(), apiVersion: d.str(), kind: d.str(), namespace: d.str(), version: d.uint(), created: d.int()}
	n := d.count(maxSnapshotResults, "results of a resource")
	if d.err != nil || n == 0 {
		if d.err == nil {
			d.fail("a resource without results")
		}
		return nil
	}
	e.results = make([]result, n)
	for i := range e.results {
		c := &e.results[i]
		c.seq, c.evaluated, c.stored = d.uint(), d.int(), d.int()
		c.policy = d.policy()
		c.resourceVersion, c.retracted, c.admission = d.str(), d.str(), d.bool()
		if k := d.count(maxSnapshotRules, "rules of a result"); k > 0 {
			c.rules = make([]rule, k)
			for j := range c.rules {
				r := rule{name: d.str(), typ: d.str(), status: d.str(), message: d.str(), exception: d.str()}
				if d.format >= 2 {
					if n := d.count(maxSnapshotRules, "properties of a rule"); n > 0 {
						r.props = make([]str, 2*n)
						for p := range r.props {
							r.props[p] = d.str()
						}
					}
				}
				c.rules[j] = r
			}
		}
		if d.err != nil {
			return nil
		}
	}
	return e
}

// install makes a snapshot the index's content: the index must be empty
// (a replica starting). Watches from a version older than the snapshot's
// must list again, as after the log is trimmed.
func (x *Index) install(l *loadedSnapshot) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.entries = l.entries
	x.seq = l.resume
	v := max(l.version, l.resume<<versionShift)
	for _, e := range l.entries {
		v = max(v, e.version)
	}
	x.version, x.trimmed = v, v
}

// snapshotRef is a loaded resource as its results' checker sees it.
type snapshotRef struct {
	ref    bus.ResourceRef
	stored time.Time
}

// refs is what to check of each loaded resource: its newest result's
// reference (the highest resourceVersion any holds) and when that was
// stored.
func (l *loadedSnapshot) refs() []snapshotRef {
	out := make([]snapshotRef, 0, len(l.entries))
	for uid, e := range l.entries {
		newest := e.results[0]
		for _, c := range e.results[1:] {
			if c.seq > newest.seq {
				newest = c
			}
		}
		r := e.toResult(uid, newest)
		out = append(out, snapshotRef{ref: r.Event.Resource, stored: r.Stored})
	}
	return out
}

// take removes a resource loaded from a snapshot that its checker did not
// confirm, and returns its results: before the index serves, so no
// change is recorded.
func (x *Index) take(uid string) []model.Result {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.entries[uid]
	if e == nil {
		return nil
	}
	delete(x.entries, uid)
	out := make([]model.Result, len(e.results))
	for i, c := range e.results {
		out[i] = e.toResult(uid, c)
	}
	return out
}
