package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Snapshots of projections of streams (an index built from a results
// stream) live in the JetStream object store the topology names
// (Topology.SnapshotBucket): a process starting up reads the newest
// snapshot and follows the stream from its sequence, instead of reading
// the stream from its first message. A snapshot is only ever a shortcut:
// without one (none yet, unreadable, stale) the stream is read in full.

var (
	// ErrNoSnapshot: the bucket or the snapshot does not exist.
	ErrNoSnapshot = errors.New("queue: no snapshot")
	// ErrSnapshotStale: the snapshot is of another incarnation of its
	// stream (deleted and created again since) or of sequences the
	// stream never held: it must not be used.
	ErrSnapshotStale = errors.New("queue: snapshot does not match its stream")
)

// Snapshot describes a stored snapshot: the projection of Stream up to
// and including Sequence.
type Snapshot struct {
	Name     string
	Stream   string
	Sequence uint64
	// Size is the snapshot's size in bytes; Written when it was stored.
	Size    uint64
	Written time.Time
	// streamCreated identifies the stream's incarnation.
	streamCreated time.Time
}

// Metadata keys of a snapshot object.
const (
	snapMetaStream   = "verdict-stream"
	snapMetaSequence = "verdict-sequence"
	snapMetaCreated  = "verdict-stream-created"
)

// ProvisionSnapshots creates (or updates) the snapshot bucket with the
// given replica count, bounded by maxBytes (a put that would pass it
// fails; the stream is then read in full). Safe from every replica at
// once.
func (c *Conn) ProvisionSnapshots(ctx context.Context, replicas int, maxBytes int64) error {
	bucket, err := c.snapshotBucket()
	if err != nil {
		return err
	}
	cfg := jetstream.ObjectStoreConfig{
		Bucket:      bucket,
		Description: "Snapshots of projections of streams, to start from instead of the first message.",
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
		MaxBytes:    maxBytes,
	}
	err = retryTransient(ctx, 100*time.Millisecond, func() error {
		_, err := c.js.CreateOrUpdateObjectStore(ctx, cfg)
		return err
	})
	if err != nil {
		return fmt.Errorf("%w: object store %s: %w", ErrProvision, bucket, err)
	}
	return nil
}

// PutSnapshot stores r as the snapshot name of stream up to sequence seq,
// replacing the one stored before (which stays readable until this one
// is complete).
func (c *Conn) PutSnapshot(ctx context.Context, name, stream string, seq uint64, r io.Reader) (Snapshot, error) {
	st, err := c.streamCreated(ctx, stream)
	if err != nil {
		return Snapshot{}, fmt.Errorf("put snapshot %s: %w", name, err)
	}
	store, err := c.snapshots(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("put snapshot %s: %w", name, err)
	}
	info, err := store.Put(ctx, jetstream.ObjectMeta{Name: name, Metadata: map[string]string{
		snapMetaStream:   stream,
		snapMetaSequence: strconv.FormatUint(seq, 10),
		snapMetaCreated:  st.Format(time.RFC3339Nano),
	}}, r)
	if err != nil {
		return Snapshot{}, fmt.Errorf("put snapshot %s: %w", name, err)
	}
	return snapshotOf(info)
}

// StatSnapshot describes the snapshot name of stream: ErrNoSnapshot when
// there is none, ErrSnapshotStale (with the description) when it is not
// of the stream as it is now (OpenSnapshot).
func (c *Conn) StatSnapshot(ctx context.Context, name, stream string) (Snapshot, error) {
	store, err := c.snapshots(ctx)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w", name, err)
	}
	info, err := store.GetInfo(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w", name, ErrNoSnapshot)
	}
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w", name, err)
	}
	s, err := snapshotOf(info)
	if err != nil {
		return Snapshot{}, err
	}
	return s, c.checkSnapshot(ctx, s, stream)
}

// OpenSnapshot opens the snapshot name of stream for reading, once it
// has checked that it belongs to the stream as it is now (ErrSnapshotStale
// otherwise) and is no larger than maxSize bytes (0: any size). Reading
// it to its end checks its digest: a snapshot damaged in store or on the
// way fails there, not silently.
func (c *Conn) OpenSnapshot(ctx context.Context, name, stream string, maxSize uint64) (io.ReadCloser, Snapshot, error) {
	store, err := c.snapshots(ctx)
	if err != nil {
		return nil, Snapshot{}, fmt.Errorf("open snapshot %s: %w", name, err)
	}
	res, err := store.Get(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, Snapshot{}, fmt.Errorf("open snapshot %s: %w", name, ErrNoSnapshot)
	}
	if err != nil {
		return nil, Snapshot{}, fmt.Errorf("open snapshot %s: %w", name, err)
	}
	info, err := res.Info()
	if err != nil {
		_ = res.Close()
		return nil, Snapshot{}, fmt.Errorf("open snapshot %s: %w", name, err)
	}
	s, err := snapshotOf(info)
	if err != nil {
		_ = res.Close()
		return nil, Snapshot{}, err
	}
	if err := c.checkSnapshot(ctx, s, stream); err != nil {
		_ = res.Close()
		return nil, s, err
	}
	if maxSize > 0 && s.Size > maxSize {
		_ = res.Close()
		return nil, s, fmt.Errorf("open snapshot %s: %d bytes, more than the %d allowed", name, s.Size, maxSize)
	}
	return res, s, nil
}

// checkSnapshot says whether s is of stream as it is now: the same
// incarnation (not deleted and created again since), and no further
// than the stream reaches.
func (c *Conn) checkSnapshot(ctx context.Context, s Snapshot, stream string) error {
	stale := func(why string) error {
		return fmt.Errorf("snapshot %s: %w: %s", s.Name, ErrSnapshotStale, why)
	}
	if s.Stream != stream {
		return stale("it is of stream " + s.Stream)
	}
	str, err := c.js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("snapshot %s: stream %s: %w", s.Name, stream, err)
	}
	si, err := str.Info(ctx)
	if err != nil {
		return fmt.Errorf("snapshot %s: stream %s: %w", s.Name, stream, err)
	}
	if !si.Created.Equal(s.streamCreated) {
		return stale(fmt.Sprintf("it is of the %s created at %s, the stream now was created at %s", stream,
			s.streamCreated.Format(time.RFC3339), si.Created.Format(time.RFC3339)))
	}
	if s.Sequence > si.State.LastSeq {
		return stale(fmt.Sprintf("it reaches sequence %d, the stream only %d", s.Sequence, si.State.LastSeq))
	}
	return nil
}

// snapshotBucket is the topology's snapshot bucket, or ErrNoTopology.
func (c *Conn) snapshotBucket() (string, error) {
	t, err := c.Topology()
	if err == nil && t.SnapshotBucket == "" {
		err = fmt.Errorf("%w: its topology names no snapshot bucket", ErrNoTopology)
	}
	return t.SnapshotBucket, err
}

func (c *Conn) snapshots(ctx context.Context) (jetstream.ObjectStore, error) {
	bucket, err := c.snapshotBucket()
	if err != nil {
		return nil, err
	}
	store, err := c.js.ObjectStore(ctx, bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		return nil, fmt.Errorf("%w: bucket %s does not exist", ErrNoSnapshot, bucket)
	}
	return store, err
}

func (c *Conn) streamCreated(ctx context.Context, stream string) (time.Time, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return time.Time{}, fmt.Errorf("stream %s: %w", stream, err)
	}
	return s.CachedInfo().Created, nil
}

func snapshotOf(info *jetstream.ObjectInfo) (Snapshot, error) {
	s := Snapshot{Name: info.Name, Stream: info.Metadata[snapMetaStream], Size: info.Size, Written: info.ModTime}
	seq, err := strconv.ParseUint(info.Metadata[snapMetaSequence], 10, 64)
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w: sequence %q", info.Name, ErrSnapshotStale, info.Metadata[snapMetaSequence])
	}
	created, err := time.Parse(time.RFC3339Nano, info.Metadata[snapMetaCreated])
	if err != nil {
		return Snapshot{}, fmt.Errorf("snapshot %s: %w: stream creation time %q", info.Name, ErrSnapshotStale, info.Metadata[snapMetaCreated])
	}
	s.Sequence, s.streamCreated = seq, created
	return s, nil
}
