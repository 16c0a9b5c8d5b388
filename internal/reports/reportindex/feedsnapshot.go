package reportindex

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"time"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// maxSnapshotBytes bounds the snapshot a replica reads: about what the
// index of a million resources with twenty results each takes.
const maxSnapshotBytes = 2 << 30

// loadSnapshot fills the empty index from the feed's snapshot, when
// there is a usable one, and returns the sequence to follow the stream
// after (0: from its first message). Every resource it holds is checked
// as a result from the stream is (a resource deleted since is left out;
// one the watches have not seen yet waits, as a pending result does); a
// snapshot that cannot be used is logged and counted, and the stream is
// read in full.
func (f *Feed) loadSnapshot(ctx context.Context, retry *wakeup) (uint64, error) {
	if f.snapshot == "" {
		return 0, nil
	}
	start := time.Now()
	rc, snap, err := f.conn.OpenSnapshot(ctx, f.snapshot, bus.StreamResults, maxSnapshotBytes)
	if errors.Is(err, queue.ErrNoSnapshot) {
		f.log.Info().Str(logkey.Snapshot, f.snapshot).Msg("reportIndexSnapshotNone")
		return 0, nil
	}
	var l *loadedSnapshot
	if err == nil {
		l, err = f.x.readSnapshot(rc)
		_ = rc.Close()
		if err == nil && l.resume != snap.Sequence {
			err = fmt.Errorf("%w: it resumes from %d, stored as of %d", ErrBadSnapshot, l.resume, snap.Sequence)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		f.count(func(s *FeedStats) { s.SnapshotLoadFailures++ })
		f.log.Warn().Err(err).Str(logkey.Snapshot, f.snapshot).Msg("reportIndexSnapshotNotUsed")
		return 0, nil
	}
	read := time.Since(start)
	refs := l.refs()
	f.x.install(l)
	loaded, rejected, pending, unreadable := l.results, 0, 0, 0
	for _, r := range refs {
		st, err := f.checkRetrying(ctx, r.ref, r.stored, 0)
		if errors.Is(err, apicheck.ErrForbidden) {
			// Stored by a replica that could watch the kind; this one may
			// not: left out as from the stream.
			rs := f.x.take(r.ref.UID)
			loaded -= len(rs)
			unreadable += len(rs)
			f.log.Warn().Err(err).Str(logkey.ResourceUID, r.ref.UID).Msg("snapshotResourceUnreadable")
			continue
		}
		if err != nil {
			return 0, err
		}
		if st == apicheck.Verified {
			continue
		}
		rs := f.x.take(r.ref.UID)
		loaded -= len(rs)
		if st != apicheck.Pending {
			rejected += len(rs)
			f.log.Info().Str(logkey.Status, string(st)).Str(logkey.ResourceUID, r.ref.UID).Msg("snapshotResourceRejected")
			continue
		}
		// Results after the resume sequence come again from the
		// stream; those before wait for their resource here.
		f.mu.Lock()
		for _, res := range rs {
			if res.Sequence <= l.resume {
				f.pending[res.Sequence] = append(f.pending[res.Sequence], res) // a batch's share their sequence
				pending++
			}
		}
		f.mu.Unlock()
		retry.within(f.check.RetryIn(r.stored))
	}
	f.hold()
	f.count(func(s *FeedStats) {
		s.Loaded += uint64(loaded)
		s.Rejected += uint64(rejected)
		s.Unreadable += uint64(unreadable)
	})
	f.log.Info().Str(logkey.Snapshot, f.snapshot).Uint64(logkey.Resume, l.resume).Int(logkey.Resources, f.x.Len()).Int(logkey.Results, loaded).
		Int(logkey.Rejected, rejected).Int(logkey.Pending, pending).Uint64(logkey.Bytes, snap.Size).Time(logkey.Written, snap.Written).
		Dur(logkey.Read, read).Dur(logkey.Elapsed, time.Since(start)).Msg("reportIndexSnapshotLoaded")
	return l.resume, nil
}

// writeSnapshots stores a snapshot about every snapshotEvery once the
// feed is ready (a fifth either way, so that replicas started together
// spread out), unless another replica stored a newer one within that.
func (f *Feed) writeSnapshots(ctx context.Context) {
	select {
	case <-f.ready:
	case <-ctx.Done():
		return
	}
	for {
		every := f.snapshotEvery
		wait := every*4/5 + time.Duration(rand.Int64N(int64(every*2/5)+1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		cur, err := f.conn.StatSnapshot(ctx, f.snapshot, bus.StreamResults)
		switch {
		case err == nil && (cur.Sequence >= f.x.snapshotResume() || time.Since(cur.Written) < every*4/5):
			continue // nothing new, or another replica's is recent
		case err != nil && !errors.Is(err, queue.ErrNoSnapshot) && !errors.Is(err, queue.ErrSnapshotStale):
			f.snapshotFailed(ctx, err)
			continue
		}
		if _, err := f.WriteSnapshot(ctx); err != nil {
			f.snapshotFailed(ctx, err)
		}
	}
}

func (f *Feed) snapshotFailed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	f.count(func(s *FeedStats) { s.SnapshotWriteFailures++ })
	f.log.Warn().Err(err).Str(logkey.Snapshot, f.snapshot).Msg("reportIndexSnapshotNotWritten")
}

// WriteSnapshot stores a snapshot of the index now (WithSnapshots names
// it), streamed into the store as it is written.
func (f *Feed) WriteSnapshot(ctx context.Context) (queue.Snapshot, error) {
	if f.snapshot == "" {
		return queue.Snapshot{}, errors.New("the feed has no snapshot name")
	}
	start := time.Now()
	resume := f.x.snapshotResume()
	pr, pw := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(pw, 1<<20)
		err := f.x.WriteSnapshot(bw, resume)
		if err == nil {
			err = bw.Flush()
		}
		_ = pw.CloseWithError(err)
	}()
	snap, err := f.conn.PutSnapshot(ctx, f.snapshot, bus.StreamResults, resume, pr)
	_ = pr.CloseWithError(err) // a writer still writing stops
	if err != nil {
		return queue.Snapshot{}, err
	}
	f.count(func(s *FeedStats) { s.SnapshotsWritten++ })
	f.log.Info().Str(logkey.Snapshot, f.snapshot).Uint64(logkey.Resume, resume).Uint64(logkey.Bytes, snap.Size).
		Dur(logkey.Elapsed, time.Since(start)).Msg("reportIndexSnapshotWritten")
	return snap, nil
}
