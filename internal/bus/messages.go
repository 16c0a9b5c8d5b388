package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// ErrIncomplete is returned for an event that lacks what its subject or
// id is made of.
var ErrIncomplete = errors.New("incomplete event")

// NewResult is the result event of one policy's response on a resource.
func NewResult(res ResourceRef, p *engine.Policy, resp engine.Response, at time.Time) ResultEvent {
	return (*RuleArena)(nil).NewResult(res, p, resp, at)
}

// RuleArena hands out the rule results of many events from shared
// allocations (the webhook makes one event per policy of an admission).
// The zero value is ready; a nil arena allocates each event's own.
type RuleArena struct {
	free []RuleResult
}

// ruleArenaSize is how many rule results an arena allocates at a time.
const ruleArenaSize = 32

func (a *RuleArena) take(n int) []RuleResult {
	if a == nil {
		return make([]RuleResult, n)
	}
	if cap(a.free)-len(a.free) < n {
		a.free = make([]RuleResult, 0, max(n, ruleArenaSize))
	}
	start := len(a.free)
	a.free = a.free[:start+n]
	return a.free[start : start+n : start+n]
}

// NewResult is the package's NewResult with the rule results taken from
// the arena.
func (a *RuleArena) NewResult(res ResourceRef, p *engine.Policy, resp engine.Response, at time.Time) ResultEvent {
	rules := a.take(len(resp.Rules))
	for i, rr := range resp.Rules {
		rules[i] = RuleResult{Name: rr.Name, Type: rr.Type, Status: rr.Status, Message: rr.Message, Exception: rr.Exception, Properties: rr.Properties}
	}
	return ResultEvent{
		Resource:  res,
		Policy:    PolicyRefOf(p),
		Rules:     rules,
		Category:  p.Category,
		Severity:  p.Severity,
		Scored:    p.Scored,
		Timestamp: at,
	}
}

// PolicyRefOf names a compiled policy at its version.
func PolicyRefOf(p *engine.Policy) PolicyRef { return RawPolicyRef(p.Raw) }

// RawPolicyRef is PolicyRefOf for a policy as stored (not compiled).
func RawPolicyRef(p *policy.Policy) PolicyRef {
	ref := PolicyRef{Key: p.Key(), UID: p.Metadata.UID, ResourceVersion: p.Metadata.ResourceVersion}
	if policy.IsCELPolicyKind(p.Kind) || p.Native != nil {
		ref.Kind = p.Kind
	}
	return ref
}

// SameOutcome reports whether two results of the same resource and policy
// say the same thing: the same policy version, rules, category, severity
// and scoring (timestamps, resource versions and request ids aside). A
// background scan does not republish a result that says the same thing.
func SameOutcome(a, b ResultEvent) bool {
	if a.Policy != b.Policy || a.Category != b.Category || a.Severity != b.Severity || a.Scored != b.Scored ||
		a.Retracted != b.Retracted || len(a.Rules) != len(b.Rules) {
		return false
	}
	for i := range a.Rules {
		if !a.Rules[i].Same(b.Rules[i]) {
			return false
		}
	}
	return true
}

// Same reports whether two rule results say the same thing.
func (r RuleResult) Same(o RuleResult) bool {
	return r.Name == o.Name && r.Type == o.Type && r.Status == o.Status && r.Message == o.Message &&
		r.Exception == o.Exception && maps.Equal(r.Properties, o.Properties)
}

// ResultMessage is the queue message of a result event: its subject (the
// resource and policy, so the stream keeps the last per pair) and a
// deterministic id (a retried publish, or two replicas evaluating the same
// admission or scanning the same versions, collapse).
func ResultMessage(ev ResultEvent) (queue.Message, error) {
	if err := resultComplete(ev); err != nil {
		return queue.Message{}, err
	}
	data, err := EncodeResultEvent(ev)
	if err != nil {
		return queue.Message{}, err
	}
	var text [256]byte
	t, split := appendResultKeys(text[:0], ev)
	return queue.Message{Subject: string(t[:split]), ID: string(t[split:]), Data: data}, nil
}

// resultComplete checks that ev has what its subject and id are made of.
func resultComplete(ev ResultEvent) error {
	if ev.Resource.UID == "" || ev.Policy.Key == "" {
		return fmt.Errorf("%w: a result needs a resource uid and a policy key", ErrIncomplete)
	}
	return nil
}

// appendResultKeys appends ev's subject, then its message id, to b, and
// says where the id starts. The id names the policy by its kind and key
// as well as its uid: policies loaded from files (the webhook's files
// mode, the CLI) have no uid and no resourceVersion, and the results of
// one admission would otherwise share one id, every one but the first
// dropped by JetStream as a duplicate.
func appendResultKeys(b []byte, ev ResultEvent) ([]byte, int) {
	key := ev.Policy.ResultKey()
	b = AppendResultSubject(b, ev.Resource.UID, key)
	split := len(b)
	if ev.Retracted != "" {
		return queue.AppendMsgID(b, "result", ev.Resource.UID, ev.Resource.ResourceVersion, key, ev.Policy.UID, ev.Policy.ResourceVersion, ev.RequestUID, "retracted", ev.Retracted), split
	}
	return queue.AppendMsgID(b, "result", ev.Resource.UID, ev.Resource.ResourceVersion, key, ev.Policy.UID, ev.Policy.ResourceVersion, ev.RequestUID), split
}

// ScanAction is what the scanner does with a ScanItem.
type ScanAction string

// Scan actions.
const (
	// ScanPolicy evaluates one policy on every resource it selects,
	// publishes the results that changed and retracts those that no
	// longer hold.
	ScanPolicy ScanAction = "policy"
	// ScanAll fans out one ScanPolicy item per background policy: the
	// periodic scan's tick.
	ScanAll ScanAction = "all"
	// ScanPolicyDeleted retracts every result of a deleted policy.
	ScanPolicyDeleted ScanAction = "policyDeleted"
	// ScanResourceGone is sent when a report disappeared: when its
	// resource is gone too, the resource's results are purged; otherwise
	// its report is written again.
	ScanResourceGone ScanAction = "resourceGone"
	// ScanCandidate evaluates a candidate policy
	// (policy.AnnotationCandidate) on the admission log's recorded
	// requests and the cluster's objects, and writes what it would have
	// done to its status.candidate.
	ScanCandidate ScanAction = "candidate"
	// ScanCandidateGone clears status.candidate of a policy that is no
	// longer a candidate.
	ScanCandidateGone ScanAction = "candidateGone"
)

// ScanItem is one unit of background-scan work (VERDICT_WORK, kind scan).
type ScanItem struct {
	Action ScanAction `json:"action"`
	// Policy is the policy to scan or whose results to retract.
	Policy PolicyRef `json:"policy,omitzero"`
	// Resource is the resource whose report disappeared.
	Resource ResourceRef `json:"resource,omitzero"`
	// Reason says what caused the item (created, changed, started,
	// interval, deleted).
	Reason    string    `json:"reason,omitempty"`
	Timestamp time.Time `json:"timestamp"`
	// Bindings is, for a Kubernetes admission policy, the version of its
	// bindings (policy.NativePolicy.BindingsVersion): a binding changed
	// changes what the policy selects, at the same policy version.
	Bindings string `json:"bindings,omitempty"`
	// Generation is a candidate's metadata.generation (ScanCandidate).
	Generation int64 `json:"generation,omitempty"`
}

// BindingsOf is the version of p's bindings for a ScanItem: empty but
// for a Kubernetes admission policy.
func BindingsOf(p *engine.Policy) string {
	if p.Raw.Native == nil {
		return ""
	}
	return p.Raw.Native.BindingsVersion()
}

// ScanMessage is the queue message of a scan item; id distinguishes
// occurrences (two replicas publishing the same occurrence give the same
// id, so it is done once).
func ScanMessage(item ScanItem, id ...string) (queue.Message, error) {
	var key string
	switch item.Action {
	case ScanPolicy, ScanPolicyDeleted, ScanCandidate, ScanCandidateGone:
		if item.Policy.Key == "" || item.Policy.UID == "" {
			return queue.Message{}, fmt.Errorf("%w: scan item %s needs a policy key and uid", ErrIncomplete, item.Action)
		}
		key = string(item.Action) + "/" + item.Policy.ResultKey()
	case ScanResourceGone:
		if item.Resource.UID == "" {
			return queue.Message{}, fmt.Errorf("%w: scan item %s needs a resource uid", ErrIncomplete, item.Action)
		}
		key = string(item.Action) + "/" + item.Resource.UID
	case ScanAll:
		key = string(item.Action)
	default:
		return queue.Message{}, fmt.Errorf("%w: unknown scan action %q", ErrIncomplete, item.Action)
	}
	subject, err := WorkSubject(WorkScan, key)
	if err != nil {
		return queue.Message{}, err
	}
	data, err := json.Marshal(item)
	if err != nil {
		return queue.Message{}, err
	}
	return queue.Message{Subject: subject, ID: queue.MsgID(append([]string{"scan", key}, id...)...), Data: data}, nil
}

// WorkMessage is the queue message of a work item: its subject (kind and
// the policy, rule and trigger, or the action for an item about the whole
// rule) and a deterministic id (a retried publish, two replicas admitting
// the same request, or every generator replica seeing the same policy
// change or drift, collapse).
func WorkMessage(item WorkItem) (queue.Message, error) {
	data, err := json.Marshal(item)
	if err != nil {
		return queue.Message{}, err
	}
	last := item.Trigger.UID
	if last == "" {
		last = string(item.Act())
	}
	subject, err := WorkSubject(item.Kind, item.Policy.Key+"/"+item.Rule+"/"+last)
	if err != nil {
		return queue.Message{}, err
	}
	parts := []string{"work", string(item.Kind), item.Policy.UID, item.Policy.ResourceVersion, item.Rule, item.Trigger.UID, item.Trigger.ResourceVersion, item.RequestUID}
	if item.Act() != WorkApply || item.Cause != "" {
		// Added only when set, so the ids of admission items stay what
		// they were.
		parts = append(parts, string(item.Act()), item.Cause)
	}
	if d := item.Downstream; d != nil {
		parts = append(parts, d.UID, d.ResourceVersion)
	}
	if item.unverifiedCreate() {
		// One item per created trigger (and rule), whatever the request's
		// uid and the policy's version: the real review of a creation is
		// published before the object is stored, so a review sent later
		// for the same uid (a forged one, with another requester) is a
		// duplicate of the real one within the duplicate window, and
		// after it the generator finds the trigger older than its grace.
		parts = []string{"work", string(item.Kind), item.Policy.UID, item.Rule, item.Trigger.UID, "create"}
	}
	return queue.Message{Subject: subject, ID: queue.MsgID(parts...), Data: data}, nil
}

// unverifiedCreate reports whether item is the apply item of an admitted
// CREATE whose requester the webhook's caller did not prove
// (RequesterVerified false).
func (item WorkItem) unverifiedCreate() bool {
	return item.Act() == WorkApply && (item.Cause == "" || item.Cause == CauseAdmission) &&
		item.Operation == engine.OpCreate && !item.RequesterVerified
}
