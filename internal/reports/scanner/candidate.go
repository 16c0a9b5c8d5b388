package scanner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/internal/platform/whatif"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// Bounds of a candidate's status.candidate: examples per rule and
// outcome (and per direction of a change), and the length of a message.
const (
	candidateExamples   = 3
	candidateMessageLen = 256
)

// Sources of a candidate's examples.
const (
	sourceRequest  = "request"
	sourceResource = "resource"
)

// candidateVersion is what a candidate's re-evaluation is decided on: its
// spec (generation, which status writes leave alone, so writing
// status.candidate asks for no evaluation) and what it is compared with.
type candidateVersion struct {
	ref        bus.PolicyRef
	generation int64
	against    string
}

func candidateVersions(ps []*engine.Policy) map[string]candidateVersion {
	out := make(map[string]candidateVersion, len(ps))
	for _, p := range ps {
		ref := bus.PolicyRefOf(p)
		ref.ResourceVersion = ""
		out[ref.ResultKey()] = candidateVersion{ref: ref, generation: p.Raw.Metadata.Generation, against: p.Raw.CandidateFor()}
	}
	return out
}

// publishCandidateChanges publishes an evaluation per candidate created
// or changed (all of them at start), and a clearing per candidate gone
// (deleted, or enforced now).
func (s *Scanner) publishCandidateChanges(ctx context.Context, prev, cur map[string]candidateVersion) {
	now := s.o.now().UTC()
	for key, v := range cur {
		if old, had := prev[key]; had && old == v {
			continue
		}
		gen := strconv.FormatInt(v.generation, 10)
		s.publish(ctx, bus.ScanItem{Action: bus.ScanCandidate, Policy: v.ref, Generation: v.generation, Reason: ReasonChanged, Timestamp: now},
			v.ref.UID, gen, v.against)
	}
	for key, old := range prev {
		if _, ok := cur[key]; !ok {
			s.publish(ctx, bus.ScanItem{Action: bus.ScanCandidateGone, Policy: old.ref, Reason: ReasonDeleted, Timestamp: now},
				old.ref.UID, strconv.FormatInt(old.generation, 10))
		}
	}
}

// candidate finds the candidate an item names in the local cache. It asks
// for a later delivery while the cache may be behind the item.
func (s *Scanner) candidate(m *queue.Msg, item bus.ScanItem) (*engine.Policy, queue.Outcome, bool) {
	for _, p := range s.policies.Candidates() {
		ref := bus.PolicyRefOf(p)
		if ref.ResultKey() != item.Policy.ResultKey() || ref.UID != item.Policy.UID {
			continue
		}
		if p.Raw.Metadata.Generation < item.Generation && m.Delivery < s.o.waitDeliveries {
			return nil, queue.RetryAfter(time.Second), false
		}
		return p, queue.Done(), true
	}
	if m.Delivery < s.o.waitDeliveries {
		// Not (yet) a candidate here: the informer may be behind.
		return nil, queue.RetryAfter(time.Second), false
	}
	// Deleted, replaced or enforced: their own items say so.
	return nil, queue.Done(), false
}

// evaluateCandidate evaluates a candidate on the admission log's recorded
// requests of the window (its own namespace's only, for a namespaced
// kind) and on the objects of the kinds its validate rules name (in its
// namespace, for a namespaced kind), and writes what it would have done
// to its status.candidate. A log that cannot be read (the webhooks record
// none) or a kind the reporter may not list is said in the status'
// message; the rest is still evaluated.
func (s *Scanner) evaluateCandidate(ctx context.Context, m *queue.Msg, item bus.ScanItem) queue.Outcome {
	p, out, ok := s.candidate(m, item)
	if !ok {
		return out
	}
	set, err := s.policies.Set(ctx)
	if err != nil {
		return s.retry(ctx, "policiesUnavailable", err)
	}
	now := s.o.now().UTC()
	cset := &engine.Set{Policies: []*engine.Policy{p}, Exceptions: set.Exceptions}
	var since time.Time
	if s.o.candidates.window > 0 {
		since = now.Add(-s.o.candidates.window)
	}
	ev := &candidateEval{s: s, p: p, nsLabels: map[string]map[string]string{}, seen: map[string]struct{}{},
		tally: whatif.NewTally(s.eng, cset, since, candidateExamples, against)}
	log := logFrom(ctx).With().Str(logkey.Policy, item.Policy.ResultKey()).Logger()

	var notes []string
	if s.o.candidates.window > 0 {
		err := ev.requests(ctx, m, since)
		switch {
		case errors.Is(err, queue.ErrNoStream):
			notes = append(notes, "the admission log holds nothing: the webhooks record no decisions (webhook.decisions.enabled)")
		case err != nil && ctx.Err() != nil:
			return queue.Retry().Because(ctx.Err())
		case err != nil:
			return s.retry(ctx, "candidateLogUnreadable", err)
		}
	}
	kinds, wildcard, err := s.kindsOf(ctx, p)
	if err != nil {
		return s.retry(ctx, "discoveryFailed", err)
	}
	if !p.Raw.Spec.BackgroundEnabled() {
		// Its rules need what only a request has.
		kinds, wildcard = nil, false
		notes = append(notes, "background: false: the cluster's objects are not evaluated")
	}
	if wildcard {
		notes = append(notes, "kinds selected by a wildcard alone are not listed")
	}
	for _, k := range kinds {
		err := s.listKind(ctx, m, p, k.GVR, func(obj *unstructured.Unstructured) error { return ev.object(ctx, obj) })
		switch {
		case errors.Is(err, errKindForbidden):
			s.m.skipped.WithLabelValues(skippedForbidden).Inc()
			notes = append(notes, fmt.Sprintf("the reporter may not list %s", k.GVR.GroupResource()))
		case err != nil && ctx.Err() != nil:
			return queue.Retry().Because(ctx.Err())
		case err != nil:
			return s.retry(ctx, "candidateListFailed", err)
		}
	}
	rep := ev.tally.Report()
	st := candidateStatus(p, rep, now)
	if len(notes) > 0 {
		st.Message = strings.Join(notes, "; ")
	}
	ref := bus.PolicyRefOf(p)
	if err := s.writeCandidate(ctx, ref, &st); err != nil {
		if apierrors.IsNotFound(err) {
			return queue.Done() // deleted meanwhile
		}
		return s.retry(ctx, "candidateStatusNotWritten", err)
	}
	s.m.candidates.WithLabelValues(sourceRequest).Add(float64(rep.Requests))
	s.m.candidates.WithLabelValues(sourceResource).Add(float64(rep.Objects))
	log.Info().Int(logkey.Examined, rep.Objects).Int("requests", rep.Requests).Str(logkey.Reason, item.Reason).Msg("candidateEvaluated")
	return queue.Done()
}

// clearCandidate removes status.candidate from a policy that is no
// longer a candidate (nothing to do when it is gone).
func (s *Scanner) clearCandidate(ctx context.Context, item bus.ScanItem) queue.Outcome {
	for _, p := range s.policies.Candidates() {
		if ref := bus.PolicyRefOf(p); ref.ResultKey() == item.Policy.ResultKey() && ref.UID == item.Policy.UID {
			return queue.Done() // a candidate again
		}
	}
	err := s.writeCandidate(ctx, item.Policy, nil)
	switch {
	case err == nil, apierrors.IsNotFound(err), apierrors.IsConflict(err), apierrors.IsInvalid(err):
		// Written, gone, or replaced (another uid: a conflict or an
		// invalid change of uid, not ours to clear).
		return queue.Done()
	default:
		return s.retry(ctx, "candidateStatusNotCleared", err)
	}
}

// writeCandidate sets (st nil: removes) status.candidate of the policy p,
// a JSON merge patch of the status subresource that leaves the rest of
// the status to its writers; the uid precondition keeps it off a policy
// created again under the name.
func (s *Scanner) writeCandidate(ctx context.Context, ref bus.PolicyRef, st *policy.CandidateStatus) error {
	kind := ref.Kind
	ns, name, namespaced := strings.Cut(ref.Key, "/")
	if !namespaced {
		ns, name = "", ref.Key
	}
	if kind == "" {
		kind = policy.KindClusterPolicy
		if namespaced {
			kind = policy.KindPolicy
		}
	}
	gvr, ok := s.o.candidates.api.Resource(kind)
	if !ok {
		return fmt.Errorf("no resource serves the policy kind %s", kind)
	}
	var cand any
	if st != nil {
		cand = st
	}
	body, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": ref.UID},
		"status":   map[string]any{"candidate": cand},
	})
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = s.dyn.Resource(gvr)
	if ns != "" {
		ri = s.dyn.Resource(gvr).Namespace(ns)
	}
	_, err = ri.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{FieldManager: "verdict-reporter"}, "status")
	return err
}

// candidateEval is one candidate's evaluation in progress.
type candidateEval struct {
	s        *Scanner
	p        *engine.Policy
	tally    *whatif.Tally
	nsLabels map[string]map[string]string
	seen     map[string]struct{}
}

// against is the result key of the installed policy a candidate is
// compared with (policy.AnnotationCandidateFor), or "".
func against(p *engine.Policy) string {
	key := p.Raw.CandidateFor()
	if key == "" {
		return ""
	}
	ref := bus.PolicyRefOf(p)
	ref.Key = key
	return ref.ResultKey()
}

func (ev *candidateEval) labels(ctx context.Context, ns string) (map[string]string, error) {
	if l, ok := ev.nsLabels[ns]; ok {
		return l, nil
	}
	l, err := ev.s.policies.NamespaceLabels(ctx, ns)
	if err != nil {
		return nil, fmt.Errorf("labels of namespace %s: %w", ns, err)
	}
	ev.nsLabels[ns] = l
	return l, nil
}

// requests evaluates the candidate on the recorded requests since: a
// namespaced candidate reads its own namespace's subjects only.
func (ev *candidateEval) requests(ctx context.Context, m *queue.Msg, since time.Time) error {
	ns := ""
	if ev.p.Raw.Namespaced() {
		ns = ev.p.Raw.Metadata.Namespace
	}
	n := 0
	_, err := ev.s.conn.Replay(ctx, bus.StreamDecisions, func(rm queue.ReplayMsg) error {
		d, err := bus.DecodeDecision(rm.Subject, rm.Data)
		if err != nil {
			return nil // not a decision: `verdict decisions` reports it
		}
		if ns != "" && d.Resource.Namespace != ns {
			return nil
		}
		labels, err := ev.labels(ctx, d.Resource.Namespace)
		if err != nil {
			return err
		}
		ev.tally.Decision(ctx, d, labels)
		if n++; n%1000 == 0 {
			_ = m.InProgress()
		}
		return ctx.Err()
	}, queue.WithReplaySince(since), queue.WithReplayFilter(bus.DecisionsFilter(ns, "")))
	return err
}

// object evaluates the candidate's checks on one object, as a scan does.
func (ev *candidateEval) object(ctx context.Context, obj *unstructured.Unstructured) error {
	uid := string(obj.GetUID())
	if _, dup := ev.seen[uid]; dup || uid == "" {
		return nil // served by two groups: evaluated once
	}
	ev.seen[uid] = struct{}{}
	labels, err := ev.labels(ctx, obj.GetNamespace())
	if err != nil {
		return err
	}
	ev.tally.Object(ctx, obj.Object, labels, nil)
	return ctx.Err()
}

// candidateStatus is status.candidate of a report: rule by rule, the
// recorded requests' counts and the objects', with examples.
func candidateStatus(p *engine.Policy, rep whatif.Report, now time.Time) policy.CandidateStatus {
	st := policy.CandidateStatus{
		Evaluated: now.Format(time.RFC3339), ObservedGeneration: p.Raw.Metadata.Generation,
		Requests: rep.Requests, WithoutObject: rep.WithoutObject, Resources: rep.Objects,
	}
	if !rep.Since.IsZero() {
		st.Since = rep.Since.Format(time.RFC3339)
	}
	for _, r := range rep.Rules {
		rule := policy.CandidateRule{Name: r.Rule, Requests: counts(r.Counts), Resources: counts(r.Resources)}
		for _, outcome := range whatif.Outcomes {
			for _, ex := range r.Examples[outcome] {
				rule.Examples = addExample(rule.Examples, example(outcome, sourceRequest, ex))
			}
			for _, ex := range r.ResourceExamples[outcome] {
				rule.Examples = addExample(rule.Examples, example(outcome, sourceResource, ex))
			}
		}
		st.Rules = append(st.Rules, rule)
	}
	for _, c := range rep.Changes {
		ch := &policy.CandidateChange{Policy: c.Policy, NewlyDenied: c.NewlyDenied, NoLongerDenied: c.NoLongerDenied, DeniedUnrecorded: c.DeniedUnrecorded}
		for _, ex := range c.Newly {
			ch.Examples = addExample(ch.Examples, example("newlyDenied", sourceRequest, ex))
		}
		for _, ex := range c.NoLonger {
			ch.Examples = addExample(ch.Examples, example("noLongerDenied", sourceRequest, ex))
		}
		st.Change = ch
	}
	return st
}

func example(outcome, source string, ex whatif.Example) policy.CandidateExample {
	out := policy.CandidateExample{Outcome: outcome, Source: source, Operation: ex.Operation, Kind: ex.Kind,
		Namespace: ex.Namespace, Name: ex.Name, User: ex.User, Message: clip(ex.Message)}
	if !ex.Time.IsZero() {
		out.Time = ex.Time.UTC().Format(time.RFC3339)
	}
	return out
}

// addExample appends ex unless its outcome and source have their
// examples already.
func addExample(list []policy.CandidateExample, ex policy.CandidateExample) []policy.CandidateExample {
	n := 0
	for _, e := range list {
		if e.Outcome == ex.Outcome && e.Source == ex.Source {
			n++
		}
	}
	if n >= candidateExamples {
		return list
	}
	return append(list, ex)
}

// counts are the outcomes of m (by whatif outcome).
func counts(m map[string]int) policy.CandidateCounts {
	return policy.CandidateCounts{Deny: m[whatif.Deny], Warn: m[whatif.Warn], Mutate: m[whatif.Mutate], Generate: m[whatif.Generate],
		Error: m[whatif.Error], Pass: m[whatif.Pass], Skip: m[whatif.Skip]}
}

// clip bounds a message to candidateMessageLen bytes (on a rune boundary).
func clip(s string) string {
	if len(s) <= candidateMessageLen {
		return s
	}
	s = s[:candidateMessageLen]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}
