package policy

import (
	"fmt"
	"strings"
)

// The mutating CEL policy kinds of policies.kyverno.io.
const (
	KindMutatingPolicy           = "MutatingPolicy"
	KindNamespacedMutatingPolicy = "NamespacedMutatingPolicy"
)

// Patch types of a MutatingPolicy's mutations.
const (
	PatchTypeApplyConfiguration = "ApplyConfiguration"
	PatchTypeJSONPatch          = "JSONPatch"
)

// MutatingPolicySpec is the spec of a MutatingPolicy: CEL mutations of
// the requests matchConstraints select, as a MutatingAdmissionPolicy
// with its binding, and of existing resources (mutateExisting).
type MutatingPolicySpec struct {
	MatchConstraints *MatchConstraints `json:"matchConstraints,omitempty"`
	MatchConditions  []MatchCondition  `json:"matchConditions,omitempty"`
	Variables        []NamedExpression `json:"variables,omitempty"`
	// Mutations are applied in order, each to the result of the one
	// before.
	Mutations []CELMutation `json:"mutations,omitempty"`
	// FailurePolicy is Fail (the default) or Ignore.
	FailurePolicy    string                `json:"failurePolicy,omitempty"`
	AuditAnnotations []AuditAnnotation     `json:"auditAnnotations,omitempty"`
	Autogen          *AutogenConfiguration `json:"autogen,omitempty"`
	Evaluation       *MutatingEvaluation   `json:"evaluation,omitempty"`
	// ReinvocationPolicy is Never (the default) or IfNeeded.
	ReinvocationPolicy string `json:"reinvocationPolicy,omitempty"`
	// TargetMatchConstraints and TargetMatchConditions select the
	// existing resources a mutateExisting policy mutates.
	TargetMatchConstraints *TargetMatchConstraints `json:"targetMatchConstraints,omitempty"`
	TargetMatchConditions  []MatchCondition        `json:"targetMatchConditions,omitempty"`
	WebhookConfiguration   map[string]any          `json:"webhookConfiguration,omitempty"`
}

// CELMutation is one patch of a MutatingPolicy.
type CELMutation struct {
	// PatchType is ApplyConfiguration or JSONPatch.
	PatchType          string         `json:"patchType"`
	ApplyConfiguration *CELExpression `json:"applyConfiguration,omitempty"`
	JSONPatch          *CELExpression `json:"jsonPatch,omitempty"`
}

// MutatingEvaluation says where a MutatingPolicy applies.
type MutatingEvaluation struct {
	Mode           string  `json:"mode,omitempty"`
	Admission      *Toggle `json:"admission,omitempty"`
	Background     *Toggle `json:"background,omitempty"`
	MutateExisting *Toggle `json:"mutateExisting,omitempty"`
	// UseServerSideApply merges apply configurations as server-side
	// apply does, replacing atomic lists and maps (which a
	// MutatingAdmissionPolicy refuses to set).
	UseServerSideApply     bool  `json:"useServerSideApply,omitempty"`
	SkipBackgroundRequests *bool `json:"skipBackgroundRequests,omitempty"`
}

// TargetMatchConstraints is matchConstraints with an expression giving
// the targets.
type TargetMatchConstraints struct {
	MatchConstraints `json:",inline"`
	Expression       string `json:"expression,omitempty"`
}

// MutateExisting reports whether the policy mutates existing resources
// (evaluation.mutateExisting.enabled, off by default).
func (s *MutatingPolicySpec) MutateExisting() bool {
	e := s.Evaluation
	return e != nil && e.MutateExisting != nil && e.MutateExisting.Enabled != nil && *e.MutateExisting.Enabled
}

// MutatingPolicyFromObject converts an untyped MutatingPolicy or
// NamespacedMutatingPolicy into a Policy whose MPol holds its spec; its
// Spec carries admission, background and the failure policy.
func MutatingPolicyFromObject(obj map[string]any) (*Policy, error) {
	var doc struct {
		APIVersion string             `json:"apiVersion"`
		Kind       string             `json:"kind"`
		Metadata   ObjectMeta         `json:"metadata"`
		Spec       MutatingPolicySpec `json:"spec"`
	}
	if err := fromUntyped(obj, &doc); err != nil {
		return nil, err
	}
	p := &Policy{APIVersion: doc.APIVersion, Kind: doc.Kind, Metadata: doc.Metadata, MPol: &doc.Spec}
	if errs := validateMPol(p); len(errs) > 0 {
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Metadata.Name, errs.ToAggregate())
	}
	s := &doc.Spec
	var admission, background *Toggle
	if e := s.Evaluation; e != nil {
		admission, background = e.Admission, e.Background
	}
	p.setCELSpec(admission, background, s.FailurePolicy, s.WebhookConfiguration)
	return p, nil
}

// validateMPol finds what makes a MutatingPolicy unusable. CEL
// expressions are compiled (and their errors reported) by the engine.
func validateMPol(p *Policy) FieldErrors {
	var errs FieldErrors
	if p.Metadata.Name == "" {
		errs.add("metadata.name", "a policy needs a name")
	}
	if p.Kind == KindNamespacedMutatingPolicy && p.Metadata.Namespace == "" {
		errs.add("metadata.namespace", "a %s needs a namespace", p.Kind)
	}
	s := p.MPol
	if s.MatchConstraints == nil || len(s.MatchConstraints.ResourceRules) == 0 {
		errs.add("spec.matchConstraints.resourceRules", "at least one resource rule is required")
	}
	if len(s.Mutations) == 0 {
		errs.add("spec.mutations", "at least one mutation is required")
	}
	for i, m := range s.Mutations {
		path := fmt.Sprintf("spec.mutations[%d]", i)
		switch m.PatchType {
		case PatchTypeApplyConfiguration:
			if m.ApplyConfiguration == nil || strings.TrimSpace(m.ApplyConfiguration.Expression) == "" {
				errs.add(path+".applyConfiguration.expression", "an ApplyConfiguration mutation needs an expression")
			}
		case PatchTypeJSONPatch:
			if m.JSONPatch == nil || strings.TrimSpace(m.JSONPatch.Expression) == "" {
				errs.add(path+".jsonPatch.expression", "a JSONPatch mutation needs an expression")
			}
		default:
			errs.add(path+".patchType", "%q is not ApplyConfiguration or JSONPatch", m.PatchType)
		}
	}
	switch s.FailurePolicy {
	case "", "Fail", "Ignore":
	default:
		errs.add("spec.failurePolicy", "%q is not Fail or Ignore", s.FailurePolicy)
	}
	switch s.ReinvocationPolicy {
	case "", "Never", "IfNeeded":
	default:
		errs.add("spec.reinvocationPolicy", "%q is not Never or IfNeeded", s.ReinvocationPolicy)
	}
	if e := s.Evaluation; e != nil && e.Mode != "" && !strings.EqualFold(e.Mode, "Kubernetes") {
		errs.add("spec.evaluation.mode", "mode %s is not supported for a MutatingPolicy (Kubernetes is)", e.Mode)
	}
	return errs
}
