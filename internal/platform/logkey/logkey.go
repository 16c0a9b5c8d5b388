// Package logkey is the vocabulary of Verdict's structured logs: the name
// of every field a service writes, lowerCamelCase, declared once, so that
// one concept has one name whichever service logs it and an operator's
// query (policy="ns/name", resourceUid=...) finds every line about it.
//
// The names are part of the operator-visible log format: add a constant
// here rather than a string at a call site, and do not rename one without
// saying so in the release notes. pkg/queue keeps its own (unexported)
// keys, since pkg/ imports nothing from internal/; where the concept is
// the same, the strings are the same (subject, streamSeq, delivery,
// reason, delay, attempt, component, pending).
package logkey

// Where a line comes from.
const (
	// Component names the part of a service that logs (a sub-logger's
	// field): reportIndex, servingCerts, klog, ...
	Component = "component"
	// Logger is the name of a client-go (klog) logger.
	Logger = "logger"
)

// What a line is about: policies, rules, resources.
const (
	// Policy is a policy's key: namespace/name, or name for a cluster
	// policy.
	Policy = "policy"
	// Exception is a PolicyException's namespace/name.
	Exception = "exception"
	// Rule is a rule's name; Rules a list of them.
	Rule  = "rule"
	Rules = "rules"
	// Kind is a resource's or a policy's kind (with its group/version
	// where the line has it).
	Kind = "kind"
	// Resource is a resource (API resource name, group/version/resource,
	// or namespace/name of an object, as the line says).
	Resource = "resource"
	// ResourceUID is a resource's metadata.uid.
	ResourceUID = "resourceUid"
	// Name and Namespace are an object's metadata.name and namespace.
	Name      = "name"
	Namespace = "namespace"
	// Secret is a Secret's namespace/name.
	Secret = "secret"
	// File is a path on disk.
	File = "file"
	// Event is a watch event's type (ADDED, MODIFIED, DELETED).
	Event = "event"
)

// Admission requests (the webhook's access log).
const (
	// AdmissionUID is an AdmissionReview request's uid.
	AdmissionUID = "admissionUid"
	Operation    = "operation"
	Subresource  = "subresource"
	DryRun       = "dryRun"
	// DeniedBy lists the policies that blocked a request, on its
	// "request served" line.
	DeniedBy = "deniedBy"
	// Endpoint is the path a request came to.
	Endpoint = "endpoint"
	// Code is an HTTP status code.
	Code = "code"
	// Duration is how long a request took to answer.
	Duration = "duration"
	// Messages are the messages of failed rules.
	Messages = "messages"
	// Panic and Stack describe a recovered panic.
	Panic = "panic"
	Stack = "stack"
)

// Messages on the bus and their handling.
const (
	// Subject is a NATS subject.
	Subject = "subject"
	// StreamSeq is a JetStream stream sequence.
	StreamSeq = "streamSeq"
	// Delivery is the delivery count of a message.
	Delivery = "delivery"
	// Outcome is how a piece of work or a request ended (the closed set of
	// its component: ack, retry, term...; allowed, denied...).
	Outcome = "outcome"
	// Reason says why (a dead letter's, a scan's, a denial's reason).
	Reason = "reason"
	// Detail is the free-text detail that goes with Reason.
	Detail = "detail"
	// Delay is the wait before the next attempt.
	Delay = "delay"
	// Attempt counts attempts at something that is retried.
	Attempt = "attempt"
	// Change is what a reconcile did to a schedule or an object
	// (created, updated, deleted, unchanged).
	Change = "change"
	// Schedule is a cron schedule; TimeZone its time zone; Schedules a
	// count of them.
	Schedule  = "schedule"
	TimeZone  = "timeZone"
	Schedules = "schedules"
	// Status is the verdict of a check of a message against the API.
	Status = "status"
)

// Counts and times of a piece of work (a rebuild, a scan, a snapshot).
const (
	Count       = "count"
	Resources   = "resources"
	Results     = "results"
	Failed      = "failed"
	Pruned      = "pruned"
	Retracted   = "retracted"
	Examined    = "examined"
	Published   = "published"
	Unchanged   = "unchanged"
	Unverified  = "unverified"
	Unreadable  = "unreadable"
	Undecodable = "undecodable"
	Partial     = "partial"
	Applied     = "applied"
	Rejected    = "rejected"
	Pending     = "pending"
	Bytes       = "bytes"
	// Elapsed is how long a piece of work took (Duration is a request's).
	Elapsed = "elapsed"
	// Waited is how long something has been waited for so far.
	Waited = "waited"
	// Read is how long reading took.
	Read = "read"
	// Written is when something was written.
	Written = "written"
	// Snapshot names a snapshot in the object store; Resume is the stream
	// sequence a reader resumes from.
	Snapshot = "snapshot"
	Resume   = "resume"
)

// Processes, leaders and certificates.
const (
	// Address is a listening address; Port a listening port.
	Address = "address"
	Port    = "port"
	// Scan says whether background scans are on.
	Scan = "scan"
	// Lease, Identity and Leader: a leader election's Lease, this
	// candidate, the current holder.
	Lease    = "lease"
	Identity = "identity"
	Leader   = "leader"
	// Replica is a webhook replica (pod) name.
	Replica = "replica"
	// MutatingChanged and ValidatingChanged say whether a registrar
	// reconcile changed the webhook configurations.
	MutatingChanged   = "mutatingChanged"
	ValidatingChanged = "validatingChanged"
	// Step is what a certificate reconcile did.
	Step = "step"
	// NotAfter is when a certificate expires.
	NotAfter = "notAfter"
)
