package bus

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

func TestResultMessageIDs(t *testing.T) {
	ev := ResultEvent{
		Resource: ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: "ns", Name: "a.b", UID: "u1", ResourceVersion: "7"},
		Policy:   PolicyRef{Key: "ns/p", UID: "p1", ResourceVersion: "3"},
		Rules:    []RuleResult{{Name: "r", Type: engine.TypeValidation, Status: engine.StatusFail}},
	}
	m, err := ResultMessage(ev)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(m.Subject, "verdict.results.u1.") {
		t.Errorf("subject %s", m.Subject)
	}
	later := ev
	later.Timestamp = later.Timestamp.Add(1)
	if m2, _ := ResultMessage(later); m2.ID != m.ID {
		t.Error("the id depends on the timestamp: two evaluations of the same versions must collapse")
	}
	admission := ev
	admission.RequestUID = "req"
	retracted := ev
	retracted.Rules, retracted.Retracted = nil, RetractedNotSelected
	ids := map[string]bool{m.ID: true}
	for _, other := range []ResultEvent{admission, retracted} {
		m2, err := ResultMessage(other)
		if err != nil {
			t.Fatal(err)
		}
		if m2.Subject != m.Subject || ids[m2.ID] {
			t.Errorf("%+v: subject %s id %s; want the same subject and a new id", other, m2.Subject, m2.ID)
		}
		ids[m2.ID] = true
	}
	// Policies from files have no uid or resourceVersion: the results of
	// one admission still have an id each (issue 33).
	fromFiles := map[string]bool{}
	for _, p := range []PolicyRef{{Key: "a"}, {Key: "b"}, {Key: "ns/a"}, {Key: "a", Kind: "ValidatingPolicy"}} {
		e := admission
		e.Policy = p
		m, err := ResultMessage(e)
		if err != nil {
			t.Fatal(err)
		}
		if fromFiles[m.ID] {
			t.Errorf("policy %+v: id %s already given to another policy's result", p, m.ID)
		}
		fromFiles[m.ID] = true
	}
	if _, err := ResultMessage(ResultEvent{Policy: ev.Policy}); !errors.Is(err, ErrIncomplete) {
		t.Errorf("no resource uid: %v", err)
	}
}

func TestSameOutcome(t *testing.T) {
	a := ResultEvent{
		Resource: ResourceRef{UID: "u", ResourceVersion: "1"}, Policy: PolicyRef{Key: "p", UID: "pu", ResourceVersion: "1"},
		Rules: []RuleResult{{Name: "r", Status: engine.StatusPass, Message: "ok"}}, Category: "c", Scored: true,
	}
	b := a
	b.Resource.ResourceVersion, b.RequestUID, b.Admission = "2", "req", true
	if !SameOutcome(a, b) {
		t.Error("resource version, request and process do not change the outcome")
	}
	for name, mod := range map[string]func(*ResultEvent){
		"policy version": func(e *ResultEvent) { e.Policy.ResourceVersion = "2" },
		"status":         func(e *ResultEvent) { e.Rules = []RuleResult{{Name: "r", Status: engine.StatusFail, Message: "ok"}} },
		"message":        func(e *ResultEvent) { e.Rules = []RuleResult{{Name: "r", Status: engine.StatusPass, Message: "other"}} },
		"rules":          func(e *ResultEvent) { e.Rules = nil },
		"severity":       func(e *ResultEvent) { e.Severity = "high" },
		"scored":         func(e *ResultEvent) { e.Scored = false },
		"retracted":      func(e *ResultEvent) { e.Retracted = RetractedPolicyDeleted },
	} {
		c := a
		mod(&c)
		if SameOutcome(a, c) {
			t.Errorf("%s: reported the same outcome", name)
		}
	}
}

func TestScanMessage(t *testing.T) {
	pol := PolicyRef{Key: "ns/p.x", UID: "pu", ResourceVersion: "9"}
	a, err := ScanMessage(ScanItem{Action: ScanPolicy, Policy: pol, Reason: "created"}, pol.UID, pol.ResourceVersion)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := ScanMessage(ScanItem{Action: ScanPolicy, Policy: pol, Reason: "started"}, pol.UID, pol.ResourceVersion)
	if a.ID != b.ID || a.Subject != b.Subject {
		t.Error("the same policy version from two replicas must give one item")
	}
	tick, _ := ScanMessage(ScanItem{Action: ScanPolicy, Policy: pol}, pol.UID, pol.ResourceVersion, "tick", "42")
	if tick.ID == a.ID {
		t.Error("a tick's item must not collapse with the change's")
	}
	if !strings.HasPrefix(a.Subject, "verdict.work.scan.") {
		t.Errorf("subject %s", a.Subject)
	}
	for _, bad := range []ScanItem{{Action: ScanPolicy}, {Action: ScanResourceGone}, {Action: "bogus"}} {
		if _, err := ScanMessage(bad); !errors.Is(err, ErrIncomplete) {
			t.Errorf("%+v: %v", bad, err)
		}
	}
	if m, err := ScanMessage(ScanItem{Action: ScanAll}); err != nil || m.Subject != "verdict.work.scan.all" {
		t.Errorf("all: %s %v", m.Subject, err)
	}
}

func TestWorkMessage(t *testing.T) {
	item := WorkItem{
		Kind:    WorkGenerate,
		Policy:  PolicyRef{Key: "add-netpol", UID: "p-1", ResourceVersion: "7"},
		Rule:    "default-deny",
		Trigger: ResourceRef{APIVersion: "v1", Kind: "Namespace", Name: "team.a", UID: "ns-1", ResourceVersion: "3"},
	}
	a, err := WorkMessage(item)
	if err != nil {
		t.Fatal(err)
	}
	kind, _, err := ParseWorkSubject(a.Subject)
	if err != nil || kind != WorkGenerate {
		t.Fatalf("subject %q: kind %q, %v", a.Subject, kind, err)
	}
	b, _ := WorkMessage(item)
	if a.ID == "" || a.ID != b.ID || a.Subject != b.Subject {
		t.Fatalf("not deterministic: %+v %+v", a, b)
	}
	item.Trigger.ResourceVersion = "4"
	if c, _ := WorkMessage(item); c.ID == a.ID || c.Subject != a.Subject {
		t.Fatal("another trigger version keeps the id, or changes the subject")
	}
	// Items of other actions and causes: ids apart from the admission
	// item's; a drift item's id follows the downstream's version.
	drift := item
	drift.Cause = CauseDrift
	drift.Downstream = &ResourceRef{Kind: "ConfigMap", Name: "settings", UID: "cm-1", ResourceVersion: "10"}
	d1, _ := WorkMessage(drift)
	d1again, _ := WorkMessage(drift)
	drift.Downstream.ResourceVersion = "11"
	d2, _ := WorkMessage(drift)
	if d1.ID == a.ID || d1.ID != d1again.ID || d2.ID == d1.ID || d1.Subject != a.Subject {
		t.Fatalf("drift ids %q %q %q, admission %q", d1.ID, d1again.ID, d2.ID, a.ID)
	}
	gone := WorkItem{Kind: WorkGenerate, Policy: item.Policy, Rule: item.Rule, Action: WorkPolicyDeleted}
	g, err := WorkMessage(gone)
	if err != nil || g.Subject == a.Subject || !strings.HasSuffix(g.Subject, "policyDeleted") {
		t.Fatalf("policyDeleted subject %q, %v", g.Subject, err)
	}
	if (WorkItem{}).Act() != WorkApply {
		t.Fatal("an item without an action is not an apply item")
	}
	item.Kind = "delete-everything"
	if _, err := WorkMessage(item); !errors.Is(err, queue.ErrInvalidKind) {
		t.Fatalf("unknown kind: %v", err)
	}
}

// FuzzResultMessage holds ResultMessage to the subject, id and payload
// its parts make one by one (ResultSubject, queue.MsgID,
// EncodeResultEvent).
func FuzzResultMessage(f *testing.F) {
	f.Add("uid-1", "7", "ns/p.x", "p-uid", "3", "req-1", "", "msg")
	f.Add("", "", "", "", "", "", RetractedPolicyDeleted, "")
	f.Add("a.b~c%", "\xff", "p", "", "", "", RetractedNotSelected, "ü ✓")
	f.Fuzz(func(t *testing.T, uid, rv, key, puid, prv, req, retracted, msg string) {
		ev := ResultEvent{
			Resource:   ResourceRef{APIVersion: "v1", Kind: "Pod", Name: msg, UID: uid, ResourceVersion: rv},
			Policy:     PolicyRef{Key: key, UID: puid, ResourceVersion: prv},
			Rules:      []RuleResult{{Name: "r", Type: engine.TypeValidation, Status: engine.StatusFail, Message: msg}},
			RequestUID: req,
			Retracted:  retracted,
		}
		got, err := ResultMessage(ev)
		if ev.Resource.UID == "" || ev.Policy.Key == "" {
			if !errors.Is(err, ErrIncomplete) {
				t.Fatalf("incomplete event: %v", err)
			}
		} else {
			parts := []string{"result", uid, rv, ev.Policy.ResultKey(), puid, prv, req}
			if retracted != "" {
				parts = append(parts, "retracted", retracted)
			}
			data, _ := EncodeResultEvent(ev)
			want := queue.Message{Subject: ResultSubject(uid, ev.Policy.ResultKey()), ID: queue.MsgID(parts...), Data: data}
			if err != nil || !reflect.DeepEqual(got, want) {
				t.Fatalf("ResultMessage = %+v, %v\nwant %+v", got, err, want)
			}
		}
	})
}

// TestWorkMessageOfACreation: without mutual TLS, the apply item of a
// CREATE has one id per trigger uid and rule, whatever the request's uid,
// requester or policy version, so a review forged after the real one for
// the same uid is a duplicate (issue 28, finding 2); with mutual TLS, and
// for other operations, the ids stay per request.
func TestWorkMessageOfACreation(t *testing.T) {
	real := WorkItem{
		Kind:       WorkGenerate,
		Policy:     PolicyRef{Key: "ns-owner", UID: "p-1", ResourceVersion: "7"},
		Rule:       "owner-binding",
		Trigger:    ResourceRef{APIVersion: "v1", Kind: "Namespace", Name: "team-a", UID: "ns-1"},
		Operation:  "CREATE",
		UserInfo:   engine.UserInfo{Username: "alice"},
		RequestUID: "r-1",
	}
	forged := real
	forged.UserInfo = engine.UserInfo{Username: "mallory"}
	forged.RequestUID = "r-2"
	forged.Policy.ResourceVersion = "8"
	tests := map[string]struct {
		mod  func(a, b *WorkItem)
		same bool
	}{
		"a creation, unverified: one id":       {mod: func(a, b *WorkItem) {}, same: true},
		"another rule":                         {mod: func(_, b *WorkItem) { b.Rule = "other" }},
		"another trigger uid":                  {mod: func(_, b *WorkItem) { b.Trigger.UID = "ns-2" }},
		"mutual TLS: per request":              {mod: func(a, b *WorkItem) { a.RequesterVerified, b.RequesterVerified = true, true }},
		"an UPDATE: per request":               {mod: func(a, b *WorkItem) { a.Operation, b.Operation = "UPDATE", "UPDATE" }},
		"a deleteDownstream item: per request": {mod: func(a, b *WorkItem) { a.Action, b.Action = WorkDeleteDownstream, WorkDeleteDownstream }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			a, b := real, forged
			tc.mod(&a, &b)
			ma, err := WorkMessage(a)
			if err != nil {
				t.Fatal(err)
			}
			mb, err := WorkMessage(b)
			if err != nil {
				t.Fatal(err)
			}
			if (ma.ID == mb.ID) != tc.same {
				t.Fatalf("ids %q and %q: same %v, want %v", ma.ID, mb.ID, ma.ID == mb.ID, tc.same)
			}
		})
	}
}
