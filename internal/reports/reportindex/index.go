// Package reportindex holds every resource's report folded from
// VERDICT_RESULTS in memory, kept current as results arrive: what the
// reporter serves PolicyReports from in its serving mode (docs/reporter.md,
// "Serving reports from the stream"), instead of writing them into etcd.
//
// The index keeps, per resource, the newest result of each policy (by
// reporter.CompareResults, as every fold does) in a compact form: the
// strings every result repeats (policy keys and versions, rule names,
// statuses, messages) are interned with the unique package, so that a
// message shared by 100,000 resources is stored once, and the policy's
// version, category and severity are one shared record per policy
// version. A report is built on request with reporter.Fold, so it is
// field for field what the CRD mode writes.
//
// Every change that alters a report is numbered by the stream sequence
// that caused it and kept in a bounded log, from which watches resume.
package reportindex

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"time"
	"unique"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// str is an interned string: 8 bytes, its text stored once.
type str = unique.Handle[string]

func intern(s string) str { return unique.Make(s) }

// policyVersion is what every result of one policy version repeats.
type policyVersion struct {
	key, kind, uid, resourceVersion string
	category, severity              string
	scored                          bool
}

// rule is one rule's result.
type rule struct {
	name, typ, status, message, exception str
	// props are a CEL policy's audit annotations (rarely any): keys and
	// values in turn, sorted by key.
	props []str
}

// properties is a rule's props as the event carries them.
func (r rule) properties() map[string]string {
	if len(r.props) == 0 {
		return nil
	}
	out := make(map[string]string, len(r.props)/2)
	for i := 0; i+1 < len(r.props); i += 2 {
		out[r.props[i].Value()] = r.props[i+1].Value()
	}
	return out
}

// internProperties is properties' inverse.
func internProperties(props map[string]string) []str {
	if len(props) == 0 {
		return nil
	}
	out := make([]str, 0, 2*len(props))
	for _, k := range slices.Sorted(maps.Keys(props)) {
		out = append(out, intern(k), intern(props[k]))
	}
	return out
}

// result is the newest result of one policy on one resource.
type result struct {
	seq             uint64
	evaluated       int64 // unix nanoseconds
	stored          int64 // unix nanoseconds: when the stream stored it
	policy          *policyVersion
	resourceVersion str
	retracted       str
	admission       bool
	rules           []rule
}

// entry is one resource: its reference and its policies' results.
type entry struct {
	apiVersion, kind, namespace str
	name                        string
	results                     []result
	// version is the Version of the change that gave the report its
	// current state; created when the stream stored the first result
	// that gave it a report (unix nanoseconds).
	version uint64
	created int64
}

// ChangeType says what a change did to a report.
type ChangeType string

// Change types, as a watch reports them.
const (
	Added    ChangeType = "ADDED"
	Modified ChangeType = "MODIFIED"
	Deleted  ChangeType = "DELETED"
)

// Change is one report changed: by the result of stream sequence Seq (or,
// for a resource forgotten, the index's sequence then).
type Change struct {
	Seq uint64
	// Version orders changes strictly: Seq<<8 for the first change at a
	// stream sequence, one more for each further change before the next
	// (a result applied once its resource was confirmed, later than its
	// sequence; a resource forgotten). Replicas that applied the same
	// results in the same order number them alike; watches resume from
	// it.
	Version uint64
	// Local marks a change whose place is not fixed by the stream (a
	// result applied once its resource was confirmed, after later
	// sequences; a resource forgotten): another replica may have made it
	// earlier or later, so a watch resuming here gets it again
	// (Subscribe).
	Local bool
	Type  ChangeType
	// UID is the resource's (the report's name); Namespace its namespace
	// ("" for a ClusterPolicyReport).
	UID, Namespace string
}

// Index is every resource's results, folded. It is safe for concurrent
// use: results are applied by one follower, reports read by any number of
// requests.
type Index struct {
	mu      sync.RWMutex
	entries map[string]*entry
	seq     uint64
	// policies interns policy versions.
	policies map[policyVersion]*policyVersion

	// log keeps the last changes, oldest first, for watches to resume
	// from; subscribers are told of each new one.
	log     []Change
	logSize int
	// version is the last change's Version.
	version uint64
	// trimmed is the version of the newest change dropped from the log:
	// a watch from before it must list again.
	trimmed uint64
	// hold is the oldest sequence whose result may still be applied
	// (pending; 0: none): served versions stay below it (Served).
	hold uint64
	// local keeps the local changes of the last localWindow, oldest
	// first, for watches resuming from another replica's version.
	local []localChange
	subs  map[*Subscription]struct{}
}

// Option configures an Index.
type Option func(*Index)

// WithChangeLog sets how many changes the index keeps for watches to
// resume from (default 100,000); a watch from an older sequence must
// list again.
func WithChangeLog(n int) Option {
	return func(x *Index) {
		if n > 0 {
			x.logSize = n
		}
	}
}

// New returns an empty Index.
func New(opts ...Option) *Index {
	x := &Index{entries: map[string]*entry{}, policies: map[policyVersion]*policyVersion{}, logSize: 100_000, subs: map[*Subscription]struct{}{}}
	for _, o := range opts {
		o(x)
	}
	return x
}

// Seq is the highest stream sequence applied.
func (x *Index) Seq() uint64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.seq
}

// Version is the version of the last change (Change.Version), or the
// stream sequence reached, shifted as versions are, when that is later:
// what a list answers as its resourceVersion.
func (x *Index) Version() uint64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return max(x.version, x.seq<<versionShift)
}

// Len is the number of resources with results (retracted ones included).
func (x *Index) Len() int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return len(x.entries)
}

// Hold says that the result of sequence seq, and none older, may still
// be applied, out of order (0: none is waiting).
func (x *Index) Hold(seq uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.hold = seq
}

// Served is version v as lists and watch events give it to clients:
// below the oldest result still held. A client may resume from it on
// another replica, which may have applied that result in order (at a
// version below the client's otherwise), so the version a client holds
// never passes a result this replica has not settled.
func (x *Index) Served(v uint64) uint64 {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.hold > 0 {
		return min(v, x.hold<<versionShift-1)
	}
	return v
}

// Advance records that the stream has been read up to seq without a
// result to apply (a message left out): the index's version moves on.
func (x *Index) Advance(seq uint64) {
	x.mu.Lock()
	defer x.mu.Unlock()
	x.seq = max(x.seq, seq)
}

// Apply folds one checked result in: it replaces the result of the same
// policy on the same resource when it is newer (reporter.CompareResults).
// It reports whether the resource's report changed, and how.
func (x *Index) Apply(r model.Result) (Change, bool) {
	ev := r.Event
	uid := ev.Resource.UID
	x.mu.Lock()
	defer x.mu.Unlock()
	late := r.Sequence < x.seq
	x.seq = max(x.seq, r.Sequence)
	e := x.entries[uid]
	if e == nil {
		e = &entry{}
		x.entries[uid] = e
	}
	// Names never change for a UID; the newest result names the
	// resource, as the fold does.
	if r.Sequence >= e.maxSeq() {
		e.apiVersion, e.kind, e.namespace = intern(ev.Resource.APIVersion), intern(ev.Resource.Kind), intern(ev.Resource.Namespace)
		e.name = ev.Resource.Name
	}
	had := e.reported()
	key := ev.Policy.ResultKey()
	i := slices.IndexFunc(e.results, func(c result) bool { return c.policy.resultKey() == key })
	if i >= 0 && model.CompareResults(r, e.toResult(uid, e.results[i])) <= 0 {
		return Change{}, false
	}
	c := x.compact(r)
	if i >= 0 {
		e.results[i] = c
	} else {
		e.results = append(e.results, c)
		slices.SortFunc(e.results, func(a, b result) int { return cmp.Compare(a.policy.resultKey(), b.policy.resultKey()) })
	}
	ch := Change{Seq: x.seq, Local: late, UID: uid, Namespace: e.namespace.Value()}
	switch has := e.reported(); {
	case has && had:
		ch.Type = Modified
	case has:
		ch.Type = Added
		if !r.Stored.IsZero() {
			e.created = r.Stored.UnixNano()
		}
	case had:
		ch.Type = Deleted
	default:
		return Change{}, false // retractions of a resource without a report
	}
	ch = x.record(ch)
	e.version = ch.Version
	return ch, true
}

// Forget drops a resource (it is gone, or its report was deleted): its
// report disappears at once.
func (x *Index) Forget(uid string) (Change, bool) {
	x.mu.Lock()
	defer x.mu.Unlock()
	e := x.entries[uid]
	if e == nil {
		return Change{}, false
	}
	delete(x.entries, uid)
	if !e.reported() {
		return Change{}, false
	}
	ch := Change{Seq: x.seq, Local: true, Type: Deleted, UID: uid, Namespace: e.namespace.Value()}
	return x.record(ch), true
}

// Report is the resource's report as the CRD mode would write it (the
// zero Report and false when it has none).
func (x *Index) Report(uid string) (model.Report, bool) {
	e, ok := x.Get(uid)
	return e.Report, ok
}

// current is the results the resource's report holds now (one per
// policy, with rules).
func (x *Index) current(uid string) []model.Result {
	x.mu.RLock()
	defer x.mu.RUnlock()
	e := x.entries[uid]
	if e == nil {
		return nil
	}
	var out []model.Result
	for _, c := range e.results {
		if len(c.rules) > 0 {
			out = append(out, e.toResult(uid, c))
		}
	}
	return out
}

// Entry is a report as the index holds it.
type Entry struct {
	// Report is as the CRD mode would write it.
	Report model.Report
	// Version is the Version of the change that made it what it is: its
	// resourceVersion.
	Version uint64
	// Created is when the stream stored the result that first gave the
	// resource a report: its creationTimestamp.
	Created time.Time
}

// Get is the resource's report (false when it has none).
func (x *Index) Get(uid string) (Entry, bool) {
	x.mu.RLock()
	e := x.entries[uid]
	var rs []model.Result
	var out Entry
	if e != nil {
		rs = make([]model.Result, len(e.results))
		for i, c := range e.results {
			rs[i] = e.toResult(uid, c)
		}
		out.Version = e.version
		if e.created != 0 {
			out.Created = time.Unix(0, e.created).UTC()
		}
	}
	x.mu.RUnlock()
	if len(rs) == 0 {
		return Entry{}, false
	}
	rep, err := model.Fold(uid, rs)
	if err != nil || rep.Object == nil {
		return Entry{}, false
	}
	out.Report = rep
	return out, true
}

// Reports lists the UIDs of the resources with a report, in namespace
// ("" with all: every namespace; cluster: only cluster-scoped ones),
// sorted by namespace then UID, from after the UID given (a continue
// point), at most limit of them (0: all), with the index's sequence at
// that moment. more says whether more follow.
func (x *Index) Reports(namespace string, all bool, after string, limit int) (uids []string, seq uint64, more bool) {
	x.mu.RLock()
	type nsUID struct{ ns, uid string }
	keys := make([]nsUID, 0, len(x.entries))
	for uid, e := range x.entries {
		ns := e.namespace.Value()
		if (!all && ns != namespace) || !e.reported() {
			continue
		}
		keys = append(keys, nsUID{ns, uid})
	}
	seq = x.seq
	x.mu.RUnlock()
	slices.SortFunc(keys, func(a, b nsUID) int {
		if c := cmp.Compare(a.ns, b.ns); c != 0 {
			return c
		}
		return cmp.Compare(a.uid, b.uid)
	})
	start := 0
	if after != "" {
		start = len(keys)
		for i, k := range keys {
			if k.ns+"/"+k.uid > after {
				start = i
				break
			}
		}
	}
	keys = keys[start:]
	if limit > 0 && len(keys) > limit {
		keys, more = keys[:limit], true
	}
	uids = make([]string, len(keys))
	for i, k := range keys {
		uids[i] = k.uid
	}
	return uids, seq, more
}

// ContinueKey is the continue point after a report: its namespace and UID.
func ContinueKey(namespace, uid string) string { return namespace + "/" + uid }

// compact turns a result into its stored form.
func (x *Index) compact(r model.Result) result {
	ev := r.Event
	pv := policyVersion{key: ev.Policy.Key, kind: ev.Policy.Kind, uid: ev.Policy.UID, resourceVersion: ev.Policy.ResourceVersion,
		category: ev.Category, severity: ev.Severity, scored: ev.Scored}
	p := x.policies[pv]
	if p == nil {
		p = &pv
		x.policies[pv] = p
	}
	c := result{
		seq: r.Sequence, policy: p, resourceVersion: intern(ev.Resource.ResourceVersion),
		retracted: intern(ev.Retracted), admission: ev.Admission,
	}
	if !ev.Timestamp.IsZero() {
		c.evaluated = ev.Timestamp.UnixNano()
	}
	if !r.Stored.IsZero() {
		c.stored = r.Stored.UnixNano()
	}
	if len(ev.Rules) > 0 {
		c.rules = make([]rule, len(ev.Rules))
		for i, rr := range ev.Rules {
			c.rules[i] = rule{name: intern(rr.Name), typ: intern(string(rr.Type)), status: intern(string(rr.Status)),
				message: intern(rr.Message), exception: intern(rr.Exception), props: internProperties(rr.Properties)}
		}
	}
	return c
}

// toResult is a stored result as the fold reads it.
func (e *entry) toResult(uid string, c result) model.Result {
	ev := bus.ResultEvent{
		Resource: bus.ResourceRef{APIVersion: e.apiVersion.Value(), Kind: e.kind.Value(), Namespace: e.namespace.Value(),
			Name: e.name, UID: uid, ResourceVersion: c.resourceVersion.Value()},
		Policy:    bus.PolicyRef{Key: c.policy.key, Kind: c.policy.kind, UID: c.policy.uid, ResourceVersion: c.policy.resourceVersion},
		Category:  c.policy.category,
		Severity:  c.policy.severity,
		Scored:    c.policy.scored,
		Admission: c.admission,
		Retracted: c.retracted.Value(),
	}
	if c.evaluated != 0 {
		ev.Timestamp = time.Unix(0, c.evaluated).UTC()
	}
	if len(c.rules) > 0 {
		ev.Rules = make([]bus.RuleResult, len(c.rules))
		for i, r := range c.rules {
			ev.Rules[i] = bus.RuleResult{Name: r.name.Value(), Type: engine.RuleType(r.typ.Value()), Status: engine.Status(r.status.Value()),
				Message: r.message.Value(), Exception: r.exception.Value(), Properties: r.properties()}
		}
	}
	out := model.Result{Sequence: c.seq, Event: ev}
	if c.stored != 0 {
		out.Stored = time.Unix(0, c.stored).UTC()
	}
	return out
}

func (p *policyVersion) resultKey() string {
	return bus.PolicyRef{Key: p.key, Kind: p.kind}.ResultKey()
}

// reported says whether the resource has a report: a result with rules.
func (e *entry) reported() bool {
	for _, c := range e.results {
		if len(c.rules) > 0 {
			return true
		}
	}
	return false
}

func (e *entry) maxSeq() uint64 {
	var m uint64
	for _, c := range e.results {
		m = max(m, c.seq)
	}
	return m
}
