package policy

// AnnotationCandidate marks a policy as a candidate when its value is
// "true": it never takes part in admission (no webhook evaluates it, none
// is configured for it, nothing it generates is created) and the reporter
// evaluates it in the background on the admission log's recorded requests
// and on the cluster's current objects, writing what it would have done
// to its status.candidate.
const AnnotationCandidate = "verdict.dev/candidate"

// AnnotationCandidateFor names the installed policy of the same kind (and
// namespace) a candidate would replace: its status.candidate.change
// compares the two on the recorded requests.
const AnnotationCandidateFor = "verdict.dev/candidate-for"

// IsCandidate reports whether annotations mark a policy as a candidate.
func IsCandidate(annotations map[string]string) bool {
	return annotations[AnnotationCandidate] == "true"
}

// Candidate reports whether p is a candidate (AnnotationCandidate).
func (p *Policy) Candidate() bool { return IsCandidate(p.Metadata.Annotations) }

// CandidateFor is the key of the installed policy p would replace
// (AnnotationCandidateFor, in p's namespace for a namespaced kind), or "".
func (p *Policy) CandidateFor() string {
	name := p.Metadata.Annotations[AnnotationCandidateFor]
	if name == "" {
		return ""
	}
	if p.Namespaced() {
		return p.Metadata.Namespace + "/" + name
	}
	return name
}

// CandidateStatus is what the reporter found a candidate policy would
// have done: to the admission requests the log recorded with their
// objects in the window, and to the objects in the cluster now. Only the
// reporter writes it.
type CandidateStatus struct {
	// Evaluated is when the reporter evaluated it (RFC 3339).
	Evaluated string `json:"evaluated"`
	// ObservedGeneration is the policy's metadata.generation evaluated.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Since is the start of the window of recorded requests (RFC 3339).
	Since string `json:"since,omitempty"`
	// Requests counts the recorded requests evaluated (those with their
	// object); WithoutObject the decisions of the window that carry none.
	Requests      int `json:"requests"`
	WithoutObject int `json:"withoutObject,omitempty"`
	// Resources counts the cluster's objects evaluated.
	Resources int `json:"resources"`
	// Rules is what each rule would have done.
	Rules []CandidateRule `json:"rules,omitempty"`
	// Change compares the candidate with the policy it would replace
	// (AnnotationCandidateFor) on the recorded requests.
	Change *CandidateChange `json:"change,omitempty"`
	// Message says what could not be evaluated (the log not readable, a
	// kind the reporter may not list), or is empty.
	Message string `json:"message,omitempty"`
}

// CandidateRule is what one rule would have done to the recorded requests
// and to the current objects (an object it would deny is one whose next
// update it would deny), with examples.
type CandidateRule struct {
	Name      string             `json:"name"`
	Requests  CandidateCounts    `json:"requests"`
	Resources CandidateCounts    `json:"resources"`
	Examples  []CandidateExample `json:"examples,omitempty"`
}

// CandidateCounts counts outcomes: denied (a failed Enforce rule, or an
// error under failurePolicy Fail), warned (a failed Audit rule),
// mutated, generated, errors, passed and skipped.
type CandidateCounts struct {
	Deny     int `json:"deny,omitempty"`
	Warn     int `json:"warn,omitempty"`
	Mutate   int `json:"mutate,omitempty"`
	Generate int `json:"generate,omitempty"`
	Error    int `json:"error,omitempty"`
	Pass     int `json:"pass,omitempty"`
	Skip     int `json:"skip,omitempty"`
}

// CandidateExample is one request or object and what a rule would have
// done to it.
type CandidateExample struct {
	// Outcome is deny, warn, mutate, generate or error; for a change,
	// newlyDenied or noLongerDenied.
	Outcome string `json:"outcome"`
	// Source is request (the admission log) or resource (the cluster).
	Source    string `json:"source"`
	Time      string `json:"time,omitempty"`
	Operation string `json:"operation,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	User      string `json:"user,omitempty"`
	Message   string `json:"message,omitempty"`
}

// CandidateChange compares a candidate with the installed policy it would
// replace on the recorded requests, by the log's findings.
type CandidateChange struct {
	// Policy is the installed policy's key.
	Policy         string `json:"policy"`
	NewlyDenied    int    `json:"newlyDenied"`
	NoLongerDenied int    `json:"noLongerDenied"`
	// DeniedUnrecorded are the installed policy's denials whose object
	// the log does not hold.
	DeniedUnrecorded int                `json:"deniedUnrecorded,omitempty"`
	Examples         []CandidateExample `json:"examples,omitempty"`
}

// CandidateOnlyStatus is the status of the policy kinds Verdict writes
// nothing else to: a candidate's.
type CandidateOnlyStatus struct {
	Candidate *CandidateStatus `json:"candidate,omitempty"`
}
