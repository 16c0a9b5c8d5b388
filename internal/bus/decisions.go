package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/verdict-dev/verdict/pkg/jsonwrite"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// StreamDecisions is the admission log: one message per admission
// decision a webhook replica answered (docs/decisions.md).
const StreamDecisions = "VERDICT_DECISIONS"

// decisionsPrefix is the subject prefix of VERDICT_DECISIONS:
// verdict.decisions.<namespace>.<outcome>.
const decisionsPrefix = "verdict.decisions."

// ClusterScopeToken is the namespace token of a cluster-scoped resource's
// decisions. '@' never appears in an encoded token, so no namespace's
// subject is it.
const ClusterScopeToken = "@cluster"

// The outcomes of a decision, the subject's last token.
const (
	DecisionAllowed = "allowed"
	DecisionWarned  = "warned"
	DecisionDenied  = "denied"
	DecisionPatched = "patched"
)

// What a finding says the policy did to the request.
const (
	ActionDeny   = "deny"
	ActionWarn   = "warn"
	ActionMutate = "mutate"
)

// Bounds of one decision: what is beyond them is cut, and the decision
// says so (Truncated), so that one hostile or huge request never makes a
// message the stream refuses.
const (
	// MaxDecisionFindings is the most findings a decision keeps.
	MaxDecisionFindings = 64
	// MaxFindingMessage is the most bytes of a finding's message.
	MaxFindingMessage = 1024
	// MaxDecisionPatch is the largest patch a decision keeps whole; a
	// larger one is left out (PatchBytes still gives its size).
	MaxDecisionPatch = 64 << 10
	// MaxDecisionObject is the largest admitted object a decision keeps
	// (when the log records objects); a larger one is left out, and
	// ObjectOmitted says so.
	MaxDecisionObject = 256 << 10
	// MaxDecisionGroups is the most groups of the requester kept.
	MaxDecisionGroups = 64
	// maxDecisionBytes bounds a decision message read back.
	maxDecisionBytes = 1 << 20
)

// ErrInvalidDecision: a message of VERDICT_DECISIONS is not a decision
// its subject describes.
var ErrInvalidDecision = errors.New("invalid decision")

// Decision is one admission decision, as a webhook replica answered it:
// what VERDICT_DECISIONS keeps, by age and size. It records what the
// API server sent and what the webhook answered; it never holds the
// object itself.
type Decision struct {
	// RequestUID is the AdmissionRequest's uid; with Webhook it is the
	// message id (a publish retried, or the same answer given twice,
	// is stored once).
	RequestUID string `json:"requestUid"`
	// Webhook is the endpoint that answered (validate, mutate,
	// validate-namespaced, ...).
	Webhook   string           `json:"webhook"`
	Operation string           `json:"operation"`
	Resource  DecisionResource `json:"resource"`
	User      DecisionUser     `json:"user"`
	DryRun    bool             `json:"dryRun,omitempty"`
	// Outcome is DecisionAllowed, DecisionWarned, DecisionDenied or
	// DecisionPatched.
	Outcome string `json:"outcome"`
	// Message is a denial's message, as the API server returned it.
	Message string `json:"message,omitempty"`
	// Findings are the policies and rules that denied, warned or
	// mutated, with their messages.
	Findings []Finding `json:"findings,omitempty"`
	// Patch is the JSON patch the mutating webhook answered (left out
	// past MaxDecisionPatch); PatchBytes is its size.
	Patch      json.RawMessage `json:"patch,omitempty"`
	PatchBytes int             `json:"patchBytes,omitempty"`
	// Object is the admitted object, redacted, when the webhook records
	// objects of its kind and namespace (off by default; never a
	// Secret): what `verdict whatif` evaluates a candidate policy on.
	// ObjectOmitted says why a selected object is not there (too large).
	Object        json.RawMessage `json:"object,omitempty"`
	ObjectOmitted string          `json:"objectOmitted,omitempty"`
	// Truncated says that findings, messages, groups or the patch were
	// cut to the bounds.
	Truncated bool `json:"truncated,omitempty"`
	// Verified: the caller proved with its client certificate (mutual
	// TLS, the webhook's --client-ca-file) to be the API server. Without
	// it, whoever reached the webhook may have written the request, and
	// the decision records their word.
	Verified bool `json:"verified,omitempty"`
	// Replica is the webhook replica (its pod) that answered.
	Replica string    `json:"replica,omitempty"`
	Time    time.Time `json:"time"`
}

// DecisionResource is what the request was about.
type DecisionResource struct {
	Group       string `json:"group,omitempty"`
	Version     string `json:"version"`
	Kind        string `json:"kind"`
	Resource    string `json:"resource"`
	SubResource string `json:"subResource,omitempty"`
	Namespace   string `json:"namespace,omitempty"`
	Name        string `json:"name,omitempty"`
	// UID is the object's uid when the request gave one.
	UID string `json:"uid,omitempty"`
}

// DecisionUser is who made the request, as the API server said.
type DecisionUser struct {
	Username string   `json:"username"`
	UID      string   `json:"uid,omitempty"`
	Groups   []string `json:"groups,omitempty"`
}

// Finding is what one rule of one policy did to the request.
type Finding struct {
	// Policy is the policy's key (PolicyRef.ResultKey: name, namespace/name,
	// Kind:name for a CEL kind).
	Policy  string `json:"policy"`
	Rule    string `json:"rule,omitempty"`
	Action  string `json:"action"`
	Message string `json:"message,omitempty"`
}

// DecisionSubject is the subject of the decisions of namespace ns ("" for
// cluster-scoped resources) with outcome.
func DecisionSubject(ns, outcome string) string {
	return decisionsPrefix + namespaceToken(ns) + "." + queue.EncodeToken(outcome)
}

// DecisionsFilter is the subject filter of the decisions of namespace ns
// ("" for every namespace and cluster-scoped resources; use
// ClusterScoped for those alone) and outcome ("" for every outcome).
func DecisionsFilter(ns, outcome string) string {
	nsTok, outTok := "*", "*"
	if ns != "" {
		nsTok = namespaceToken(ns)
	}
	if outcome != "" {
		outTok = queue.EncodeToken(outcome)
	}
	return decisionsPrefix + nsTok + "." + outTok
}

// ClusterScoped is the namespace argument of DecisionsFilter for the
// decisions of cluster-scoped resources only.
const ClusterScoped = "\x00cluster"

func namespaceToken(ns string) string {
	if ns == "" || ns == ClusterScoped {
		return ClusterScopeToken
	}
	return queue.EncodeToken(ns)
}

// validOutcome reports whether o is one of the decision outcomes.
func validOutcome(o string) bool {
	switch o {
	case DecisionAllowed, DecisionWarned, DecisionDenied, DecisionPatched:
		return true
	}
	return false
}

// Bound cuts d to the bounds (MaxDecisionFindings, MaxFindingMessage,
// MaxDecisionPatch, MaxDecisionGroups), setting Truncated when it cut
// anything.
func (d *Decision) Bound() {
	if len(d.Findings) > MaxDecisionFindings {
		d.Findings, d.Truncated = d.Findings[:MaxDecisionFindings], true
	}
	for i := range d.Findings {
		if m := d.Findings[i].Message; len(m) > MaxFindingMessage {
			d.Findings[i].Message, d.Truncated = cutUTF8(m, MaxFindingMessage), true
		}
	}
	if len(d.Message) > 8*MaxFindingMessage {
		d.Message, d.Truncated = cutUTF8(d.Message, 8*MaxFindingMessage), true
	}
	if len(d.User.Groups) > MaxDecisionGroups {
		d.User.Groups, d.Truncated = d.User.Groups[:MaxDecisionGroups], true
	}
	if len(d.Patch) > 0 {
		d.PatchBytes = len(d.Patch)
		if len(d.Patch) > MaxDecisionPatch {
			d.Patch, d.Truncated = nil, true
		}
	}
	if len(d.Object) > MaxDecisionObject {
		d.Object, d.ObjectOmitted = nil, ObjectTooLarge
	}
}

// ObjectTooLarge is ObjectOmitted for an object over MaxDecisionObject.
const ObjectTooLarge = "tooLarge"

// cutUTF8 cuts s to at most n bytes, on a rune boundary.
func cutUTF8(s string, n int) string {
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// DecisionMessage is the queue message of d, bounded (Bound). Its id
// names the request, the endpoint and the answer: the same answer
// published twice is stored once; the API server's reinvocation of a
// mutating webhook that answers differently is kept as well.
func DecisionMessage(d Decision) (queue.Message, error) {
	d.Bound()
	if err := d.check(); err != nil {
		return queue.Message{}, err
	}
	data, err := EncodeDecision(d)
	if err != nil {
		return queue.Message{}, fmt.Errorf("%w: %w", ErrInvalidDecision, err)
	}
	// The request, the endpoint and what it answered: the outcome and
	// the patch (a reinvoked mutating webhook may patch again).
	id := queue.MsgID("decision", d.RequestUID, d.Webhook, d.Outcome, string(d.Patch))
	return queue.Message{Subject: DecisionSubject(d.Resource.Namespace, d.Outcome), ID: id, Data: data}, nil
}

// EncodeDecision encodes d as encoding/json does, byte for byte
// (FuzzEncodeDecision), without reflection but for the patch: one is
// encoded per admission.
func EncodeDecision(d Decision) ([]byte, error) {
	_, offset := d.Time.Zone()
	if y := d.Time.Year(); y < 0 || y > 9999 || offset <= -24*3600 || offset >= 24*3600 {
		return json.Marshal(d) // encoding/json's error
	}
	// Room for what is written: the strings, and the keys around them.
	size := 384 + len(d.RequestUID) + len(d.Webhook) + len(d.Resource.Name) + len(d.Resource.Namespace) + len(d.User.Username) + len(d.Message) + 2*len(d.Patch) + 2*len(d.Object)
	for _, g := range d.User.Groups {
		size += len(g) + 3
	}
	for _, f := range d.Findings {
		size += 48 + len(f.Policy) + len(f.Rule) + len(f.Message)
	}
	b := make([]byte, 0, size+size/8)
	b = append(b, `{"requestUid":`...)
	b = jsonwrite.String(b, d.RequestUID)
	b = append(b, `,"webhook":`...)
	b = jsonwrite.String(b, d.Webhook)
	b = append(b, `,"operation":`...)
	b = jsonwrite.String(b, d.Operation)
	r := d.Resource
	b = append(b, `,"resource":{`...)
	b = jsonwrite.OptionalString(b, `"group":`, r.Group)
	if r.Group != "" {
		b = append(b, ',')
	}
	b = append(b, `"version":`...)
	b = jsonwrite.String(b, r.Version)
	b = append(b, `,"kind":`...)
	b = jsonwrite.String(b, r.Kind)
	b = append(b, `,"resource":`...)
	b = jsonwrite.String(b, r.Resource)
	b = jsonwrite.OptionalString(b, `,"subResource":`, r.SubResource)
	b = jsonwrite.OptionalString(b, `,"namespace":`, r.Namespace)
	b = jsonwrite.OptionalString(b, `,"name":`, r.Name)
	b = jsonwrite.OptionalString(b, `,"uid":`, r.UID)
	b = append(b, `},"user":{"username":`...)
	b = jsonwrite.String(b, d.User.Username)
	b = jsonwrite.OptionalString(b, `,"uid":`, d.User.UID)
	if len(d.User.Groups) > 0 {
		b = append(b, `,"groups":[`...)
		for i, g := range d.User.Groups {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonwrite.String(b, g)
		}
		b = append(b, ']')
	}
	b = append(b, '}')
	if d.DryRun {
		b = append(b, `,"dryRun":true`...)
	}
	b = append(b, `,"outcome":`...)
	b = jsonwrite.String(b, d.Outcome)
	b = jsonwrite.OptionalString(b, `,"message":`, d.Message)
	if len(d.Findings) > 0 {
		b = append(b, `,"findings":[`...)
		for i, f := range d.Findings {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"policy":`...)
			b = jsonwrite.String(b, f.Policy)
			b = jsonwrite.OptionalString(b, `,"rule":`, f.Rule)
			b = append(b, `,"action":`...)
			b = jsonwrite.String(b, f.Action)
			b = jsonwrite.OptionalString(b, `,"message":`, f.Message)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(d.Patch) > 0 {
		// encoding/json checks, compacts and HTML-escapes a raw message.
		p, err := json.Marshal(d.Patch)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"patch":`...)
		b = append(b, p...)
	}
	if d.PatchBytes != 0 {
		b = append(b, `,"patchBytes":`...)
		b = strconv.AppendInt(b, int64(d.PatchBytes), 10)
	}
	if len(d.Object) > 0 {
		o, err := json.Marshal(d.Object)
		if err != nil {
			return nil, err
		}
		b = append(b, `,"object":`...)
		b = append(b, o...)
	}
	b = jsonwrite.OptionalString(b, `,"objectOmitted":`, d.ObjectOmitted)
	if d.Truncated {
		b = append(b, `,"truncated":true`...)
	}
	if d.Verified {
		b = append(b, `,"verified":true`...)
	}
	b = jsonwrite.OptionalString(b, `,"replica":`, d.Replica)
	b = append(b, `,"time":"`...)
	b = d.Time.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `"}`...)
	return b, nil
}

// check reports what makes d no decision.
func (d *Decision) check() error {
	var errs []string
	if d.RequestUID == "" {
		errs = append(errs, "no request uid")
	}
	if d.Webhook == "" {
		errs = append(errs, "no webhook")
	}
	if !validOutcome(d.Outcome) {
		errs = append(errs, fmt.Sprintf("outcome %q", d.Outcome))
	}
	if d.Resource.Kind == "" {
		errs = append(errs, "no kind")
	}
	if d.Time.IsZero() {
		errs = append(errs, "no time")
	}
	for i, f := range d.Findings {
		switch f.Action {
		case ActionDeny, ActionWarn, ActionMutate:
		default:
			errs = append(errs, fmt.Sprintf("finding %d: action %q", i, f.Action))
		}
		if f.Policy == "" {
			errs = append(errs, fmt.Sprintf("finding %d: no policy", i))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrInvalidDecision, strings.Join(errs, "; "))
	}
	return nil
}

// DecodeDecision decodes a message of VERDICT_DECISIONS read from
// subject, and checks it: a decision, within the bounds, whose namespace
// and outcome are its subject's. A reader shows a message that fails
// with the error, never as a decision.
func DecodeDecision(subject string, data []byte) (Decision, error) {
	var d Decision
	if len(data) > maxDecisionBytes {
		return d, fmt.Errorf("%w: %d bytes", ErrInvalidDecision, len(data))
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return Decision{}, fmt.Errorf("%w: %w", ErrInvalidDecision, err)
	}
	if err := d.check(); err != nil {
		return Decision{}, err
	}
	if want := DecisionSubject(d.Resource.Namespace, d.Outcome); subject != want {
		return Decision{}, fmt.Errorf("%w: subject %s, the decision's is %s", ErrInvalidDecision, subject, want)
	}
	return d, nil
}
