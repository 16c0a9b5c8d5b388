package reportindex_test

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reportindex"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// result is one evaluation of policy p (at version pv) on resource r (at
// version rv), at time t; rules nil makes it a retraction.
func result(seq uint64, r, p, pv, rv int, t time.Time, statuses ...engine.Status) model.Result {
	ns := fmt.Sprintf("ns-%d", r%3)
	if r%5 == 0 {
		ns = "" // cluster-scoped
	}
	ev := bus.ResultEvent{
		Resource:  bus.ResourceRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns, Name: fmt.Sprintf("cm-%d", r), UID: fmt.Sprintf("uid-%03d", r), ResourceVersion: fmt.Sprint(rv)},
		Policy:    bus.PolicyRef{Key: fmt.Sprintf("policy-%d", p), UID: fmt.Sprintf("puid-%d", p), ResourceVersion: fmt.Sprint(pv)},
		Category:  "Best Practices",
		Severity:  "medium",
		Scored:    p%4 != 0,
		Timestamp: t,
		Admission: seq%2 == 0,
	}
	if p%7 == 0 {
		ev.Policy.Kind = "ValidatingPolicy"
	}
	for i, s := range statuses {
		ev.Rules = append(ev.Rules, bus.RuleResult{Name: fmt.Sprintf("rule-%d", i), Type: engine.TypeValidation, Status: s, Message: fmt.Sprintf("%s by policy %d", s, p)})
	}
	if len(statuses) == 0 {
		ev.Retracted = bus.RetractedNotSelected
	}
	return model.Result{Sequence: seq, Event: ev, Stored: t.Add(time.Millisecond)}
}

// randomResults is a stream of results in which evaluations arrive out
// of order, are repeated, and retracted.
func randomResults(rng *rand.Rand, n, resources, policies int) []model.Result {
	base := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	statuses := []engine.Status{engine.StatusPass, engine.StatusFail, engine.StatusWarn, engine.StatusError, engine.StatusSkip}
	out := make([]model.Result, 0, n)
	for i := range n {
		var st []engine.Status
		if rng.IntN(6) != 0 {
			for range 1 + rng.IntN(3) {
				st = append(st, statuses[rng.IntN(len(statuses))])
			}
		}
		r := result(uint64(i+1), rng.IntN(resources), rng.IntN(policies), 1+rng.IntN(3), 1+rng.IntN(5),
			base.Add(time.Duration(rng.IntN(1000))*time.Second), st...)
		if len(r.Event.Rules) > 0 && rng.IntN(4) == 0 {
			// A CEL policy's audit annotations.
			r.Event.Rules[0].Properties = map[string]string{"team": fmt.Sprint("team-", rng.IntN(3)), "reviewed": "yes"}
		}
		out = append(out, r)
	}
	return out
}

// TestIndexIsTheFold: whatever the order evaluations arrive in, each
// resource's report from the index is, field for field, the fold of all
// its results (what the CRD mode writes); a resource whose results are
// all retracted has none.
func TestIndexIsTheFold(t *testing.T) {
	for seed := range uint64(20) {
		rng := rand.New(rand.NewPCG(seed, 1))
		results := randomResults(rng, 600, 40, 9)
		x := reportindex.New()
		byUID := map[string][]model.Result{}
		for _, r := range results {
			x.Apply(r)
			byUID[r.Event.Resource.UID] = append(byUID[r.Event.Resource.UID], r)
		}
		if x.Seq() != uint64(len(results)) {
			t.Fatalf("seq %d, want %d", x.Seq(), len(results))
		}
		for uid, rs := range byUID {
			want, err := model.Fold(uid, rs)
			if err != nil {
				t.Fatal(err)
			}
			got, ok := x.Report(uid)
			if want.Object == nil {
				if ok {
					t.Fatalf("seed %d: %s has a report, the fold none", seed, uid)
				}
				continue
			}
			if !ok || !reflect.DeepEqual(got.Object.Object, want.Object.Object) || got.LastSequence != want.LastSequence {
				t.Fatalf("seed %d: %s:\nindex %v\nfold  %v", seed, uid, got.Object, want.Object)
			}
		}
	}
}

// TestIndexChanges: a first result adds a report, a newer one modifies
// it, an older one changes nothing, retracting every policy deletes it,
// and forgetting the resource deletes a report at once.
func TestIndexChanges(t *testing.T) {
	x := reportindex.New()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		r      model.Result
		want   reportindex.ChangeType
		change bool
	}{
		{result(1, 1, 1, 1, 2, t0, engine.StatusPass), reportindex.Added, true},
		{result(2, 1, 2, 1, 2, t0, engine.StatusFail), reportindex.Modified, true},
		{result(3, 1, 1, 1, 1, t0.Add(time.Hour), engine.StatusFail), "", false}, // saw an older resource version
		{result(4, 1, 1, 1, 3, t0, engine.StatusFail), reportindex.Modified, true},
		{result(5, 1, 1, 2, 3, t0), reportindex.Modified, true},                 // policy 1 retracted: policy 2 still reports
		{result(6, 1, 2, 1, 3, t0), reportindex.Deleted, true},                  // all retracted
		{result(7, 1, 2, 1, 3, t0.Add(time.Minute)), "", false},                 // a retraction of nothing reported
		{result(8, 1, 2, 1, 4, t0, engine.StatusSkip), reportindex.Added, true}, // back
	}
	for i, s := range steps {
		ch, ok := x.Apply(s.r)
		if ok != s.change || ch.Type != s.want || (ok && (ch.Seq != s.r.Sequence || ch.UID != "uid-001" || ch.Namespace != "ns-1")) {
			t.Fatalf("step %d: %+v %v, want %q %v", i, ch, ok, s.want, s.change)
		}
	}
	if ch, ok := x.Forget("uid-001"); !ok || ch.Type != reportindex.Deleted || ch.Seq != 8 || ch.Version != 8<<8+1 {
		t.Fatalf("forget: %+v %v", ch, ok)
	}
	if _, ok := x.Report("uid-001"); ok {
		t.Fatal("a forgotten resource still has a report")
	}
	if _, ok := x.Forget("uid-001"); ok {
		t.Fatal("forgotten twice")
	}
}

// TestIndexReports: reports are listed by namespace (or all, or the
// cluster-scoped ones), sorted, and page by page without losing or
// repeating one.
func TestIndexReports(t *testing.T) {
	x := reportindex.New()
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for r := range 30 {
		x.Apply(result(uint64(r+1), r, 1, 1, 1, t0, engine.StatusPass))
	}
	x.Apply(result(31, 1, 1, 1, 2, t0)) // uid-001 retracted: no report
	uids, seq, more := x.Reports("ns-1", false, "", 0)
	if seq != 31 || more || len(uids) != 7 { // 1,4,7,...,28 less the multiples of 5 (10, 25) less uid-001
		t.Fatalf("ns-1: %v at %d (more %v)", uids, seq, more)
	}
	cluster, _, _ := x.Reports("", false, "", 0)
	if len(cluster) != 6 || cluster[0] != "uid-000" {
		t.Fatalf("cluster-scoped: %v", cluster)
	}
	all, _, _ := x.Reports("", true, "", 0)
	var paged []string
	after := ""
	for {
		page, _, more := x.Reports("", true, after, 4)
		paged = append(paged, page...)
		if !more {
			break
		}
		last := page[len(page)-1]
		rep, _ := x.Report(last)
		after = reportindex.ContinueKey(rep.Resource.Namespace, last)
	}
	if len(all) != 29 || !reflect.DeepEqual(paged, all) {
		t.Fatalf("paged %v\nall   %v", paged, all)
	}
}

// TestSubscribe: a subscriber gets the changes after its sequence from
// the log, then new ones; one from before what the log keeps must list
// again; one that falls behind is dropped with the reason.
func TestSubscribe(t *testing.T) {
	x := reportindex.New(reportindex.WithChangeLog(10))
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for r := range 8 {
		x.Apply(result(uint64(r+1), r, 1, 1, 1, t0, engine.StatusPass))
	}
	s, err := x.Subscribe(5 << 8)
	if err != nil {
		t.Fatal(err)
	}
	x.Apply(result(9, 8, 1, 1, 1, t0, engine.StatusPass))
	var got []uint64
	for range 4 {
		got = append(got, (<-s.C).Seq)
	}
	if !reflect.DeepEqual(got, []uint64{6, 7, 8, 9}) {
		t.Fatalf("changes %v", got)
	}
	s.Close()
	if _, open := <-s.C; open || s.Err() != nil {
		t.Fatalf("closed subscription: open %v, err %v", open, s.Err())
	}
	for r := 9; r < 20; r++ {
		x.Apply(result(uint64(r+1), r, 1, 1, 1, t0, engine.StatusPass))
	}
	if _, err := x.Subscribe(2 << 8); !errors.Is(err, reportindex.ErrGone) {
		t.Fatalf("a subscription from before the log: %v", err)
	}
	if s, err := x.Subscribe(x.Version()); err != nil || len(s.C) != 0 {
		t.Fatalf("a subscription from now: %v", err)
	}

	slow, err := x.Subscribe(0)
	if err != nil {
		t.Fatal(err)
	}
	for r := range 5000 {
		x.Apply(result(uint64(100+r), 100+r, 1, 1, 1, t0, engine.StatusPass))
	}
	n := 0
	for range slow.C {
		n++
	}
	if !errors.Is(slow.Err(), reportindex.ErrGone) || n == 0 {
		t.Fatalf("a subscriber that fell behind: %d changes, err %v", n, slow.Err())
	}
}

// TestSubscribeAcrossReplicas: a watch resuming on another replica, from
// the version it reached on the first, misses nothing. Two replicas fold
// the same results; replica a applies the result of sequence 3 late (its
// resource was confirmed after sequence 5), replica b at once. A watch
// that reached version 5 on a, before a applied it, resumes on b: b gives
// it that change again (a local change of b's, made before version 5) and
// nothing it had already, and goes on with what follows. A watch from a
// version b has not reached yet gets only what comes after it.
func TestSubscribeAcrossReplicas(t *testing.T) {
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	a, b := reportindex.New(), reportindex.New()
	for _, seq := range []uint64{1, 2, 4, 5} {
		a.Apply(result(seq, int(seq), 1, 1, 1, t0, engine.StatusPass))
	}
	reached := a.Version() // 5<<8: the late result is not in it
	a.Apply(result(3, 3, 1, 1, 1, t0, engine.StatusPass))
	// b confirmed sequence 3 only after 4; then forgot resource 2.
	for _, seq := range []uint64{1, 2, 4, 3, 5} {
		b.Apply(result(seq, int(seq), 1, 1, 1, t0, engine.StatusPass))
	}
	b.Forget("uid-002")
	s, err := b.Subscribe(reached)
	if err != nil {
		t.Fatal(err)
	}
	b.Apply(result(6, 6, 1, 1, 1, t0, engine.StatusPass))
	var got []string
	for range 3 {
		ch := <-s.C
		got = append(got, fmt.Sprintf("%s %s local=%t", ch.Type, ch.UID, ch.Local))
	}
	want := []string{"ADDED uid-003 local=true", "DELETED uid-002 local=true", "ADDED uid-006 local=false"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("changes %v, want %v", got, want)
	}
	if len(s.C) != 0 {
		t.Fatalf("%d more changes", len(s.C))
	}

	// A replica behind: the changes up to the version skipped, the rest
	// delivered.
	c := reportindex.New()
	ahead, err := c.Subscribe(reached)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{1, 2, 4, 5, 6} {
		c.Apply(result(seq, int(seq), 1, 1, 1, t0, engine.StatusPass))
	}
	if ch := <-ahead.C; ch.UID != "uid-006" || len(ahead.C) != 0 {
		t.Fatalf("from a version not reached yet: %s, then %d more", ch.UID, len(ahead.C))
	}
}
