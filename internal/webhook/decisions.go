package webhook

import (
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
	return rec
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
