package engine

import "time"

// Status is the outcome of one rule on one resource.
type Status string

// Rule outcomes, as PolicyReports name them.
const (
	StatusPass  Status = "pass"
	StatusFail  Status = "fail"
	StatusWarn  Status = "warn"
	StatusError Status = "error"
	StatusSkip  Status = "skip"

	// statusNone is a rule that gives no result at all, as Kyverno's
	// handlers return none: pattern and podSecurity rules on a DELETE.
	// The rule is left out of the response.
	statusNone Status = ""
)

// RuleType names the kind of rule.
type RuleType string

// Rule types.
const (
	TypeValidation  RuleType = "Validation"
	TypeMutation    RuleType = "Mutation"
	TypeGeneration  RuleType = "Generation"
	TypeImageVerify RuleType = "ImageVerify"
)

// RuleResponse is the outcome of one rule.
type RuleResponse struct {
	Name    string
	Type    RuleType
	Status  Status
	Message string
	// Generated holds the resources a generate rule would create.
	Generated []map[string]any
	// PodSecurityChecks lists the failed checks of a podSecurity rule.
	PodSecurityChecks []PodSecurityCheck
	// Exception names the PolicyException that exempted the resource.
	Exception string
	// Properties are a CEL policy's audit annotations, by key: the
	// properties of its result in reports.
	Properties map[string]string
	// Enforce is true when a failure of this validate rule denies the
	// request.
	Enforce bool
	// Unsupported is true when the rule uses a feature this engine does
	// not evaluate (validate.cel, assert, manifests); its status is then
	// skip. A verifyImages rule the verifier cannot check is an error
	// marked Unsupported: a check that is not made never admits.
	Unsupported bool
	// Targets is what a mutate-existing rule did to each of its targets
	// (Engine.MutateExisting).
	Targets []TargetResponse
	// Refused is set on an error whose cause is a refusal of what the
	// policy may read or write (policy.ErrRefused: another namespace,
	// Verdict's own Secrets, an apiCall POST that is not a review): no
	// retry changes it.
	Refused bool
	// Background is set on a mutate-existing rule the request triggers
	// when its targets are left to the background (Mutate,
	// MutateExistingTriggers), and on a generate rule the request
	// triggers (GenerateTriggers): the caller queues the work.
	Background bool
	// Duration is how long the rule's evaluation took, measured when the
	// engine has a rule clock (WithRuleClock); zero otherwise.
	Duration time.Duration
}

// TargetResponse is the outcome of a mutate-existing rule on one target.
type TargetResponse struct {
	// Resource is the target as it was found.
	Resource map[string]any
	// Patched is the target as the rule leaves it, when Status is pass.
	Patched map[string]any
	// Subresource is the subresource the patched target is written
	// through ("status", "resize"), when the rule targets one; none
	// writes the resource itself.
	Subresource string
	Status      Status
	Message     string
}

// PodSecurityCheck is one failed Pod Security Standard control.
type PodSecurityCheck struct {
	ID      string `json:"id"`
	Reason  string `json:"reason"`
	Details string `json:"details,omitempty"`
}

// Response is the outcome of one policy on one resource.
type Response struct {
	Policy *Policy
	// Resource is the resource the rules saw.
	Resource map[string]any
	// Patched is the resource after the policy's mutations (equal to
	// Resource when nothing changed).
	Patched map[string]any
	Rules   []RuleResponse
}

// Counts tallies rule outcomes.
type Counts struct {
	Pass, Fail, Warn, Error, Skip int
}

// Add counts one outcome.
func (c *Counts) Add(s Status) {
	switch s {
	case StatusPass:
		c.Pass++
	case StatusFail:
		c.Fail++
	case StatusWarn:
		c.Warn++
	case StatusError:
		c.Error++
	case StatusSkip:
		c.Skip++
	}
}
