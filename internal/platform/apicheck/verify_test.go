package apicheck

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metadatafake "k8s.io/client-go/metadata/fake"
	clienttesting "k8s.io/client-go/testing"

	"github.com/verdict-dev/verdict/internal/bus"
)

// mapper is a static RESTMapper that counts its resets.
type mapper struct {
	meta.RESTMapper
	resets atomic.Int32
}

func (m *mapper) Reset() { m.resets.Add(1) }

func newMapper() *mapper {
	m := meta.NewDefaultRESTMapper(nil)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, meta.RESTScopeNamespace)
	m.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	return &mapper{RESTMapper: m}
}

func object(kind, namespace, name, uid, rv string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: types.UID(uid), ResourceVersion: rv},
	}
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// world is a fake API server with a ConfigMap team/app (uid cm-1, version
// 100) and a Namespace team (uid ns-1, version 7).
type world struct {
	client *metadatafake.FakeMetadataClient
	mapper *mapper
	clock  *clock
	check  *Checker
}

func newWorld(t *testing.T, opts ...Option) *world {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := metav1.AddMetaToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	w := &world{
		client: metadatafake.NewSimpleMetadataClient(scheme,
			object("ConfigMap", "team", "app", "cm-1", "100"), object("Namespace", "", "team", "ns-1", "7")),
		mapper: newMapper(),
		clock:  &clock{now: time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)},
	}
	var err error
	w.check, err = New(w.client, w.mapper, append([]Option{WithClock(w.clock.Now)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// gets counts the GETs the fake API server answered.
func (w *world) gets() int {
	n := 0
	for _, a := range w.client.Actions() {
		if a.GetVerb() == "get" {
			n++
		}
	}
	return n
}

func cm(name, uid, rv string) bus.ResourceRef {
	return bus.ResourceRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "team", Name: name, UID: uid, ResourceVersion: rv}
}

func TestCheck(t *testing.T) {
	tests := map[string]struct {
		ref  bus.ResourceRef
		age  time.Duration // of the message
		want Status
	}{
		"exists":                         {ref: cm("app", "cm-1", "100"), want: Verified},
		"an earlier version":             {ref: cm("app", "cm-1", "40"), want: Verified},
		"a CREATE (no version)":          {ref: cm("app", "cm-1", ""), want: Verified},
		"an opaque version":              {ref: cm("app", "cm-1", "abc"), want: Verified},
		"cluster-scoped":                 {ref: bus.ResourceRef{APIVersion: "v1", Kind: "Namespace", Name: "team", UID: "ns-1"}, want: Verified},
		"a version from the future":      {ref: cm("app", "cm-1", "101"), want: Future},
		"another uid":                    {ref: cm("app", "forged", "1"), want: UIDMismatch},
		"another uid, however young":     {ref: cm("app", "forged", ""), age: 0, want: UIDMismatch},
		"not stored yet":                 {ref: cm("new", "cm-2", ""), age: 5 * time.Second, want: Pending},
		"never stored":                   {ref: cm("new", "cm-2", ""), age: 31 * time.Second, want: NotFound},
		"a kind not served, young":       {ref: bus.ResourceRef{APIVersion: "x.io/v1", Kind: "Thing", Name: "a", UID: "t-1"}, want: Pending},
		"a kind not served, old":         {ref: bus.ResourceRef{APIVersion: "x.io/v1", Kind: "Thing", Name: "a", UID: "t-1"}, age: time.Hour, want: NotFound},
		"no uid":                         {ref: cm("app", "", ""), want: Invalid},
		"no name":                        {ref: cm("", "cm-1", ""), want: Invalid},
		"no kind":                        {ref: bus.ResourceRef{APIVersion: "v1", Namespace: "team", Name: "app", UID: "cm-1"}, want: Invalid},
		"a bad apiVersion":               {ref: bus.ResourceRef{APIVersion: "a/b/c", Kind: "ConfigMap", Namespace: "team", Name: "app", UID: "cm-1"}, want: Invalid},
		"namespaced kind, no namespace":  {ref: bus.ResourceRef{APIVersion: "v1", Kind: "ConfigMap", Name: "app", UID: "cm-1"}, want: Invalid},
		"cluster kind with a namespace":  {ref: bus.ResourceRef{APIVersion: "v1", Kind: "Namespace", Namespace: "team", Name: "team", UID: "ns-1"}, want: Invalid},
		"in another namespace":           {ref: bus.ResourceRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: "other", Name: "app", UID: "cm-1"}, age: time.Minute, want: NotFound},
		"the object's uid, another name": {ref: cm("other", "cm-1", ""), age: time.Minute, want: NotFound},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			w := newWorld(t)
			stored := w.clock.Now().Add(-tc.age)
			got, err := w.check.Check(context.Background(), tc.ref, stored)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("Check = %s, want %s", got, tc.want)
			}
			if got.Rejected() != (tc.want != Verified && tc.want != Pending) {
				t.Errorf("%s.Rejected() = %v", got, got.Rejected())
			}
		})
	}
}

// A positive answer is remembered per uid: later results of the object
// need no lookup, unless they claim a later version than was seen (then it
// is read again); Observe and Forget fill and empty the memory; entries
// expire.
func TestCheckRemembers(t *testing.T) {
	w := newWorld(t, WithCache(10, time.Minute))
	ctx := context.Background()
	now := w.clock.Now()
	for range 3 {
		if st, err := w.check.Check(ctx, cm("app", "cm-1", "90"), now); err != nil || st != Verified {
			t.Fatalf("Check = %s, %v", st, err)
		}
	}
	if n := w.gets(); n != 1 {
		t.Errorf("%d lookups for three results of one object, want 1", n)
	}
	// The object changed (version 120): a result of it is read again once.
	if err := w.client.Tracker().Update(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		object("ConfigMap", "team", "app", "cm-1", "120"), "team"); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if st, _ := w.check.Check(ctx, cm("app", "cm-1", "120"), now); st != Verified {
			t.Fatalf("the new version: %s", st)
		}
	}
	if n := w.gets(); n != 2 {
		t.Errorf("%d lookups, want 2", n)
	}
	// Observed objects need no lookup.
	w.check.Observe(cm("listed", "cm-9", "300"))
	if st, _ := w.check.Check(ctx, cm("listed", "cm-9", "300"), now); st != Verified || w.gets() != 2 {
		t.Errorf("an observed object: %s after %d lookups", st, w.gets())
	}
	// Forgotten (gone): looked up again, and not there.
	w.check.Forget("cm-9")
	if st, _ := w.check.Check(ctx, cm("listed", "cm-9", "300"), now.Add(-time.Hour)); st != NotFound {
		t.Errorf("a forgotten object that is gone: %s", st)
	}
	// Expired: looked up again.
	before := w.gets()
	w.clock.Add(2 * time.Minute)
	if st, _ := w.check.Check(ctx, cm("app", "cm-1", "120"), now); st != Verified || w.gets() != before+1 {
		t.Errorf("after expiry: %s, %d lookups (want %d)", st, w.gets(), before+1)
	}
	// Negative answers are remembered briefly (1s): however often a
	// missing reference is asked about meanwhile, one lookup; the object
	// may come, and is seen once the answer expires.
	before = w.gets()
	for range 5 {
		if st, _ := w.check.Check(ctx, cm("new", "cm-2", ""), w.clock.Now()); st != Pending {
			t.Fatalf("before the create: %s", st)
		}
	}
	if n := w.gets() - before; n != 1 {
		t.Errorf("%d lookups for five checks of a missing object within a second, want 1", n)
	}
	if _, absent := w.check.Stats(); absent != 2 { // cm-9 (gone, expired but held until pruned) and cm-2
		t.Errorf("%d negative answers remembered, want 2", absent)
	}
	if err := w.client.Tracker().Add(object("ConfigMap", "team", "new", "cm-2", "130")); err != nil {
		t.Fatal(err)
	}
	if st, _ := w.check.Check(ctx, cm("new", "cm-2", ""), w.clock.Now()); st != Pending {
		t.Errorf("after the create, within the second: %s", st)
	}
	w.clock.Add(time.Second)
	if st, _ := w.check.Check(ctx, cm("new", "cm-2", ""), w.clock.Now()); st != Verified {
		t.Errorf("after the create: %s", st)
	}
}

// A kind the mapper does not know resets it (the kind may be new), at most
// once in a while however many results name unknown kinds.
func TestCheckResetsTheMapper(t *testing.T) {
	w := newWorld(t)
	for range 5 {
		ref := bus.ResourceRef{APIVersion: "x.io/v1", Kind: "Thing", Name: "a", UID: "t-1"}
		if st, err := w.check.Check(context.Background(), ref, w.clock.Now()); err != nil || st != Pending {
			t.Fatalf("Check = %s, %v", st, err)
		}
	}
	if n := w.mapper.resets.Load(); n != 1 {
		t.Errorf("%d resets, want 1", n)
	}
	w.clock.Add(time.Minute)
	if _, err := w.check.Check(context.Background(), bus.ResourceRef{APIVersion: "x.io/v1", Kind: "Thing", Name: "a", UID: "t-1"}, w.clock.Now()); err != nil {
		t.Fatal(err)
	}
	if n := w.mapper.resets.Load(); n != 2 {
		t.Errorf("%d resets a minute later, want 2", n)
	}
}

// An API server that cannot answer is an error (ask again), not a verdict.
func TestCheckAPIError(t *testing.T) {
	w := newWorld(t)
	boom := errors.New("connection refused")
	w.client.PrependReactor("get", "*", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, boom })
	if st, err := w.check.Check(context.Background(), cm("app", "cm-1", ""), w.clock.Now()); !errors.Is(err, boom) || st != "" {
		t.Errorf("Check = %q, %v; want the API error", st, err)
	}
}

// A kind the checker may not read is ErrForbidden, which a caller tells
// apart from an API server that cannot answer (it will not be able to
// later either, until the right is granted): the result is undecided,
// neither retried nor rejected. The answer is remembered per kind as a
// missing object is, so a flood of results naming it costs one GET a
// second.
func TestCheckForbidden(t *testing.T) {
	w := newWorld(t)
	denied := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "app", errors.New("RBAC: no"))
	w.client.PrependReactor("get", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) { return true, nil, denied })
	for i := range 3 {
		st, err := w.check.Check(context.Background(), cm("app", fmt.Sprintf("cm-%d", i), ""), w.clock.Now())
		if !errors.Is(err, ErrForbidden) || !apierrors.IsForbidden(err) || st != "" {
			t.Fatalf("Check = %q, %v; want ErrForbidden wrapping the API's answer", st, err)
		}
	}
	if n := w.gets(); n != 1 {
		t.Errorf("%d GETs for three results of a kind it may not read, want 1", n)
	}
	w.clock.Add(2 * time.Second)
	if _, err := w.check.Check(context.Background(), cm("app", "cm-1", ""), w.clock.Now()); !errors.Is(err, ErrForbidden) {
		t.Fatalf("a second later: %v", err)
	}
	if n := w.gets(); n != 2 {
		t.Errorf("%d GETs after a second, want 2", n)
	}
	// Another kind is read as before.
	if st, err := w.check.Check(context.Background(), bus.ResourceRef{APIVersion: "v1", Kind: "Namespace", Name: "team", UID: "ns-1"}, w.clock.Now()); err != nil || st != Verified {
		t.Errorf("Namespace: %q, %v", st, err)
	}
}

// Concurrent checks of one object make one lookup.
func TestCheckOneLookupAtATime(t *testing.T) {
	w := newWorld(t)
	release := make(chan struct{})
	var calls atomic.Int32
	w.client.PrependReactor("get", "*", func(clienttesting.Action) (bool, runtime.Object, error) {
		calls.Add(1)
		<-release
		return false, nil, nil
	})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			st, err := w.check.Check(context.Background(), cm("app", "cm-1", ""), w.clock.Now())
			if err == nil && st != Verified {
				err = errors.New(string(st))
			}
			errs <- err
		})
	}
	time.Sleep(50 * time.Millisecond)
	close(release)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d lookups for 8 concurrent checks, want 1", n)
	}
}

func TestRetryIn(t *testing.T) {
	w := newWorld(t, WithGrace(30*time.Second))
	now := w.clock.Now()
	for _, tc := range []struct{ age, want time.Duration }{
		{0, time.Second},
		{500 * time.Millisecond, time.Second},
		{4 * time.Second, 4 * time.Second},
		{20 * time.Second, 10*time.Second + 100*time.Millisecond},
		{29950 * time.Millisecond, 150 * time.Millisecond},
		{time.Hour, 100 * time.Millisecond},
	} {
		if got := w.check.RetryIn(now.Add(-tc.age)); got != tc.want {
			t.Errorf("RetryIn(age %s) = %s, want %s", tc.age, got, tc.want)
		}
	}
	// Doubling: a result is decided within a handful of attempts.
	age, attempts := 250*time.Millisecond, 1
	for age < 30*time.Second {
		age += w.check.RetryIn(now.Add(-age))
		attempts++
	}
	if attempts > 7 {
		t.Errorf("%d attempts to pass the grace period", attempts)
	}
}

func TestNewRejectsBadOptions(t *testing.T) {
	for name, err := range map[string]error{
		"no client":  func() error { _, err := New(nil, newMapper()); return err }(),
		"grace":      WithGrace(0)(&options{}),
		"cache":      WithCache(-1, time.Minute)(&options{}),
		"cache ttl":  WithCache(1, 0)(&options{}),
		"clock":      WithClock(nil)(&options{}),
		"absent":     WithAbsentCache(-1, time.Second)(&options{}),
		"absent ttl": WithAbsentCache(1, 0)(&options{}),
	} {
		if !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
