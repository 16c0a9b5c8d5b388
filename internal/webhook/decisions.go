package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	evt "github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// decisionOf is the admission log's record of d, the answer endpoint
// gave to rv. It holds the request's identity and the answer, never the
// object.
func (s *Server) decisionOf(endpoint string, rv *review, d decision) Decision {
	req := rv.req
	ref := rv.ref()
	name := req.Name
	if name == "" {
		name = ref.Name
	}
	rec := Decision{
		RequestUID: string(req.UID),
		Webhook:    endpoint,
		Operation:  string(req.Operation),
		Resource: evt.DecisionResource{
			Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind,
			Resource: req.Resource.Resource, SubResource: req.SubResource,
			Namespace: req.Namespace, Name: name, UID: ref.UID,
		},
		User:     evt.DecisionUser{Username: req.UserInfo.Username, UID: req.UserInfo.UID, Groups: req.UserInfo.Groups},
		DryRun:   rv.dryRun(),
		Outcome:  decisionOutcome(d.outcome),
		Findings: d.findings,
		Time:     s.now(),
	}
	if d.resp.Result != nil && !d.resp.Allowed {
		rec.Message = d.resp.Result.Message
	}
	if len(d.resp.Patch) > 0 {
		rec.Patch = d.resp.Patch
	}
	if s.objects != nil && d.resp.Allowed && recordsObjects(endpoint) {
		rec.Object, rec.ObjectOmitted = s.objects.record(rv)
	}
	return rec
}

// recordsObjects reports whether endpoint's admitted objects may be
// recorded: the validating webhooks', which see the object as it is
// stored (after every mutation), not the policies' own validation.
func recordsObjects(endpoint string) bool {
	switch endpoint {
	case "validate", "validate-cluster", "validate-namespaced":
		return true
	}
	return false
}

// recordDecision records the answer d to rv, given to the caller of ctx:
// whether it proved to be the API server, and, when it did not, within
// its publish rate (--unverified-results-per-second: a caller forging
// reviews cannot flood the log).
func (s *Server) recordDecision(ctx context.Context, endpoint string, rv *review, d decision) {
	if c, ok := limited(ctx); ok && s.decisionLimit != nil && !s.decisionLimit.allow(c.addr, 1) {
		s.decisionsLimited.Inc()
		return
	}
	rec := s.decisionOf(endpoint, rv, d)
	if c, ok := ctx.Value(callerKey{}).(caller); ok {
		rec.Verified = c.verified
	}
	s.decisions.Record(rec)
}

// decisionOutcome is the admission log's word for an answer's outcome.
func decisionOutcome(o Outcome) string {
	switch o {
	case OutcomeDenied:
		return evt.DecisionDenied
	case OutcomeWarned:
		return evt.DecisionWarned
	case OutcomePatched:
		return evt.DecisionPatched
	}
	return evt.DecisionAllowed
}

// findings collects what the policies did to one request, for the
// admission log; a nil *findings (the log off) collects nothing.
type findings struct{ list []Finding }

// newFindings returns a collector when the admission log is on.
func (s *Server) newFindings() *findings {
	if s.decisions == nil {
		return nil
	}
	return &findings{}
}

// add records that rule of p did action, with msg.
func (f *findings) add(p *engine.Policy, rule, action, msg string) {
	if f == nil {
		return
	}
	f.list = append(f.list, Finding{Policy: policyRef(p).ResultKey(), Rule: rule, Action: action, Message: msg})
}

// rules records every reported rule (failed or errored) of resp as action.
func (f *findings) rules(p *engine.Policy, resp engine.Response, action string) {
	if f == nil {
		return
	}
	for _, rr := range resp.Rules {
		if reported(rr.Status) {
			f.add(p, rr.Name, action, rr.Message)
		}
	}
}

// applied records the rules of resp that passed, as mutations: resp
// patched the object.
func (f *findings) applied(p *engine.Policy, resp engine.Response) {
	if f == nil || resp.Patched == nil {
		return
	}
	for _, rr := range resp.Rules {
		if rr.Status == engine.StatusPass {
			f.add(p, rr.Name, evt.ActionMutate, rr.Message)
		}
	}
}

// into puts the findings into d.
func (f *findings) into(d decision) decision {
	if f != nil {
		d.findings = f.list
	}
	return d
}

// DecisionObjects selects the admitted objects the admission log records
// with their decisions, for `verdict whatif`. A Secret is never recorded,
// whatever the selection.
type DecisionObjects struct {
	// Kinds are the kinds recorded (Pod; * for every kind); none: no
	// object is recorded.
	Kinds []string
	// Namespaces limits them to these namespaces; none: every namespace,
	// and cluster-scoped resources.
	Namespaces []string
	// Redact are the fields removed from an object before it is
	// recorded: dotted paths, [*] for every element of a list
	// (spec.containers[*].env, metadata.annotations).
	Redact []string
}

// validate checks the selection and the paths.
func (o DecisionObjects) validate() error {
	for _, k := range o.Kinds {
		if strings.EqualFold(k, "Secret") {
			return errors.New("decision-object-kinds: a Secret is never recorded")
		}
		if k == "" {
			return errors.New("decision-object-kinds: an empty kind")
		}
	}
	if len(o.Kinds) == 0 && (len(o.Namespaces) > 0 || len(o.Redact) > 0) {
		return errors.New("decision-object-namespaces and decision-object-redact need decision-object-kinds")
	}
	for _, p := range o.Redact {
		if _, err := parseRedaction(p); err != nil {
			return fmt.Errorf("decision-object-redact %q: %w", p, err)
		}
	}
	return nil
}

// objectRecorder records the selected admitted objects, redacted.
type objectRecorder struct {
	all        bool
	kinds      map[string]bool // lower case
	namespaces map[string]bool
	redact     [][]redactStep
}

// newObjectRecorder returns the recorder of o, or nil when o records
// nothing.
func newObjectRecorder(o DecisionObjects) (*objectRecorder, error) {
	if len(o.Kinds) == 0 {
		return nil, nil
	}
	r := &objectRecorder{kinds: map[string]bool{}}
	for _, k := range o.Kinds {
		if k == "*" {
			r.all = true
		}
		r.kinds[strings.ToLower(k)] = true
	}
	if len(o.Namespaces) > 0 {
		r.namespaces = map[string]bool{}
		for _, ns := range o.Namespaces {
			r.namespaces[ns] = true
		}
	}
	for _, p := range o.Redact {
		steps, err := parseRedaction(p)
		if err != nil {
			return nil, err
		}
		r.redact = append(r.redact, steps)
	}
	return r, nil
}

// record returns the object of rv to record, redacted and encoded, or
// nil when it is not selected; omitted says why a selected one is not
// there.
func (r *objectRecorder) record(rv *review) (obj []byte, omitted string) {
	req := rv.req
	if rv.object == nil || (req.Kind.Group == "" && req.Kind.Kind == "Secret") || (req.Resource.Group == "" && req.Resource.Resource == "secrets") {
		return nil, ""
	}
	if !r.all && !r.kinds[strings.ToLower(req.Kind.Kind)] {
		return nil, ""
	}
	if r.namespaces != nil && !r.namespaces[req.Namespace] {
		return nil, ""
	}
	var v any = rv.object
	for _, steps := range r.redact {
		v = redacted(v, steps)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, "unencodable"
	}
	if len(b) > evt.MaxDecisionObject {
		return nil, evt.ObjectTooLarge
	}
	return b, ""
}

// redactStep is one step of a redacted path: a key, and whether the
// value there is a list whose every element the rest applies to.
type redactStep struct {
	key  string
	each bool
}

// parseRedaction parses a dotted path with [*] after a key for every
// element of a list.
func parseRedaction(p string) ([]redactStep, error) {
	if p == "" {
		return nil, errors.New("empty path")
	}
	var steps []redactStep
	for _, part := range strings.Split(p, ".") {
		st := redactStep{key: part}
		if k, ok := strings.CutSuffix(part, "[*]"); ok {
			st = redactStep{key: k, each: true}
		}
		if st.key == "" || strings.ContainsAny(st.key, "[]*") {
			return nil, fmt.Errorf("step %q: a key, or a key followed by [*]", part)
		}
		steps = append(steps, st)
	}
	if steps[len(steps)-1].each {
		return nil, errors.New("a path ends with a key (remove the list itself by its key)")
	}
	return steps, nil
}

// redacted returns v without the field at steps, copying only what
// leads to it: v, shared with the request, is never changed.
func redacted(v any, steps []redactStep) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	st := steps[0]
	child, found := m[st.key]
	if !found {
		return v
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		out[k] = x
	}
	switch {
	case len(steps) == 1:
		delete(out, st.key)
	case st.each:
		list, ok := child.([]any)
		if !ok {
			return v
		}
		copied := make([]any, len(list))
		for i, el := range list {
			copied[i] = redacted(el, steps[1:])
		}
		out[st.key] = copied
	default:
		out[st.key] = redacted(child, steps[1:])
	}
	return out
}
