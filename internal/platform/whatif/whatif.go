// Package whatif evaluates candidate policies on the admission log's
// recorded requests and tallies what each rule would have done, and what
// changes against the installed policy a candidate would replace. It is
// shared by `verdict whatif` (candidates from files) and the reporter
// (candidates in the cluster, policy.AnnotationCandidate): one
// evaluation, one way of counting.
package whatif

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// What a candidate's rule would have done to a request or an object.
const (
	Deny     = "deny"
	Warn     = "warn"
	Mutate   = "mutate"
	Generate = "generate"
	Error    = "error"
	Pass     = "pass"
	Skip     = "skip"
)

// Outcomes are the outcomes in the order reports list them.
var Outcomes = []string{Deny, Warn, Mutate, Generate, Error, Pass, Skip}

// Example is one recorded request, or one of the cluster's objects (no
// time, operation or user), and what a rule would have done.
type Example struct {
	Time      time.Time `json:"time,omitzero"`
	Operation string    `json:"operation,omitempty"`
	Kind      string    `json:"kind"`
	Namespace string    `json:"namespace,omitempty"`
	Name      string    `json:"name"`
	User      string    `json:"user,omitempty"`
	Message   string    `json:"message,omitempty"`
}

// Rule is what one rule of a candidate would have done to the recorded
// requests (Counts, Examples) and to the cluster's objects (Resources,
// ResourceExamples: what it would do to their next update): counts by
// outcome, and examples of each outcome but pass and skip.
type Rule struct {
	Policy           string               `json:"policy"`
	Rule             string               `json:"rule"`
	Counts           map[string]int       `json:"counts"`
	Examples         map[string][]Example `json:"examples,omitempty"`
	Resources        map[string]int       `json:"resources,omitempty"`
	ResourceExamples map[string][]Example `json:"resourceExamples,omitempty"`
}

// Change compares a candidate with the installed policy it would replace
// on the requests it decided, by the log's findings: requests the
// candidate denies that the installed policy let through, and the other
// way round.
type Change struct {
	// Policy is the installed policy's result key.
	Policy         string `json:"policy"`
	NewlyDenied    int    `json:"newlyDenied"`
	NoLongerDenied int    `json:"noLongerDenied"`
	// DeniedUnrecorded are the installed policy's denials whose object
	// the log does not hold (objects are recorded for admitted requests
	// only): what the candidate would do with them is not known.
	DeniedUnrecorded int       `json:"deniedUnrecorded"`
	Newly            []Example `json:"newlyDeniedExamples,omitempty"`
	NoLonger         []Example `json:"noLongerDeniedExamples,omitempty"`
}

// Report is what the candidates would have done to the recorded
// requests of a window.
type Report struct {
	Since time.Time `json:"since"`
	// Requests are the recorded requests evaluated (those with their
	// object); WithoutObject the decisions of the window that carry none.
	Requests      int `json:"requests"`
	WithoutObject int `json:"withoutObject"`
	// Objects are the cluster's objects the candidates selected (Object).
	Objects int      `json:"objects,omitempty"`
	Rules   []Rule   `json:"rules"`
	Changes []Change `json:"changes"`
}

// Tally evaluates candidates on recorded requests and counts.
type Tally struct {
	eng      *engine.Engine
	set      *engine.Set
	examples int
	rep      Report
	rules    map[[2]string]*Rule
	order    [][2]string
	// changes by candidate result key; keys in the set's order.
	changes map[string]*Change
	keys    []string
}

// NewTally evaluates set's policies (the candidates, with the
// exceptions that apply to them) with eng, listing at most examples
// requests per rule and outcome (0: all). installed gives the result key
// of the installed policy each candidate is compared with, or "" for
// none; nil compares each with the installed policy of its own key.
func NewTally(eng *engine.Engine, set *engine.Set, since time.Time, examples int, installed func(*engine.Policy) string) *Tally {
	t := &Tally{eng: eng, set: set, examples: examples, rules: map[[2]string]*Rule{}, changes: map[string]*Change{}}
	t.rep.Since = since
	for _, p := range set.Policies {
		key := bus.PolicyRefOf(p).ResultKey()
		against := key
		if installed != nil {
			against = installed(p)
		}
		if against == "" {
			continue
		}
		t.changes[key] = &Change{Policy: against}
		t.keys = append(t.keys, key)
	}
	return t
}

// Decision evaluates the candidates on one recorded decision (a decision
// without its object is only counted); nsLabels are the labels of its
// namespace, for namespaceSelector (nil when not known).
func (t *Tally) Decision(ctx context.Context, d bus.Decision, nsLabels map[string]string) {
	var obj map[string]any
	if len(d.Object) > 0 {
		if err := json.Unmarshal(d.Object, &obj); err != nil {
			obj = nil
		}
	}
	if obj == nil {
		t.rep.WithoutObject++
		t.unrecorded(d)
		return
	}
	t.rep.Requests++
	req := &engine.Request{
		Operation: d.Operation, Object: obj, Namespace: d.Resource.Namespace, Name: d.Resource.Name, DryRun: d.DryRun,
		NamespaceLabels: nsLabels,
		UserInfo:        engine.UserInfo{Username: d.User.Username, UID: d.User.UID, Groups: d.User.Groups},
	}
	resps, _ := t.eng.Apply(ctx, req, t.set)
	t.add(d, obj, resps)
}

func (t *Tally) example(list []Example, ex Example) []Example {
	if t.examples > 0 && len(list) >= t.examples {
		return list
	}
	return append(list, ex)
}

// installedDenied reports whether the log's findings say policy key
// denied d.
func installedDenied(d bus.Decision, key string) bool {
	return slices.ContainsFunc(d.Findings, func(f bus.Finding) bool { return f.Policy == key && f.Action == bus.ActionDeny })
}

// add counts what the candidates' responses say of one recorded request.
func (t *Tally) add(d bus.Decision, obj map[string]any, resps []engine.Response) {
	ex := Example{Time: d.Time, Operation: d.Operation, Kind: document.String(obj, "kind"),
		Namespace: document.String(obj, "metadata", "namespace"), Name: document.String(obj, "metadata", "name"), User: d.User.Username}
	decided := map[string]bool{}
	for _, resp := range resps {
		key := bus.PolicyRefOf(resp.Policy).ResultKey()
		decided[key] = true
		denies := false
		for _, rr := range resp.Rules {
			outcome := Outcome(rr)
			if outcome == Deny || (outcome == Error && resp.Policy.Raw.Spec.FailurePolicy != "Ignore") {
				denies = true // as the webhook decides (blockingRules)
			}
			r := t.rule(key, rr.Name)
			r.Counts[outcome]++
			if outcome != Pass && outcome != Skip {
				if r.Examples == nil {
					r.Examples = map[string][]Example{}
				}
				e := ex
				e.Message = rr.Message
				r.Examples[outcome] = t.example(r.Examples[outcome], e)
			}
		}
		c := t.changes[key]
		if c == nil {
			continue
		}
		installed := installedDenied(d, c.Policy)
		switch {
		case denies && !installed:
			c.NewlyDenied++
			c.Newly = t.example(c.Newly, ex)
		case !denies && installed:
			c.NoLongerDenied++
			c.NoLonger = t.example(c.NoLonger, ex)
		}
	}
	// A candidate that selected nothing of the request may still be no
	// longer denying what the installed policy denied.
	for _, key := range t.keys {
		if c := t.changes[key]; !decided[key] && installedDenied(d, c.Policy) {
			c.NoLongerDenied++
			c.NoLonger = t.example(c.NoLonger, ex)
		}
	}
}

// rule is the tally of one rule of the candidate of result key.
func (t *Tally) rule(key, name string) *Rule {
	id := [2]string{key, name}
	r, ok := t.rules[id]
	if !ok {
		r = &Rule{Policy: key, Rule: name, Counts: map[string]int{}}
		t.rules[id] = r
		t.order = append(t.order, id)
	}
	return r
}

// Object evaluates the candidates' checks (validate and image rules) on
// one of the cluster's objects, as a background scan does: what they
// would do to its next update. nsLabels and nsObject are its
// namespace's labels and object (nil when not known).
func (t *Tally) Object(ctx context.Context, obj map[string]any, nsLabels map[string]string, nsObject map[string]any) {
	req := &engine.Request{Object: obj, NamespaceLabels: nsLabels, NamespaceObject: nsObject}
	ex := Example{Kind: document.String(obj, "kind"), Namespace: document.String(obj, "metadata", "namespace"), Name: document.String(obj, "metadata", "name")}
	selected := false
	for _, p := range t.set.Policies {
		resp := t.eng.Check(ctx, req, p, t.set.Exceptions)
		if len(resp.Rules) == 0 {
			continue
		}
		selected = true
		key := bus.PolicyRefOf(p).ResultKey()
		for _, rr := range resp.Rules {
			outcome := Outcome(rr)
			r := t.rule(key, rr.Name)
			if r.Resources == nil {
				r.Resources = map[string]int{}
			}
			r.Resources[outcome]++
			if outcome != Pass && outcome != Skip {
				if r.ResourceExamples == nil {
					r.ResourceExamples = map[string][]Example{}
				}
				e := ex
				e.Message = rr.Message
				r.ResourceExamples[outcome] = t.example(r.ResourceExamples[outcome], e)
			}
		}
	}
	if selected {
		t.rep.Objects++
	}
}

// unrecorded counts the installed policies' denials of a request whose
// object the log does not hold.
func (t *Tally) unrecorded(d bus.Decision) {
	for _, key := range t.keys {
		if c := t.changes[key]; installedDenied(d, c.Policy) {
			c.DeniedUnrecorded++
		}
	}
}

// Outcome is what rr would have done at admission: a failed Enforce rule
// denies, another failure warns; an error is an error (it denies under
// failurePolicy Fail); a mutate or generate rule that applied mutates or
// generates.
func Outcome(rr engine.RuleResponse) string {
	switch rr.Status {
	case engine.StatusFail:
		if rr.Enforce {
			return Deny
		}
		return Warn
	case engine.StatusError:
		return Error
	case engine.StatusWarn:
		return Warn
	case engine.StatusPass:
		switch rr.Type {
		case engine.TypeMutation:
			return Mutate
		case engine.TypeGeneration:
			return Generate
		}
		return Pass
	}
	return Skip
}

// Report is what was counted so far.
func (t *Tally) Report() Report {
	rep := t.rep
	rep.Rules = make([]Rule, 0, len(t.order))
	for _, id := range t.order {
		rep.Rules = append(rep.Rules, *t.rules[id])
	}
	rep.Changes = make([]Change, 0, len(t.keys))
	for _, k := range t.keys {
		rep.Changes = append(rep.Changes, *t.changes[k])
	}
	return rep
}
