// Package bus is the contract of Verdict's services on JetStream: the
// streams, their subjects and consumers, and the messages that travel on
// them, rule results (VERDICT_RESULTS, the state PolicyReports are folded
// from) and units of work (VERDICT_WORK). Messages are encoded as JSON;
// fields are only ever added. pkg/queue carries them and knows none of
// these names: Topology and Provision hand them to it.
//
// Provision creates or updates, idempotently and from every replica at
// once, the streams of DESIGN.md, with file storage, a duplicate window
// (WithDuplicateWindow, default 2m) and a replica count (WithReplicas: 1
// embedded, 3 in a cluster):
//
//	VERDICT_RESULTS    verdict.results.<uid>.<policy-key>  limits, a history of 4 per subject, 4 GiB, discard new
//	                   verdict.results.<uid>.@batch        an admission's results, every policy in one message (ResultBatchSubject)
//	                   verdict.verified.<uid>.@batch       the reporter's copy of a resource's verified results (VerifiedBatchMessage)
//	                   verdict.verified.<uid>.<policy-key> its copies of one result each, before issue 33 (VerifiedCopySubject)
//	VERDICT_SCHEDULES  verdict.schedule.<kind>.<key>, verdict.tick.<kind>.<key>  limits, 1 per subject, message schedules on
//	VERDICT_WORK       verdict.work.<kind>.<key>           work queue, 1,000,000 messages, 1 GiB, discard new; sources the ticks
//	VERDICT_DEAD       verdict.dead.>                      limits, MaxAge 14 days
//
// and the durable pull consumers of DefaultConsumers: generator (generate
// and mutate work), cleaner, scanner, reporter. Each service provisions the
// streams and the consumers it reads (WithConsumers), with the same limits
// (StreamLimits, bound to the same flags in every service), or each start
// undoes the other's.
//
// VERDICT_RESULTS keeps the last few messages of each subject
// (WithResultHistory, default 4), not only the last: a publish retried
// after backoff or a slow replica can store an older evaluation after a
// newer one, and the readers (the reporter's fold, scanner and replay)
// pick the newest by the order of the evaluations, not by arrival. Four
// lets three older evaluations of one policy on one resource arrive after
// the newest before it is pushed out, several times what a retried publish
// or a second webhook replica produces.
//
// Limits: VERDICT_RESULTS is bounded by WithResultsMaxBytes (default
// 4 GiB; with one replica a subject at its history limit still takes a
// message no larger than the one it replaces, a replicated stream refuses
// every message once full: reports stop changing, alert on
// verdict_queue_publish_dropped_total{reason="streamFull"}); VERDICT_WORK
// by WithWorkMaxMsgs (default 1,000,000) and WithWorkMaxBytes (default
// 1 GiB): a full queue refuses new work (the webhook decides what that
// means for the request, invariant 2) rather than dropping old work.
package bus

import (
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// ResourceRef names one Kubernetes object at one version.
type ResourceRef struct {
	APIVersion      string `json:"apiVersion"`
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name"`
	UID             string `json:"uid,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// PolicyRef names one policy at one version.
type PolicyRef struct {
	// Key is "name" for a ClusterPolicy, "namespace/name" for a Policy.
	Key string `json:"key"`
	// Kind is set for the CEL kinds (GeneratingPolicy, ...) and the
	// Kubernetes admission policies (ValidatingAdmissionPolicy, ...),
	// which may share a name with a ClusterPolicy; empty is ClusterPolicy
	// or Policy, as Key says.
	Kind            string `json:"kind,omitempty"`
	UID             string `json:"uid,omitempty"`
	ResourceVersion string `json:"resourceVersion,omitempty"`
}

// ResultKey is what the policy's results are kept under (their subject,
// the report's fold): Key for a ClusterPolicy or Policy, Kind:Key for a
// CEL kind, so that a ValidatingPolicy sharing a ClusterPolicy's name
// keeps its own results.
func (r PolicyRef) ResultKey() string {
	if r.Kind == "" {
		return r.Key
	}
	return r.Kind + ":" + r.Key
}

// RuleResult is the outcome of one rule.
type RuleResult struct {
	Name    string          `json:"name"`
	Type    engine.RuleType `json:"type"`
	Status  engine.Status   `json:"status"`
	Message string          `json:"message,omitempty"`
	// Exception names the PolicyException that exempted the resource.
	Exception string `json:"exception,omitempty"`
	// Properties are a CEL policy's audit annotations, by key: reports
	// show them among the result's properties.
	Properties map[string]string `json:"properties,omitempty"`
}

// ResultEvent is the evaluation of one policy on one resource: what
// VERDICT_RESULTS keeps, a short history per resource × policy, of which
// readers keep the newest by CompareResults (policy version, resource
// version, time), not the last to arrive.
type ResultEvent struct {
	Resource ResourceRef  `json:"resource"`
	Policy   PolicyRef    `json:"policy"`
	Rules    []RuleResult `json:"rules"`
	// Category, Severity and Scored come from the policy's annotations,
	// for PolicyReport results.
	Category string `json:"category,omitempty"`
	Severity string `json:"severity,omitempty"`
	Scored   bool   `json:"scored"`
	// Timestamp is when the admission request was evaluated.
	Timestamp time.Time `json:"timestamp"`
	// Admission is true for results of an admission request, false for
	// background scans.
	Admission bool `json:"admission"`
	// RequestUID is the AdmissionRequest's uid.
	RequestUID string `json:"requestUid,omitempty"`
	// Retracted, on a result without rules, says why an earlier result of
	// the policy on the resource no longer holds (RetractedNotSelected,
	// RetractedPolicyDeleted). The retraction supersedes the earlier
	// result (it is newer by CompareResults); reports leave the policy out.
	Retracted string `json:"retracted,omitempty"`
}

// Reasons of a retraction.
const (
	// RetractedNotSelected: the policy no longer selects the resource.
	RetractedNotSelected = "notSelected"
	// RetractedPolicyDeleted: the policy was deleted (or replaced by one
	// of the same name).
	RetractedPolicyDeleted = "policyDeleted"
	// RetractedReportDeleted: the report was deleted through the API (the
	// reporter's serving mode): the policy's result stays out of it until
	// a newer evaluation.
	RetractedReportDeleted = "reportDeleted"
)

// WorkAction is what a generate or mutate work item asks for.
type WorkAction string

// Work actions. An item without an action is WorkApply.
const (
	// WorkApply: evaluate the rule on the trigger and write what it
	// generates (generate) or patch its targets (mutate).
	WorkApply WorkAction = "apply"
	// WorkDeleteDownstream: the trigger was deleted; remove what a
	// synchronized generate rule made for it.
	WorkDeleteDownstream WorkAction = "deleteDownstream"
	// WorkPolicyChanged: the rule's policy was created or changed; fan
	// out to its triggers (a synchronized rule's downstream brought up to
	// date, generateExisting, mutateExistingOnPolicyUpdate).
	WorkPolicyChanged WorkAction = "policyChanged"
	// WorkPolicyDeleted: the rule's policy was deleted; remove what the
	// synchronized rule made (unless orphanDownstreamOnPolicyDelete).
	WorkPolicyDeleted WorkAction = "policyDeleted"
)

// Causes of a work item: who made it.
const (
	// CauseAdmission: an admission request (the default).
	CauseAdmission = "admission"
	// CauseDrift: a generated resource was changed or deleted.
	CauseDrift = "drift"
	// CausePolicy: a policy change fanned out to the rule's triggers.
	CausePolicy = "policy"
)

// WorkItem is one unit of work for the worker services: a generate or
// mutate-existing rule and what to do with it (Action), for a trigger or
// for the whole rule.
type WorkItem struct {
	Kind   queue.WorkKind `json:"kind"`
	Policy PolicyRef      `json:"policy"`
	Rule   string         `json:"rule"`
	// Action is what to do (empty: WorkApply).
	Action WorkAction `json:"action,omitempty"`
	// Cause is who made the item (empty: CauseAdmission).
	Cause string `json:"cause,omitempty"`
	// Downstream, for a drift item, is the generated resource that
	// changed (its resourceVersion, or none when it was deleted).
	Downstream *ResourceRef `json:"downstream,omitempty"`
	// Trigger is the resource whose admission triggered the rule.
	Trigger   ResourceRef `json:"trigger"`
	Operation string      `json:"operation"`
	// UserInfo is who made the request, for rules that use
	// request.userInfo.
	UserInfo engine.UserInfo `json:"userInfo"`
	// RequesterVerified: the webhook's caller proved with its client
	// certificate to be the API server (mutual TLS), so UserInfo is the
	// API server's word. Without it, anyone who reaches the webhook may
	// have written UserInfo: the generator acts on it only where the API
	// vouches for the request (internal/generator requester.go).
	RequesterVerified bool `json:"requesterVerified,omitempty"`
	// Targets are the resources the rule would write, as computed at
	// admission (the generator recomputes them); for WorkPolicyDeleted,
	// the kinds (apiVersion and kind) of what the rule generated.
	Targets    []ResourceRef `json:"targets,omitempty"`
	RequestUID string        `json:"requestUid,omitempty"`
	Timestamp  time.Time     `json:"timestamp"`
}

// Act is the item's action (WorkApply when none is given).
func (w WorkItem) Act() WorkAction {
	if w.Action == "" {
		return WorkApply
	}
	return w.Action
}
