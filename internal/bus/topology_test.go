package bus

import (
	"errors"
	"testing"

	"github.com/verdict-dev/verdict/pkg/queue"
)

// TestSubjects pins Verdict's subjects: stored messages and the NATS
// permissions of every service name them.
func TestSubjects(t *testing.T) {
	s := ResultSubject("uid-1", "ns/policy.v2")
	if s != "verdict.results.uid-1.ns%2Fpolicy~v2" {
		t.Fatalf("ResultSubject = %q", s)
	}
	uid, key, batch, err := ParseResultsSubject(s)
	if err != nil || uid != "uid-1" || key != "ns/policy.v2" || batch {
		t.Fatalf("ParseResultsSubject(%q) = %q, %q, %v, %v", s, uid, key, batch, err)
	}
	b := ResultBatchSubject("uid.1")
	if b != "verdict.results.uid~1.@batch" {
		t.Fatalf("ResultBatchSubject = %q", b)
	}
	if uid, key, batch, err := ParseResultsSubject(b); err != nil || uid != "uid.1" || key != "" || !batch {
		t.Fatalf("ParseResultsSubject(%q) = %q, %q, %v, %v", b, uid, key, batch, err)
	}
	if !queue.SubjectMatches(ResultsOfResource("uid.1"), b) || !queue.SubjectMatches(ResultBatches, b) ||
		queue.SubjectMatches(ResultBatches, s) || !queue.SubjectMatches(VerifiedBatches, VerifiedCopySubject(b)) {
		t.Fatalf("filters: %q is a resource's result and a batch, %q is not a batch", b, s)
	}
	w, err := WorkSubject(WorkGenerate, "default/my.configmap")
	if err != nil || w != "verdict.work.generate.default%2Fmy~configmap" {
		t.Fatalf("WorkSubject = %q, %v", w, err)
	}
	kind, k, err := ParseWorkSubject(w)
	if err != nil || kind != WorkGenerate || k != "default/my.configmap" {
		t.Fatalf("ParseWorkSubject(%q) = %q, %q, %v", w, kind, k, err)
	}
	if _, err := WorkSubject("bogus", "k"); !errors.Is(err, queue.ErrInvalidKind) {
		t.Fatalf("WorkSubject(bogus) err = %v", err)
	}
	if tick, err := ScheduleTarget(WorkCleanup, "ns/c.p"); err != nil || tick != "verdict.tick.cleanup.ns%2Fc~p" {
		t.Fatalf("ScheduleTarget = %q, %v", tick, err)
	}
	if _, err := ScheduleTarget("bogus", "k"); !errors.Is(err, queue.ErrInvalidKind) {
		t.Fatalf("ScheduleTarget(bogus) err = %v", err)
	}
	if s, err := topology.ScheduleSubject(WorkCleanup, "ns/c.p"); err != nil || s != "verdict.schedule.cleanup.ns%2Fc~p" {
		t.Fatalf("ScheduleSubject = %q, %v", s, err)
	}
	if d := DeadSubject(w); d != "verdict.dead.work.generate.default%2Fmy~configmap" {
		t.Fatalf("DeadSubject = %q", d)
	}
	for _, bad := range []string{"verdict.results.a", "verdict.results.a.b.c", "other.a.b", "verdict.results.a.%2e", "verdict.results.a.@batches"} {
		if _, _, _, err := ParseResultsSubject(bad); err == nil {
			t.Errorf("ParseResultsSubject(%q) accepted", bad)
		}
	}
	if ResultsOfResource("u.1") != "verdict.results.u~1.*" {
		t.Fatalf("ResultsOfResource = %q", ResultsOfResource("u.1"))
	}
}

func FuzzAppendResultSubject(f *testing.F) {
	f.Add("ns/p.x", "uid-1")
	f.Add("", "%~ \xff")
	f.Fuzz(func(t *testing.T, uid, key string) {
		got := string(AppendResultSubject([]byte("x"), uid, key))
		if got != "x"+ResultSubject(uid, key) {
			t.Fatalf("AppendResultSubject(%q, %q) = %q, want x%q", uid, key, got, ResultSubject(uid, key))
		}
		if u, k, batch, err := ParseResultsSubject(got[1:]); err != nil || u != uid || k != key || batch {
			t.Fatalf("ParseResultsSubject(%q) = %q, %q, %v, %v", got[1:], u, k, batch, err)
		}
	})
}
