package queue

import (
	"fmt"
	"slices"
	"strings"
)

// Topology names where an application's work, dead letters and message
// schedules live: the streams and the subject prefixes the package builds
// subjects under. The package holds no names of its own; an application
// defines its topology once (Verdict's is in its bus package) and gives
// it to Connect with WithTopology. The work-queue calls of a Conn
// (NewRunner's dead-lettering, ListWork, ListDead, DeadAt, Requeue,
// PurgeWork, PurgeDead), the schedule calls and the snapshot calls need
// one; the rest of the package (publishing, replay, following,
// provisioning) works on any stream and subject.
//
// Subjects: work of kind on key is WorkPrefix+kind+"."+token(key) in
// WorkStream; a message dead-lettered from origin is DeadPrefix+origin
// (Root trimmed from origin) in DeadStream; a schedule of work of kind on
// key is SchedulePrefix+kind+"."+token(key) in ScheduleStream, and its
// ticks TickPrefix+kind+"."+token(key), which WorkStream sources as work
// (the application's stream configuration says so).
type Topology struct {
	// Root is the subject root shared by the application's subjects
	// ("app."), trimmed from an origin subject when it is dead-lettered.
	Root string
	// WorkStream holds the work, under WorkPrefix.
	WorkStream, WorkPrefix string
	// DeadStream holds the dead letters, under DeadPrefix.
	DeadStream, DeadPrefix string
	// ScheduleStream holds message schedules under SchedulePrefix and
	// their ticks under TickPrefix. Empty when the application has none.
	ScheduleStream, SchedulePrefix, TickPrefix string
	// Kinds are the work kinds (the first token after WorkPrefix).
	Kinds []WorkKind
	// SnapshotBucket is the object store of projection snapshots
	// (ProvisionSnapshots, PutSnapshot...). Empty when the application
	// keeps none.
	SnapshotBucket string
}

// WorkKind is the first token of a work subject after the topology's work
// prefix: what a worker does.
type WorkKind string

// Validate reports what is missing or malformed in t, wrapping
// ErrInvalidOption.
func (t Topology) Validate() error {
	var bad []string
	for _, p := range []struct{ name, v string }{
		{"root", t.Root}, {"work prefix", t.WorkPrefix}, {"dead-letter prefix", t.DeadPrefix},
	} {
		if !validPrefix(p.v) {
			bad = append(bad, fmt.Sprintf("%s %q", p.name, p.v))
		}
	}
	if t.WorkStream == "" || t.DeadStream == "" {
		bad = append(bad, "a work stream and a dead-letter stream are required")
	}
	if t.ScheduleStream != "" && (!validPrefix(t.SchedulePrefix) || !validPrefix(t.TickPrefix)) {
		bad = append(bad, fmt.Sprintf("schedule prefixes %q and %q", t.SchedulePrefix, t.TickPrefix))
	}
	if len(t.Kinds) == 0 {
		bad = append(bad, "no work kinds")
	}
	for _, k := range t.Kinds {
		if k == "" || EncodeToken(string(k)) != string(k) {
			bad = append(bad, fmt.Sprintf("work kind %q is not a plain token", k))
		}
	}
	if len(bad) > 0 {
		return fmt.Errorf("%w: topology: %s", ErrInvalidOption, strings.Join(bad, "; "))
	}
	return nil
}

// validPrefix: a subject prefix of literal tokens that ends with a dot.
func validPrefix(p string) bool {
	return strings.HasSuffix(p, ".") && validSubject(strings.TrimSuffix(p, "."))
}

// ValidKind reports whether k is one of t's work kinds.
func (t Topology) ValidKind(k WorkKind) bool { return slices.Contains(t.Kinds, k) }

func (t Topology) checkKind(k WorkKind) error {
	if !t.ValidKind(k) {
		return fmt.Errorf("%w: %q", ErrInvalidKind, k)
	}
	return nil
}

// WorkSubject is the subject of one unit of work: WorkPrefix, the kind and
// the key encoded (and shortened past maxKeyTokenLen, see keyToken). It
// fails with ErrInvalidKind for an unknown kind.
func (t Topology) WorkSubject(kind WorkKind, key string) (string, error) {
	if err := t.checkKind(kind); err != nil {
		return "", err
	}
	return t.WorkPrefix + string(kind) + "." + keyToken(key), nil
}

// WorkFilter is the filter matching all work of one kind, or all work for
// the empty kind.
func (t Topology) WorkFilter(kind WorkKind) string {
	if kind == "" {
		return t.WorkPrefix + ">"
	}
	return t.WorkPrefix + string(kind) + ".>"
}

// ParseWorkSubject splits a work subject back into its kind and key.
func (t Topology) ParseWorkSubject(subject string) (WorkKind, string, error) {
	return t.parseKindKey(subject, t.WorkPrefix, "work")
}

// parseKindKey splits prefix.<kind>.<key> subjects.
func (t Topology) parseKindKey(subject, prefix, what string) (WorkKind, string, error) {
	rest, ok := strings.CutPrefix(subject, prefix)
	if !ok || prefix == "" {
		return "", "", fmt.Errorf("%w: %q is not a %s subject", ErrInvalidSubject, subject, what)
	}
	k, tok, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(tok, ".") {
		return "", "", fmt.Errorf("%w: %q: want two tokens after %q", ErrInvalidSubject, subject, prefix)
	}
	kind := WorkKind(k)
	if err := t.checkKind(kind); err != nil {
		return "", "", err
	}
	key, err := DecodeToken(tok)
	if err != nil {
		return "", "", err
	}
	return kind, key, nil
}

// ScheduleTarget is the target of a message schedule whose ticks are work
// of kind on key: TickPrefix, the kind and the key, in ScheduleStream,
// which WorkStream sources as WorkSubject(kind, key). It fails with
// ErrInvalidKind for an unknown kind.
func (t Topology) ScheduleTarget(kind WorkKind, key string) (string, error) {
	if err := t.checkKind(kind); err != nil {
		return "", err
	}
	return t.TickPrefix + string(kind) + "." + keyToken(key), nil
}

// ScheduleSubject is where the schedule of work of kind on key lives in
// ScheduleStream: SchedulePrefix, the kind and the key encoded. It fails
// with ErrInvalidKind for an unknown kind.
func (t Topology) ScheduleSubject(kind WorkKind, key string) (string, error) {
	if err := t.checkKind(kind); err != nil {
		return "", err
	}
	return t.SchedulePrefix + string(kind) + "." + EncodeToken(key), nil
}

// ScheduleFilter matches the schedules of every key of one kind.
func (t Topology) ScheduleFilter(kind WorkKind) string {
	return t.SchedulePrefix + string(kind) + ".>"
}

// DeadSubject is the dead-letter subject of a message that came from
// origin: DeadPrefix followed by origin without Root, so (with root "app.")
// app.work.generate.k dead-letters to app.dead.work.generate.k and a filter
// such as app.dead.work.generate.> selects one kind.
func (t Topology) DeadSubject(origin string) string {
	return t.DeadPrefix + strings.TrimPrefix(origin, t.Root)
}

// DeadFilter matches the dead letters of work of one kind, or every dead
// letter for the empty kind.
func (t Topology) DeadFilter(kind WorkKind) string {
	if kind == "" {
		return t.DeadPrefix + ">"
	}
	return t.DeadSubject(t.WorkFilter(kind))
}
