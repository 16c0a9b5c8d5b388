package reportindex

import (
	"bytes"
	"io"
)

// SnapshotOf writes x as a snapshot, as a replica stores it.
func SnapshotOf(x *Index) (data []byte, resume uint64, err error) {
	var b bytes.Buffer
	resume = x.snapshotResume()
	err = x.WriteSnapshot(&b, resume)
	return b.Bytes(), resume, err
}

// FromSnapshot reads a snapshot into a new index, as a starting replica
// does (its resources not checked).
func FromSnapshot(r io.Reader) (*Index, error) {
	x := New()
	l, err := x.readSnapshot(r)
	if err != nil {
		return nil, err
	}
	x.install(l)
	return x, nil
}
