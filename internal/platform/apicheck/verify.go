// Package verify checks what a message says about the cluster against the
// API server before a worker acts on it (DESIGN.md, invariant 9). A result
// or a work item names a resource by apiVersion, kind, namespace, name and
// uid; anyone who reaches the webhook port can send an AdmissionReview
// naming whatever they like, so a worker must not take the message's word
// for it.
//
// A Checker answers one question: does this reference name an object that
// exists, with this uid, at this resourceVersion or a later one? It looks
// the object up (metadata only) through a RESTMapper and the metadata
// client, and remembers positive answers per uid, so that the cost is about
// one GET per resource, not per message. Negative answers (no such
// object) are remembered too, briefly (WithAbsentCache, 100,000 for 1s),
// so that many results naming one missing uid, or one retried often, cost
// one GET per second at most: a flood of forged results naming uids that
// do not exist cannot turn into a flood of API calls.
//
// A validating webhook sees a CREATE before the object is stored, so an
// object that is not found (yet) is Pending until the message is older
// than the grace period (WithGrace, default 30s; the age is taken from the
// time the stream stored the message, which the sender cannot choose), and
// NotFound after. A name that belongs to another uid is UIDMismatch at
// once; a reference claiming a resourceVersion the object has not reached
// is Future (a result from the future is forged); a reference that cannot
// name an object is Invalid. The caller drops a rejected message (see
// Status.Rejected) and counts the status; it asks again later about a
// Pending one (RetryIn says when). A kind the checker may not read is
// an error wrapping ErrForbidden: undecided until the right is granted,
// remembered per kind as long as a missing object.
//
// The reporter checks every result before it changes a report; the
// generator checks a work item's trigger before it creates anything.
package apicheck

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"

	"github.com/verdict-dev/verdict/internal/bus"
)

// ErrInvalidOption is wrapped by the errors of bad options.
var ErrInvalidOption = errors.New("verify: invalid option")

// ErrForbidden is wrapped by Check's error when the checker may not read
// the reference's kind (its RBAC grants no get): the reference can be
// neither confirmed nor refused until the right is granted, so asking
// again soon is pointless. The error also wraps the API server's answer
// (apierrors.IsForbidden).
var ErrForbidden = errors.New("verify: may not read the kind")

// Status is a Checker's answer about one reference.
type Status string

// Statuses.
const (
	// Verified: the object exists with the uid, at the resourceVersion or
	// a later one.
	Verified Status = "verified"
	// Pending: no such object yet, and the message is younger than the
	// grace period (the object of a CREATE is stored after its validating
	// webhooks answered). Ask again later.
	Pending Status = "pending"
	// NotFound: still no such object after the grace period (it never was
	// stored, or it is gone), or its kind is not served.
	NotFound Status = "notFound"
	// UIDMismatch: the name belongs to an object with another uid.
	UIDMismatch Status = "uidMismatch"
	// Future: the reference claims a resourceVersion the object has not
	// reached (compared as integers, when both are).
	Future Status = "future"
	// Invalid: the reference does not name an object (no uid, apiVersion,
	// kind or name; a namespace that does not fit the kind's scope).
	Invalid Status = "invalid"
)

// Rejected reports whether s is a final no: the message must be dropped
// (and counted), not acted on.
func (s Status) Rejected() bool {
	switch s {
	case NotFound, UIDMismatch, Future, Invalid:
		return true
	}
	return false
}

// RejectedStatuses are the statuses Rejected accepts (for metric labels).
func RejectedStatuses() []Status { return []Status{NotFound, UIDMismatch, Future, Invalid} }

// Option configures New.
type Option func(*options) error

type options struct {
	grace      time.Duration
	cacheSize  int
	cacheTTL   time.Duration
	absentSize int
	absentTTL  time.Duration
	resetEvery time.Duration
	now        func() time.Time
}

// WithGrace sets how long after a message was stored an object that is not
// found is Pending rather than NotFound. Default 30s.
func WithGrace(d time.Duration) Option {
	return func(o *options) error {
		if d <= 0 {
			return fmt.Errorf("%w: grace %s", ErrInvalidOption, d)
		}
		o.grace = d
		return nil
	}
}

// WithCache sets how many positive answers are remembered (by uid) and for
// how long: a deleted object stops verifying when its entry expires or is
// forgotten (Forget). Default 100,000 for 10 minutes.
func WithCache(size int, ttl time.Duration) Option {
	return func(o *options) error {
		if size < 0 || ttl <= 0 {
			return fmt.Errorf("%w: cache of %d for %s", ErrInvalidOption, size, ttl)
		}
		o.cacheSize, o.cacheTTL = size, ttl
		return nil
	}
}

// WithAbsentCache sets how many negative answers (no object of that
// name with that uid) are remembered, by reference, and for how long: a
// reference asked about again within ttl is answered from memory (Pending
// or NotFound, by the message's age) without a GET. Keep ttl short: an
// object stored meanwhile (a CREATE's) is seen only once its entry
// expires. Size 0 remembers none. Default 100,000 for 1s.
func WithAbsentCache(size int, ttl time.Duration) Option {
	return func(o *options) error {
		if size < 0 || ttl <= 0 {
			return fmt.Errorf("%w: absent cache of %d for %s", ErrInvalidOption, size, ttl)
		}
		o.absentSize, o.absentTTL = size, ttl
		return nil
	}
}

// WithClock replaces time.Now (tests).
func WithClock(now func() time.Time) Option {
	return func(o *options) error {
		if now == nil {
			return fmt.Errorf("%w: nil clock", ErrInvalidOption)
		}
		o.now = now
		return nil
	}
}

// Checker checks references against the API server. It is safe for
// concurrent use; share one per process.
type Checker struct {
	client metadata.Interface
	mapper meta.ResettableRESTMapper
	o      options

	mu        sync.Mutex
	known     map[string]entry     // by uid: objects seen to exist
	absent    map[string]time.Time // by lookup key: when it was not found
	inflight  map[string]*flight   // lookups under way, by uid and identity
	lastReset time.Time
	// forbidden are the resources the checker may not get, and when a
	// GET said so (remembered as long as absent entries).
	forbidden map[schema.GroupResource]forbiddenEntry
}

type forbiddenEntry struct {
	at  time.Time
	err error
}

// entry is an object seen to exist.
type entry struct {
	id   identity
	rv   string // its resourceVersion when seen
	seen time.Time
}

// identity is what names an object, apart from its uid and version.
type identity struct {
	group, kind, namespace, name string
}

// flight is one lookup under way; others asking the same wait for it.
type flight struct {
	done  chan struct{}
	found bool
	other bool   // found with another uid
	rv    string // when found with the uid
	err   error
}

// New returns a checker looking objects up through client (metadata only)
// with mapper (a discovery-backed RESTMapper: it is reset, at most every
// few seconds, when a kind is not found).
func New(client metadata.Interface, mapper meta.ResettableRESTMapper, opts ...Option) (*Checker, error) {
	if client == nil || mapper == nil {
		return nil, fmt.Errorf("%w: a checker needs a metadata client and a RESTMapper", ErrInvalidOption)
	}
	o := options{grace: 30 * time.Second, cacheSize: 100_000, cacheTTL: 10 * time.Minute, absentSize: 100_000, absentTTL: time.Second,
		resetEvery: 10 * time.Second, now: time.Now}
	for _, opt := range opts {
		if err := opt(&o); err != nil {
			return nil, err
		}
	}
	return &Checker{client: client, mapper: mapper, o: o, known: map[string]entry{}, absent: map[string]time.Time{}, inflight: map[string]*flight{},
		forbidden: map[schema.GroupResource]forbiddenEntry{}}, nil
}

// Grace is the grace period of objects not found.
func (c *Checker) Grace() time.Duration { return c.o.grace }

// Check says whether ref names an object that exists with ref's uid, at
// ref's resourceVersion or a later one. stored is when the message making
// the claim was stored (the stream's time): an object not found is Pending
// until stored is older than the grace period. An error means the API
// server could not answer (unreachable): ask again later; one wrapping
// ErrForbidden means the checker may not read the kind.
func (c *Checker) Check(ctx context.Context, ref bus.ResourceRef, stored time.Time) (Status, error) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || ref.UID == "" || ref.APIVersion == "" || ref.Kind == "" || ref.Name == "" {
		return Invalid, nil
	}
	id := identity{group: gv.Group, kind: ref.Kind, namespace: ref.Namespace, name: ref.Name}
	if rv, ok := c.recall(ref.UID, id); ok && !Newer(ref.ResourceVersion, rv) {
		return Verified, nil
	}
	f, invalid, err := c.lookup(ctx, ref, gv, id)
	switch {
	case err != nil:
		return "", err
	case invalid:
		return Invalid, nil
	case f.other:
		return UIDMismatch, nil
	case !f.found:
		if c.o.now().Sub(stored) < c.o.grace {
			return Pending, nil
		}
		return NotFound, nil
	case Newer(ref.ResourceVersion, f.rv):
		return Future, nil
	}
	return Verified, nil
}

// RetryIn is how long to wait before asking again about a Pending
// reference whose message was stored at stored: as long as the message
// is old (at least a second), so that a few attempts span the grace period,
// and not much past its end.
func (c *Checker) RetryIn(stored time.Time) time.Duration {
	age := c.o.now().Sub(stored)
	left := c.o.grace - age + 100*time.Millisecond
	return max(min(max(age, time.Second), left), 100*time.Millisecond)
}

// Observe records an object known to exist (listed or watched by the
// caller), so that references to it need no lookup.
func (c *Checker) Observe(ref bus.ResourceRef) {
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil || ref.UID == "" || ref.Kind == "" || ref.Name == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.remember(ref.UID, identity{group: gv.Group, kind: ref.Kind, namespace: ref.Namespace, name: ref.Name}, ref.ResourceVersion)
}

// Stats says how many answers the checker remembers: objects known to
// exist, and references not found lately (WithAbsentCache).
func (c *Checker) Stats() (known, absent int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.known), len(c.absent)
}

// Forget drops what the checker knows of uid (the object is gone).
func (c *Checker) Forget(uid string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.known, uid)
}

// recall returns the resourceVersion an object was seen at, if it is known
// to exist with that identity.
func (c *Checker) recall(uid string, id identity) (string, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.known[uid]
	if !ok || e.id != id || c.o.now().Sub(e.seen) > c.o.cacheTTL {
		return "", false
	}
	return e.rv, true
}

// remember notes an object seen to exist; c.mu is held.
func (c *Checker) remember(uid string, id identity, rv string) {
	if c.o.cacheSize == 0 {
		return
	}
	if e, ok := c.known[uid]; ok && e.id == id && Newer(e.rv, rv) {
		rv = e.rv // keep the later version
	}
	if _, ok := c.known[uid]; !ok && len(c.known) >= c.o.cacheSize {
		// Full: forget about a tenth, at random (map order).
		drop := max(1, c.o.cacheSize/10)
		for k := range c.known {
			delete(c.known, k)
			if drop--; drop == 0 {
				break
			}
		}
	}
	c.known[uid] = entry{id: id, rv: rv, seen: c.o.now()}
}

// rememberAbsent notes a reference not found; c.mu is held.
func (c *Checker) rememberAbsent(key string) {
	if c.o.absentSize == 0 {
		return
	}
	if _, ok := c.absent[key]; !ok && len(c.absent) >= c.o.absentSize {
		// Full: forget the expired entries, or else about a tenth.
		now := c.o.now()
		for k, at := range c.absent {
			if now.Sub(at) >= c.o.absentTTL {
				delete(c.absent, k)
			}
		}
		if len(c.absent) >= c.o.absentSize {
			drop := max(1, c.o.absentSize/10)
			for k := range c.absent {
				delete(c.absent, k)
				if drop--; drop == 0 {
					break
				}
			}
		}
	}
	c.absent[key] = c.o.now()
}

// lookup reads the object ref names, once for all who ask at the same
// time. invalid: the reference's namespace does not fit the kind.
func (c *Checker) lookup(ctx context.Context, ref bus.ResourceRef, gv schema.GroupVersion, id identity) (*flight, bool, error) {
	mapping, err := c.mapping(schema.GroupKind{Group: gv.Group, Kind: ref.Kind}, gv.Version)
	switch {
	case meta.IsNoMatchError(err):
		return &flight{}, false, nil // the kind is not served: nothing of it exists
	case err != nil:
		return nil, false, fmt.Errorf("map %s: %w", ref.APIVersion+"/"+ref.Kind, err)
	}
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	if namespaced != (ref.Namespace != "") {
		return nil, true, nil
	}
	key := ref.UID + "\x00" + id.group + "\x00" + id.kind + "\x00" + id.namespace + "\x00" + id.name
	gr := mapping.Resource.GroupResource()
	c.mu.Lock()
	if fe, ok := c.forbidden[gr]; ok {
		if c.o.now().Sub(fe.at) < c.o.absentTTL {
			c.mu.Unlock()
			return nil, false, fe.err // refused a moment ago
		}
		delete(c.forbidden, gr)
	}
	if at, ok := c.absent[key]; ok {
		if c.o.now().Sub(at) < c.o.absentTTL {
			c.mu.Unlock()
			return &flight{}, false, nil // not found a moment ago
		}
		delete(c.absent, key)
	}
	if f, ok := c.inflight[key]; ok {
		c.mu.Unlock()
		select {
		case <-f.done:
			return f, false, f.err
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
	f := &flight{done: make(chan struct{})}
	c.inflight[key] = f
	c.mu.Unlock()

	var obj *metav1.PartialObjectMetadata
	if namespaced {
		obj, err = c.client.Resource(mapping.Resource).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	} else {
		obj, err = c.client.Resource(mapping.Resource).Get(ctx, ref.Name, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
	case apierrors.IsForbidden(err):
		f.err = fmt.Errorf("%w: read %s %s: %w", ErrForbidden, ref.Kind, path(ref), err)
	case err != nil:
		f.err = fmt.Errorf("read %s %s: %w", ref.Kind, path(ref), err)
	case string(obj.GetUID()) != ref.UID:
		f.other = true
	default:
		f.found, f.rv = true, obj.GetResourceVersion()
	}
	c.mu.Lock()
	switch {
	case f.found:
		c.remember(ref.UID, id, f.rv)
	case f.err == nil && !f.other:
		c.rememberAbsent(key)
	case errors.Is(f.err, ErrForbidden):
		c.forbidden[gr] = forbiddenEntry{at: c.o.now(), err: f.err}
	}
	delete(c.inflight, key)
	c.mu.Unlock()
	close(f.done)
	return f, false, f.err
}

// mapping maps a kind to its resource, resetting the mapper (at most every
// few seconds) when the kind is unknown: it may be new.
func (c *Checker) mapping(gk schema.GroupKind, version string) (*meta.RESTMapping, error) {
	m, err := c.mapper.RESTMapping(gk, version)
	if !meta.IsNoMatchError(err) {
		return m, err
	}
	c.mu.Lock()
	reset := c.o.now().Sub(c.lastReset) >= c.o.resetEvery
	if reset {
		c.lastReset = c.o.now()
	}
	c.mu.Unlock()
	if !reset {
		return m, err
	}
	c.mapper.Reset()
	return c.mapper.RESTMapping(gk, version)
}

func path(ref bus.ResourceRef) string {
	if ref.Namespace == "" {
		return ref.Name
	}
	return ref.Namespace + "/" + ref.Name
}

// Newer reports whether resourceVersion a is later than b: both unsigned
// integers (Kubernetes documents the versions of one resource as
// comparable from 1.35), a greater. Anything else cannot be told apart:
// false.
func Newer(a, b string) bool {
	x, errA := strconv.ParseUint(a, 10, 64)
	y, errB := strconv.ParseUint(b, 10, 64)
	return errA == nil && errB == nil && x > y
}
