package policy

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// The generating CEL policy kinds of policies.kyverno.io.
const (
	KindGeneratingPolicy           = "GeneratingPolicy"
	KindNamespacedGeneratingPolicy = "NamespacedGeneratingPolicy"
)

// Interpolation modes of a generation template.
const (
	InterpolateNone = "none"
	InterpolateCEL  = "cel"
)

// GeneratingPolicySpec is the spec of a GeneratingPolicy: resources
// created (through generator.Apply, or from templates) for the requests
// matchConstraints select.
type GeneratingPolicySpec struct {
	MatchConstraints *MatchConstraints `json:"matchConstraints,omitempty"`
	MatchConditions  []MatchCondition  `json:"matchConditions,omitempty"`
	Variables        []NamedExpression `json:"variables,omitempty"`
	// Generation lists the generate entries, evaluated in order.
	Generation       []CELGeneration       `json:"generate,omitempty"`
	AuditAnnotations []AuditAnnotation     `json:"auditAnnotations,omitempty"`
	Evaluation       *GeneratingEvaluation `json:"evaluation,omitempty"`
	// UseServerSideApply makes the generator write with server-side
	// apply.
	UseServerSideApply   bool           `json:"useServerSideApply,omitempty"`
	WebhookConfiguration map[string]any `json:"webhookConfiguration,omitempty"`
}

// CELGeneration is one generate entry: an expression calling
// generator.Apply, or a template of the resources.
type CELGeneration struct {
	Expression string              `json:"expression,omitempty"`
	Template   *GenerationTemplate `json:"template,omitempty"`
}

// GenerationTemplate is YAML (one document per resource); with
// interpolate cel, its (( expression )) placeholders are CEL.
type GenerationTemplate struct {
	Interpolate string `json:"interpolate,omitempty"`
	Value       string `json:"value"`
}

// GeneratingEvaluation says where a GeneratingPolicy applies and how its
// downstream resources are kept.
type GeneratingEvaluation struct {
	Admission                      *Toggle `json:"admission,omitempty"`
	GenerateExisting               *Toggle `json:"generateExisting,omitempty"`
	Synchronize                    *Toggle `json:"synchronize,omitempty"`
	OrphanDownstreamOnPolicyDelete *Toggle `json:"orphanDownstreamOnPolicyDelete,omitempty"`
	SkipBackgroundRequests         *bool   `json:"skipBackgroundRequests,omitempty"`
}

// enabled is a toggle that is off by default.
func (t *Toggle) enabled() bool { return t != nil && t.Enabled != nil && *t.Enabled }

// Synchronize reports whether downstream resources are kept in sync
// (evaluation.synchronize.enabled, off by default).
func (s *GeneratingPolicySpec) Synchronize() bool {
	return s.Evaluation != nil && s.Evaluation.Synchronize.enabled()
}

// GeneratingPolicyStatus is what the generator records on a
// GeneratingPolicy through its status subresource.
type GeneratingPolicyStatus struct {
	// DownstreamKinds lists every kind the policy has generated while
	// synchronized, each recorded before its first object is written:
	// what a CEL generate entry makes is known only once it is evaluated,
	// and these are the kinds the generator watches for drift and looks
	// through when a trigger or the policy goes. Only the generator
	// writes it.
	DownstreamKinds []KindRef `json:"downstreamKinds,omitempty"`
	// Candidate is what the policy would have done, while it is a
	// candidate (AnnotationCandidate); only the reporter writes it.
	Candidate *CandidateStatus `json:"candidate,omitempty"`
}

// AnnotationDownstreamKinds holds what GeneratingPolicyStatus's
// DownstreamKinds holds (a JSON list of {apiVersion, kind}) where the
// status cannot: a CRD that does not know the field (Kyverno's own,
// which Verdict reads in adopt mode) prunes it from the status. The
// generator writes it only then; a GeneratingPolicy's kinds are those of
// both, and an annotation that does not parse adds none.
const AnnotationDownstreamKinds = "generate.verdict.dev/downstream-kinds"

// recordedKinds are the kinds of the status and of
// AnnotationDownstreamKinds, once each.
func recordedKinds(st *GeneratingPolicyStatus, annotations map[string]string) []KindRef {
	var out []KindRef
	if st != nil {
		out = append(out, st.DownstreamKinds...)
	}
	raw, ok := annotations[AnnotationDownstreamKinds]
	if !ok {
		return out
	}
	var more []KindRef
	if err := json.Unmarshal([]byte(raw), &more); err != nil {
		return out
	}
	for _, k := range more {
		if k.APIVersion != "" && k.Kind != "" && !slices.Contains(out, k) {
			out = append(out, k)
		}
	}
	return out
}

// RecordedKinds are the kinds the generator recorded for a
// GeneratingPolicy: its status's and its AnnotationDownstreamKinds'.
func (p *Policy) RecordedKinds() []KindRef {
	return recordedKinds(p.GPolStatus, p.Metadata.Annotations)
}

// Generation is the generate rule a GeneratingPolicy acts as in the
// background: synchronize, generateExisting and
// orphanDownstreamOnPolicyDelete from its evaluation, and the kinds its
// status records (Generation.Recorded).
func (p *Policy) gpolGeneration() *Generation {
	s := p.GPol
	g := &Generation{Synchronize: s.Synchronize(), FromCEL: true}
	if ev := s.Evaluation; ev != nil {
		g.OrphanDownstreamOnPolicyDelete = ev.OrphanDownstreamOnPolicyDelete.enabled()
		if t := ev.GenerateExisting; t != nil && t.Enabled != nil {
			on := *t.Enabled
			g.GenerateExisting = &on
		}
	}
	g.Recorded = recordedKinds(p.GPolStatus, p.Metadata.Annotations)
	return g
}

// GeneratingPolicyFromObject converts an untyped GeneratingPolicy or
// NamespacedGeneratingPolicy into a Policy whose GPol holds its spec; its
// Spec carries admission and useServerSideApply.
func GeneratingPolicyFromObject(obj map[string]any) (*Policy, error) {
	var doc struct {
		APIVersion string                  `json:"apiVersion"`
		Kind       string                  `json:"kind"`
		Metadata   ObjectMeta              `json:"metadata"`
		Spec       GeneratingPolicySpec    `json:"spec"`
		Status     *GeneratingPolicyStatus `json:"status"`
	}
	if err := fromUntyped(obj, &doc); err != nil {
		return nil, err
	}
	p := &Policy{APIVersion: doc.APIVersion, Kind: doc.Kind, Metadata: doc.Metadata, GPol: &doc.Spec, GPolStatus: doc.Status}
	if errs := validateGPol(p); len(errs) > 0 {
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Metadata.Name, errs.ToAggregate())
	}
	s := &doc.Spec
	var admission *Toggle
	if e := s.Evaluation; e != nil {
		admission = e.Admission
		p.Spec.GenerateExisting = e.GenerateExisting.enabled()
	}
	p.setCELSpec(admission, nil, "", s.WebhookConfiguration)
	p.Spec.UseServerSideApply = s.UseServerSideApply
	return p, nil
}

// validateGPol finds what makes a GeneratingPolicy unusable. CEL
// expressions and templates are compiled (and their errors reported) by
// the engine.
func validateGPol(p *Policy) FieldErrors {
	var errs FieldErrors
	if p.Metadata.Name == "" {
		errs.add("metadata.name", "a policy needs a name")
	}
	if p.Kind == KindNamespacedGeneratingPolicy && p.Metadata.Namespace == "" {
		errs.add("metadata.namespace", "a %s needs a namespace", p.Kind)
	}
	s := p.GPol
	if s.MatchConstraints == nil || len(s.MatchConstraints.ResourceRules) == 0 {
		errs.add("spec.matchConstraints.resourceRules", "at least one resource rule is required")
	}
	if len(s.Generation) == 0 {
		errs.add("spec.generate", "at least one generate entry is required")
	}
	for i, g := range s.Generation {
		path := fmt.Sprintf("spec.generate[%d]", i)
		switch {
		case g.Template != nil && strings.TrimSpace(g.Expression) != "":
			errs.add(path, "only one of expression or template may be set")
		case g.Template != nil:
			switch g.Template.Interpolate {
			case "", InterpolateNone, InterpolateCEL:
			default:
				errs.add(path+".template.interpolate", "%q is not none or cel", g.Template.Interpolate)
			}
			if strings.TrimSpace(g.Template.Value) == "" {
				errs.add(path+".template.value", "a template needs a value")
			}
		case strings.TrimSpace(g.Expression) == "":
			errs.add(path, "one of expression or template must be set")
		}
	}
	return errs
}
