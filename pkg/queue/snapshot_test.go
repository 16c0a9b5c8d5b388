package queue

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/nats-io/nats.go/jetstream"
)

// Snapshots: stored and read back whole, replaced by the next; refused
// when of a sequence the stream never reached, of an earlier incarnation
// of the stream, or larger than the reader takes; damage in store fails
// the read at its end.
func TestSnapshots(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx := context.Background()
	if _, err := c.StatSnapshot(ctx, "index", streamResults); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("before the bucket exists: %v", err)
	}
	for range 2 { // idempotent
		if err := c.ProvisionSnapshots(ctx, 1, 64<<20); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := c.OpenSnapshot(ctx, "index", streamResults, 0); !errors.Is(err, ErrNoSnapshot) {
		t.Fatalf("before one is stored: %v", err)
	}
	for i := range 3 {
		if _, err := c.PublishSync(ctx, Message{Subject: resultSubject("uid", "p"), ID: MsgID("r", string(rune('a'+i))), Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	payload := bytes.Repeat([]byte("0123456789abcdef"), 100_000) // 1.6 MB: several chunks
	put := func(seq uint64, data []byte) Snapshot {
		t.Helper()
		s, err := c.PutSnapshot(ctx, "index", streamResults, seq, bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := put(2, payload)
	if s.Sequence != 2 || s.Size != uint64(len(payload)) || s.Stream != streamResults || s.Written.IsZero() {
		t.Fatalf("stored %+v", s)
	}
	read := func() ([]byte, error) {
		rc, _, err := c.OpenSnapshot(ctx, "index", streamResults, 0)
		if err != nil {
			return nil, err
		}
		b, err := io.ReadAll(rc)
		if cerr := rc.Close(); err == nil {
			err = cerr
		}
		return b, err
	}
	if got, err := read(); err != nil || !bytes.Equal(got, payload) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}
	if _, _, err := c.OpenSnapshot(ctx, "index", streamResults, 1<<20); err == nil || errors.Is(err, ErrSnapshotStale) {
		t.Fatalf("larger than allowed: %v", err)
	}
	if _, _, err := c.OpenSnapshot(ctx, "index", streamWork, 0); !errors.Is(err, ErrSnapshotStale) {
		t.Fatalf("of another stream: %v", err)
	}

	put(3, []byte("newer"))
	if st, err := c.StatSnapshot(ctx, "index", streamResults); err != nil || st.Sequence != 3 || st.Size != 5 {
		t.Fatalf("replaced: %+v, %v", st, err)
	}
	put(9, []byte("ahead"))
	if _, err := read(); !errors.Is(err, ErrSnapshotStale) {
		t.Fatalf("ahead of the stream: %v", err)
	}

	// Damage in store: the last chunk replaced by an altered copy.
	put(3, payload)
	obj, err := c.js.ObjectStore(ctx, testTopology.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	oi, err := obj.GetInfo(ctx, "index")
	if err != nil {
		t.Fatal(err)
	}
	str, err := c.js.Stream(ctx, "OBJ_"+testTopology.SnapshotBucket)
	if err != nil {
		t.Fatal(err)
	}
	chunk, err := str.GetLastMsgForSubject(ctx, "$O."+testTopology.SnapshotBucket+".C."+oi.NUID)
	if err != nil {
		t.Fatal(err)
	}
	if err := str.DeleteMsg(ctx, chunk.Sequence); err != nil {
		t.Fatal(err)
	}
	altered := bytes.Clone(chunk.Data)
	altered[0] ^= 1
	if _, err := c.js.Publish(ctx, chunk.Subject, altered); err != nil {
		t.Fatal(err)
	}
	if _, err := read(); !errors.Is(err, jetstream.ErrDigestMismatch) {
		t.Fatalf("damaged: %v", err)
	}

	// The stream deleted and made again: its snapshots are of the old one.
	put(3, payload)
	if err := c.js.DeleteStream(ctx, streamResults); err != nil {
		t.Fatal(err)
	}
	provision(t, c)
	for i := range 5 {
		if _, err := c.PublishSync(ctx, Message{Subject: resultSubject("uid", "p"), ID: MsgID("again", string(rune('a'+i))), Data: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := read(); !errors.Is(err, ErrSnapshotStale) {
		t.Fatalf("of the stream's previous incarnation: %v", err)
	}
	if _, err := c.StatSnapshot(ctx, "index", streamResults); !errors.Is(err, ErrSnapshotStale) {
		t.Fatalf("described, of the stream's previous incarnation: %v", err)
	}
}
