package patch

// Meter is charged with the work of checking an overlay's conditional and
// global anchors against a resource, so that an anchor and a resource
// that would take long to compare (a long wildcard against a long value,
// an anchored list element tried on each element of a long list) take
// only what the caller allows. The units are pattern.Meter's, about one
// byte compared: each value compared counts pattern.ValueCost, each
// metadata wildcard expanded pattern.ExpandMetadataWildcardsCost, each
// element visited elementWork.
type Meter interface {
	// ChargeWork counts n units of work and returns why the patch must
	// stop, if it must.
	ChargeWork(n int64) error
}

const (
	// elementWork is the work of visiting one element of the resource
	// or of the overlay.
	elementWork = 16
	// flushWork is how much work a budget counts before it charges its
	// meter: a few microseconds.
	flushWork = 4096
)

// budget charges a Meter with the work of one patch, flushWork units at
// a time. A nil budget, or one without a meter, counts nothing.
type budget struct {
	m       Meter
	pending int64
	// err is why the meter refused; it sticks.
	err error
}

// work counts n units of work and reports whether the patch must stop.
func (b *budget) work(n int64) bool {
	if b == nil || b.m == nil {
		return false
	}
	if b.err != nil {
		return true
	}
	b.pending += n
	if b.pending < flushWork {
		return false
	}
	return b.flush()
}

// flush charges the meter with the pending work and reports whether the
// patch must stop.
func (b *budget) flush() bool {
	if b == nil || b.m == nil || b.err != nil {
		return b != nil && b.err != nil
	}
	n := b.pending
	b.pending = 0
	if err := b.m.ChargeWork(n); err != nil {
		b.err = err
		return true
	}
	return false
}

// stopped is the mismatch of a check its meter stopped.
func (b *budget) stopped(path string) *condError {
	return &condError{kind: condStopped, path: path, msg: b.err.Error()}
}
