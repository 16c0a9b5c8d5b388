package policy

// Status is what Verdict reports on a ClusterPolicy or Policy through its
// status subresource, in the shape of Kyverno's PolicyStatus, so that
// `kubectl get cpol` shows ADMISSION, BACKGROUND and READY as it does for
// Kyverno and tools that read Kyverno's status read Verdict's.
type Status struct {
	// Ready mirrors the Ready condition's status (kept for tools that read
	// it; Kyverno deprecated it for the condition).
	Ready bool `json:"ready"`
	// Conditions holds the Ready condition: True once the policy compiled
	// and every webhook it needs is configured; False with the reason
	// otherwise.
	Conditions []StatusCondition `json:"conditions,omitempty"`
	// RuleCount counts the policy's rules by type, autogen rules left out.
	RuleCount RuleCount `json:"rulecount"`
	// Autogen lists the rules autogen added for Pod controllers.
	Autogen AutogenStatus `json:"autogen"`
	// Candidate is what the policy would have done, while it is a
	// candidate (AnnotationCandidate); only the reporter writes it.
	Candidate *CandidateStatus `json:"candidate,omitempty"`
}

// StatusCondition is one condition of a policy's status, in the shape of the
// Kubernetes metav1.Condition.
type StatusCondition struct {
	// Type of the condition: Ready.
	Type string `json:"type"`
	// Status of the condition: True, False or Unknown.
	Status string `json:"status"`
	// ObservedGeneration is the policy's metadata.generation the
	// condition was computed for.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// LastTransitionTime is when the status last changed (RFC 3339).
	LastTransitionTime string `json:"lastTransitionTime"`
	// Reason is a CamelCase word for the status: Succeeded, or why not.
	Reason string `json:"reason"`
	// Message says in words what the reason means.
	Message string `json:"message"`
}

// RuleCount counts a policy's rules by type.
type RuleCount struct {
	Validate     int `json:"validate"`
	Generate     int `json:"generate"`
	Mutate       int `json:"mutate"`
	VerifyImages int `json:"verifyimages"`
}

// AutogenStatus holds the rules autogen generated.
type AutogenStatus struct {
	// Rules are the autogen rules, as the engine evaluates them.
	Rules []Rule `json:"rules,omitempty"`
}

// ValidatingPolicyStatus is the status of a ValidatingPolicy: whether a
// ValidatingAdmissionPolicy enforces it in the API server (Kyverno's
// status.generated), and the condition saying why or why not.
type ValidatingPolicyStatus struct {
	// Generated is true while a ValidatingAdmissionPolicy Verdict
	// generated enforces the policy's current version.
	Generated bool `json:"generated"`
	// Conditions holds the ValidatingAdmissionPolicyGenerated condition
	// of a policy that asks for one (autogen.validatingAdmissionPolicy).
	Conditions []StatusCondition `json:"conditions,omitempty"`
	// Candidate is what the policy would have done, while it is a
	// candidate (AnnotationCandidate); only the reporter writes it.
	Candidate *CandidateStatus `json:"candidate,omitempty"`
}
