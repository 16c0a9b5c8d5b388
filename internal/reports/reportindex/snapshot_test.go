package reportindex_test

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/verdict-dev/verdict/internal/reports/reportindex"
)

// TestSnapshotRoundTrip: an index read back from its snapshot serves the
// same reports, at the same versions and creation times, lists the same
// pages, and resumes from the stream position; with a result pending,
// from just before it.
func TestSnapshotRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	x := reportindex.New()
	for _, r := range randomResults(rng, 3000, 60, 9) {
		x.Apply(r)
	}
	x.Forget("uid-004")
	data, resume, err := reportindex.SnapshotOf(x)
	if err != nil {
		t.Fatal(err)
	}
	if resume != x.Seq() || resume != 3000 {
		t.Fatalf("resumes from %d, the index is at %d", resume, x.Seq())
	}
	y, err := reportindex.FromSnapshot(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if y.Seq() != resume || y.Len() != x.Len() || y.Version() < x.Version() {
		t.Fatalf("read back: seq %d, %d resources, version %d; written: seq %d, %d resources, version %d", y.Seq(), y.Len(), y.Version(), x.Seq(), x.Len(), x.Version())
	}
	uids, _, _ := x.Reports("", true, "", 0)
	got, _, _ := y.Reports("", true, "", 0)
	if len(uids) == 0 || !reflect.DeepEqual(got, uids) {
		t.Fatalf("lists %v, want %v", got, uids)
	}
	for _, uid := range uids {
		want, _ := x.Get(uid)
		have, ok := y.Get(uid)
		if !ok || !reflect.DeepEqual(have, want) {
			t.Fatalf("%s: read back\n%+v\nwant\n%+v", uid, have, want)
		}
	}
	// Applying again what the snapshot holds changes nothing.
	for _, r := range randomResults(rand.New(rand.NewPCG(7, 7)), 3000, 60, 9) {
		if r.Event.Resource.UID == "uid-004" {
			continue
		}
		if ch, changed := y.Apply(r); changed {
			t.Fatalf("result %d applied again changed %+v", r.Sequence, ch)
		}
	}
	// Watches from before the snapshot's version must list again.
	if _, err := y.Subscribe(x.Version() - 1); !errors.Is(err, reportindex.ErrGone) {
		t.Fatalf("watch from before the snapshot: %v", err)
	}

	x.Hold(1200)
	if _, resume, _ := reportindex.SnapshotOf(x); resume != 1199 {
		t.Fatalf("with result 1200 pending, resumes from %d", resume)
	}
}

// TestSnapshotBadInput: a snapshot cut short anywhere, damaged, with
// bytes after its end or of another format is refused with
// ErrBadSnapshot; none makes the reader panic or allocate what it claims.
func TestSnapshotBadInput(t *testing.T) {
	x := reportindex.New()
	for _, r := range randomResults(rand.New(rand.NewPCG(1, 2)), 200, 12, 4) {
		x.Apply(r)
	}
	data, _, err := reportindex.SnapshotOf(x)
	if err != nil {
		t.Fatal(err)
	}
	bad := func(name string, b []byte) {
		t.Helper()
		if _, err := reportindex.FromSnapshot(bytes.NewReader(b)); !errors.Is(err, reportindex.ErrBadSnapshot) {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for n := range len(data) {
		bad("cut short", data[:n])
	}
	bad("trailing bytes", append(bytes.Clone(data), 0))
	other := bytes.Clone(data)
	other[4] = 9
	bad("format 9", other)
	// A count that claims more than any snapshot holds.
	bad("huge string", append([]byte("VRIX\x01\x00\x00\x01"), 0xff, 0xff, 0xff, 0xff, 0x0f))
	rng := rand.New(rand.NewPCG(3, 4))
	for range 2000 {
		b := bytes.Clone(data)
		for range 1 + rng.IntN(4) {
			b[4+rng.IntN(len(b)-4)] ^= byte(1 + rng.IntN(255))
		}
		// A flipped byte may still read as a snapshot (the store's
		// digest catches damage); it must never panic.
		_, _ = reportindex.FromSnapshot(bytes.NewReader(b))
	}
	// A reader failing partway (the store's digest check) fails the read.
	failing := io.MultiReader(bytes.NewReader(data), iotestErr{})
	if _, err := reportindex.FromSnapshot(failing); !errors.Is(err, reportindex.ErrBadSnapshot) || !errors.Is(err, errDigest) {
		t.Fatalf("failing reader: %v", err)
	}
}

var errDigest = errors.New("digest mismatch")

type iotestErr struct{}

func (iotestErr) Read([]byte) (int, error) { return 0, errDigest }
