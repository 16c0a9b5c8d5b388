package model

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/testkit/golden"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// Builders with modifiers.

type resultMod func(*Result)

var testTime = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

func podRef(uid string) bus.ResourceRef {
	return bus.ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: "team", Name: "web-" + uid, UID: uid, ResourceVersion: "7"}
}

func result(uid, policy string, seq uint64, mods ...resultMod) Result {
	r := Result{Sequence: seq, Event: bus.ResultEvent{
		Resource:  podRef(uid),
		Policy:    bus.PolicyRef{Key: policy, UID: "p-" + policy, ResourceVersion: "1"},
		Scored:    true,
		Timestamp: testTime,
		Admission: true,
	}}
	for _, m := range mods {
		m(&r)
	}
	return r
}

func rule(name string, status engine.Status) resultMod {
	return func(r *Result) {
		r.Event.Rules = append(r.Event.Rules, bus.RuleResult{Name: name, Type: engine.TypeValidation, Status: status, Message: name + " " + string(status)})
	}
}

func unscored(r *Result) { r.Event.Scored = false }

func background(r *Result) { r.Event.Admission = false }

func severity(s string) resultMod { return func(r *Result) { r.Event.Severity = s } }

func category(c string) resultMod { return func(r *Result) { r.Event.Category = c } }

func clusterScoped(r *Result) {
	r.Event.Resource = bus.ResourceRef{APIVersion: "v1", Kind: "Namespace", Name: "team", UID: r.Event.Resource.UID}
}

func summaryOf(t *testing.T, rep Report) map[string]int64 {
	t.Helper()
	s, _, err := unstructured.NestedMap(rep.Object.Object, "summary")
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for k, v := range s {
		out[k] = v.(int64)
	}
	return out
}

func resultsOf(t *testing.T, rep Report) []map[string]any {
	t.Helper()
	list, _, err := unstructured.NestedSlice(rep.Object.Object, "results")
	if err != nil {
		t.Fatal(err)
	}
	out := make([]map[string]any, len(list))
	for i, e := range list {
		out[i] = e.(map[string]any)
	}
	return out
}

func TestFoldSummary(t *testing.T) {
	tests := map[string]struct {
		results []Result
		want    map[string]int64
	}{
		"one pass": {
			results: []Result{result("u1", "p1", 1, rule("r1", engine.StatusPass))},
			want:    map[string]int64{"pass": 1, "fail": 0, "warn": 0, "error": 0, "skip": 0},
		},
		"every outcome": {
			results: []Result{
				result("u1", "p1", 1, rule("a", engine.StatusPass), rule("b", engine.StatusFail), rule("c", engine.StatusSkip)),
				result("u1", "p2", 2, rule("a", engine.StatusError), rule("b", engine.StatusWarn), rule("c", engine.StatusPass)),
			},
			want: map[string]int64{"pass": 2, "fail": 1, "warn": 1, "error": 1, "skip": 1},
		},
		"a failure of an unscored policy is a warning": {
			results: []Result{
				result("u1", "p1", 1, unscored, rule("a", engine.StatusFail), rule("b", engine.StatusPass)),
				result("u1", "p2", 2, rule("a", engine.StatusFail)),
			},
			want: map[string]int64{"pass": 1, "fail": 1, "warn": 1, "error": 0, "skip": 0},
		},
		"an unknown status is an error": {
			results: []Result{result("u1", "p1", 1, rule("a", "exploded"))},
			want:    map[string]int64{"pass": 0, "fail": 0, "warn": 0, "error": 1, "skip": 0},
		},
		"the highest sequence of a policy wins": {
			results: []Result{
				result("u1", "p1", 9, rule("a", engine.StatusPass)),
				result("u1", "p1", 3, rule("a", engine.StatusFail)),
			},
			want: map[string]int64{"pass": 1, "fail": 0, "warn": 0, "error": 0, "skip": 0},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rep, err := Fold("u1", tc.results)
			if err != nil {
				t.Fatal(err)
			}
			if got := summaryOf(t, rep); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("summary %v, want %v", got, tc.want)
			}
			// The summary counts the results listed.
			var n int64
			for _, v := range tc.want {
				n += v
			}
			if got := int64(len(resultsOf(t, rep))); got != n {
				t.Errorf("%d results, summary counts %d", got, n)
			}
		})
	}
}

// TestFoldObject pins, with golden files under testdata/fold, the
// PolicyReport and the ClusterPolicyReport folded from fixed results:
// metadata, owner, scope, summary, and the results sorted by policy then
// rule, a stale evaluation left out.
func TestFoldObject(t *testing.T) {
	tests := map[string]struct {
		uid     string
		results []Result
		wantSeq uint64
		cluster bool
	}{
		"policyreport": {
			uid: "u1",
			results: []Result{
				result("u1", "team/p2", 42, rule("r1", engine.StatusFail), severity("High"), category("Pod Security"), background),
				result("u1", "p1", 7, unscored, rule("r1", engine.StatusFail), severity("urgent"), func(r *Result) {
					r.Event.Rules[0].Exception = "team/allow"
				}),
				result("u1", "p3", 12, rule("a", engine.StatusPass), rule("b", engine.StatusSkip), rule("c", "exploded"), rule("d", engine.StatusError)),
				result("u1", "p3", 5, at(-time.Hour), rule("stale", engine.StatusFail)),
			},
			wantSeq: 42,
		},
		"clusterpolicyreport": {
			uid: "ns1",
			results: []Result{
				result("ns1", "p1", 1, clusterScoped, rule("r", engine.StatusPass)),
				result("ns1", "p2", 3, clusterScoped, rule("s", engine.StatusFail), severity("low"), category("Multi-Tenancy")),
			},
			wantSeq: 3,
			cluster: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rep, err := Fold(tc.uid, tc.results)
			if err != nil {
				t.Fatal(err)
			}
			wantGVR := PolicyReports
			if tc.cluster {
				wantGVR = ClusterPolicyReports
			}
			if rep.LastSequence != tc.wantSeq || rep.Cluster() != tc.cluster || rep.Name() != tc.uid || rep.GVR() != wantGVR {
				t.Fatalf("report %+v", rep)
			}
			if rep.Resource.ResourceVersion != "" {
				t.Errorf("resourceVersion kept in the report's resource: %+v", rep.Resource)
			}
			b, err := yaml.Marshal(rep.Object.Object)
			if err != nil {
				t.Fatal(err)
			}
			golden.Assert(t, "testdata/fold/"+name+".yaml", b)
		})
	}
}

// TestFoldNoOwner: results that do not say the resource's kind get a
// report without an owner reference (the API server would refuse an
// incomplete one), rather than no report.
func TestFoldNoOwner(t *testing.T) {
	rep, err := Fold("u1", []Result{result("u1", "p1", 1, rule("r", engine.StatusPass), func(r *Result) { r.Event.Resource.Kind = "" })})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Object == nil || len(rep.Object.GetOwnerReferences()) != 0 {
		t.Fatalf("report %v, want one without owner references", rep.Object)
	}
}

func TestFoldNoResults(t *testing.T) {
	tests := map[string]struct {
		results []Result
		wantSeq uint64
	}{
		"nothing":            {results: nil, wantSeq: 0},
		"policies, no rules": {results: []Result{result("u1", "p1", 5), result("u1", "p2", 6)}, wantSeq: 6},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rep, err := Fold("u1", tc.results)
			if err != nil {
				t.Fatal(err)
			}
			if rep.Object != nil || rep.LastSequence != tc.wantSeq || rep.Resource.UID != "u1" {
				t.Errorf("report %+v, want no object at sequence %d", rep, tc.wantSeq)
			}
		})
	}
}

func TestFoldForeignResult(t *testing.T) {
	_, err := Fold("u1", []Result{result("u1", "p1", 1), result("u2", "p1", 2)})
	if !errors.Is(err, ErrForeignResult) {
		t.Fatalf("error %v, want ErrForeignResult", err)
	}
}

// TestFoldDeterministic: any order of the same results, duplicates
// included, gives byte-identical objects.
func TestFoldDeterministic(t *testing.T) {
	var in []Result
	for i, p := range []string{"zeta", "alpha", "team/mid", "beta"} {
		in = append(in, result("u1", p, uint64(10+i),
			rule("z-rule", engine.StatusPass), rule("a-rule", engine.StatusFail), rule("m-rule", engine.StatusSkip)))
	}
	// Two rules of the same name in one policy: still a total order.
	in = append(in, result("u1", "dup", 3, rule("same", engine.StatusPass), rule("same", engine.StatusFail)))
	first, err := Fold("u1", in)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(first.Object)
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 50 {
		shuffled := append([]Result(nil), in...)
		shuffled = append(shuffled, in[rng.IntN(len(in))]) // a duplicate
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		rep, err := Fold("u1", shuffled)
		if err != nil {
			t.Fatal(err)
		}
		got, err := json.Marshal(rep.Object)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("order %d gives a different object:\n%s\nwant\n%s", i, got, want)
		}
	}
	// Sorted by policy, then rule.
	var keys []string
	for _, e := range resultsOf(t, first) {
		keys = append(keys, e["policy"].(string)+"|"+e["rule"].(string)+"|"+e["result"].(string))
	}
	wantKeys := []string{
		"alpha|a-rule|fail", "alpha|m-rule|skip", "alpha|z-rule|pass",
		"beta|a-rule|fail", "beta|m-rule|skip", "beta|z-rule|pass",
		"dup|same|fail", "dup|same|pass",
		"team/mid|a-rule|fail", "team/mid|m-rule|skip", "team/mid|z-rule|pass",
		"zeta|a-rule|fail", "zeta|m-rule|skip", "zeta|z-rule|pass",
	}
	if !reflect.DeepEqual(keys, wantKeys) {
		t.Errorf("order %v\nwant %v", keys, wantKeys)
	}
}

// Modifiers of the order's keys.
func policyRV(rv string) resultMod { return func(r *Result) { r.Event.Policy.ResourceVersion = rv } }

func policyUID(uid string) resultMod { return func(r *Result) { r.Event.Policy.UID = uid } }

func resourceVersion(rv string) resultMod {
	return func(r *Result) { r.Event.Resource.ResourceVersion = rv }
}

func at(d time.Duration) resultMod { return func(r *Result) { r.Event.Timestamp = testTime.Add(d) } }

func retracted(reason string) resultMod {
	return func(r *Result) { r.Event.Rules, r.Event.Retracted = nil, reason }
}

// TestCompareResults: the order of two evaluations of one policy on one
// resource, key by key (see events.CompareResults).
func TestCompareResults(t *testing.T) {
	tests := map[string]struct {
		older, newer Result
	}{
		"a later policy version, whatever the resource version and time": {
			older: result("u1", "p", 9, policyRV("10"), resourceVersion("700"), at(time.Minute)),
			newer: result("u1", "p", 3, policyRV("11"), resourceVersion("500")),
		},
		"policy versions compare as integers": {
			older: result("u1", "p", 2, policyRV("9")),
			newer: result("u1", "p", 1, policyRV("10")),
		},
		"a policy replaced under its name: the new one is later": {
			older: result("u1", "p", 5, policyUID("old"), policyRV("40"), at(time.Hour)),
			newer: result("u1", "p", 4, policyUID("new"), policyRV("41")),
		},
		"a policyDeleted retraction over a later resource version": {
			older: result("u1", "p", 8, policyRV("10"), resourceVersion("900"), at(time.Hour), rule("r", engine.StatusFail)),
			newer: result("u1", "p", 7, policyRV("10"), resourceVersion("500"), retracted(bus.RetractedPolicyDeleted)),
		},
		"a notSelected retraction is not final: a later resource version wins": {
			older: result("u1", "p", 8, resourceVersion("500"), at(time.Hour), retracted(bus.RetractedNotSelected)),
			newer: result("u1", "p", 7, resourceVersion("501"), rule("r", engine.StatusPass)),
		},
		"a later resource version, whatever the time": {
			older: result("u1", "p", 9, resourceVersion("99"), at(time.Hour)),
			newer: result("u1", "p", 1, resourceVersion("100")),
		},
		"a CREATE (no resource version) before any stored state": {
			older: result("u1", "p", 9, resourceVersion(""), at(time.Hour)),
			newer: result("u1", "p", 1, resourceVersion("1")),
		},
		"opaque resource versions: the time decides": {
			older: result("u1", "p", 9, resourceVersion("b"), at(-time.Second)),
			newer: result("u1", "p", 1, resourceVersion("a")),
		},
		"same versions: the later evaluation": {
			older: result("u1", "p", 9, at(-time.Nanosecond)),
			newer: result("u1", "p", 1),
		},
		"all alike: the later stream sequence": {
			older: result("u1", "p", 1),
			newer: result("u1", "p", 2),
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if c := CompareResults(tc.older, tc.newer); c >= 0 {
				t.Errorf("CompareResults(older, newer) = %d, want < 0", c)
			}
			if c := CompareResults(tc.newer, tc.older); c <= 0 {
				t.Errorf("CompareResults(newer, older) = %d, want > 0", c)
			}
			if c := CompareResults(tc.newer, tc.newer); c != 0 {
				t.Errorf("CompareResults(x, x) = %d", c)
			}
			// Fold keeps the newer, in either order.
			tc.older.Event.Rules = append(tc.older.Event.Rules, bus.RuleResult{Name: "older", Status: engine.StatusFail})
			for _, in := range [][]Result{{tc.older, tc.newer}, {tc.newer, tc.older}} {
				rep, err := Fold("u1", in)
				if err != nil {
					t.Fatal(err)
				}
				if rep.LastSequence != tc.newer.Sequence {
					t.Errorf("fold at sequence %d, want the newer's %d", rep.LastSequence, tc.newer.Sequence)
				}
				if rep.Object != nil {
					for _, e := range resultsOf(t, rep) {
						if e["rule"] == "older" {
							t.Errorf("the older evaluation was folded: %v", e)
						}
					}
				}
			}
		})
	}
}

// TestNewestAnyOrder: among many evaluations of one policy on one
// resource, in every order, Newest and Fold pick the same one (the order is
// total: no cycles).
func TestNewestAnyOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var in []Result
	for i := range 40 {
		mods := []resultMod{
			policyRV([]string{"", "7", "8", "x"}[rng.IntN(4)]),
			resourceVersion([]string{"", "100", "101", "abc"}[rng.IntN(4)]),
			at(time.Duration(rng.IntN(5)) * time.Second),
		}
		switch rng.IntN(4) {
		case 0:
			mods = append(mods, retracted(bus.RetractedPolicyDeleted))
		case 1:
			mods = append(mods, retracted(bus.RetractedNotSelected))
		default:
			mods = append(mods, rule(fmt.Sprint("r", i), engine.StatusPass))
		}
		in = append(in, result("u1", "p", uint64(i+1), mods...))
	}
	want := Newest(in)
	for _, r := range in {
		if CompareResults(r, want) > 0 {
			t.Fatalf("%d is newer than the newest %d", r.Sequence, want.Sequence)
		}
	}
	first, err := Fold("u1", in)
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		shuffled := append([]Result(nil), in...)
		rng.Shuffle(len(shuffled), func(a, b int) { shuffled[a], shuffled[b] = shuffled[b], shuffled[a] })
		if got := Newest(shuffled); got.Sequence != want.Sequence {
			t.Fatalf("newest %d in one order, %d in another", got.Sequence, want.Sequence)
		}
		rep, err := Fold("u1", shuffled)
		if err != nil {
			t.Fatal(err)
		}
		if rep.LastSequence != first.LastSequence || (rep.Object == nil) != (first.Object == nil) {
			t.Fatalf("fold differs with the order: %d vs %d", rep.LastSequence, first.LastSequence)
		}
	}
}

func BenchmarkFold(b *testing.B) {
	var in []Result
	for i := range 10 {
		in = append(in, result("u1", "policy-"+string(rune('a'+i)), uint64(i+1),
			rule("r1", engine.StatusPass), rule("r2", engine.StatusFail), rule("r3", engine.StatusSkip)))
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Fold("u1", in); err != nil {
			b.Fatal(err)
		}
	}
}

// A ValidatingPolicy that shares its name with a ClusterPolicy keeps its
// own results: the fold (and the results' subjects) key a CEL kind's
// results by kind and name, so neither replaces the other.
func TestFoldPolicyKinds(t *testing.T) {
	cpol := result("u1", "require-team", 1, rule("check-team", engine.StatusFail))
	vpol := result("u1", "require-team", 2, rule("", engine.StatusPass))
	vpol.Event.Policy.Kind = "ValidatingPolicy"
	rep, err := Fold("u1", []Result{cpol, vpol})
	if err != nil {
		t.Fatal(err)
	}
	got := resultsOf(t, rep)
	if len(got) != 2 {
		t.Fatalf("%d results, want the ClusterPolicy's and the ValidatingPolicy's: %v", len(got), got)
	}
	for _, e := range got {
		if e["policy"] != "require-team" {
			t.Errorf("policy %v: a report names the policy as Kyverno's do", e["policy"])
		}
	}
	if s := summaryOf(t, rep); s["fail"] != 1 || s["pass"] != 1 {
		t.Fatalf("summary %v", s)
	}
	msgC, err := bus.ResultMessage(cpol.Event)
	if err != nil {
		t.Fatal(err)
	}
	msgV, err := bus.ResultMessage(vpol.Event)
	if err != nil {
		t.Fatal(err)
	}
	if msgC.Subject == msgV.Subject {
		t.Fatalf("both results on subject %s: the stream would keep one", msgC.Subject)
	}
	if _, err := bus.DecodeResults(msgV.Subject, msgV.Data); err != nil {
		t.Fatalf("the ValidatingPolicy's result does not read back from its subject: %v", err)
	}
}
