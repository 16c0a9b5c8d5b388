package policy

import (
	"fmt"
	"reflect"
	"strings"
)

// The deleting CEL policy kinds of policies.kyverno.io: Kyverno's CEL
// successors of ClusterCleanupPolicy and CleanupPolicy.
const (
	KindDeletingPolicy           = "DeletingPolicy"
	KindNamespacedDeletingPolicy = "NamespacedDeletingPolicy"
)

// DeletingPolicySpec is the spec of a DeletingPolicy: on each tick of its
// schedule, the resources matchConstraints select are deleted when every
// condition holds for them.
type DeletingPolicySpec struct {
	// MatchConstraints select the resources by resource rule, namespace
	// and object labels; operations do not matter (there is no request).
	MatchConstraints *MatchConstraints `json:"matchConstraints,omitempty"`
	// Conditions must all be true for a selected resource to be deleted;
	// the resource is `object`, its namespace `namespaceObject`.
	Conditions []MatchCondition `json:"conditions,omitempty"`
	// Variables are named expressions the conditions read as
	// variables.<name>.
	Variables []NamedExpression `json:"variables,omitempty"`
	// Schedule is when the policy runs, in cron format (as a cleanup
	// policy's, ParseCronSchedule).
	Schedule string `json:"schedule"`
	// DeletionPropagationPolicy is Foreground, Background or Orphan.
	DeletionPropagationPolicy *string `json:"deletionPropagationPolicy,omitempty"`
}

// IsDeletingPolicyKind reports whether kind is DeletingPolicy or
// NamespacedDeletingPolicy.
func IsDeletingPolicyKind(kind string) bool {
	return kind == KindDeletingPolicy || kind == KindNamespacedDeletingPolicy
}

// dpolDocument is a DeletingPolicy as written, for decoding and the
// unknown-field check.
type dpolDocument struct {
	APIVersion string             `json:"apiVersion"`
	Kind       string             `json:"kind"`
	Metadata   ObjectMeta         `json:"metadata"`
	Spec       DeletingPolicySpec `json:"spec"`
	Status     map[string]any     `json:"status,omitempty"`
}

var dpolSchema = newSchema(reflect.TypeOf(dpolDocument{}))

// DeletingPolicyFromObject converts an untyped DeletingPolicy or
// NamespacedDeletingPolicy into a CleanupPolicy whose DPol holds its spec
// (and whose Spec carries its schedule and deletion propagation policy,
// what the cleaner reads of any cleanup policy). Every problem is
// reported with its field path: unknown fields and what ValidateDeleting
// finds, and, as Kyverno's admission refuses it, a policy without
// resource rules.
func DeletingPolicyFromObject(obj map[string]any) (*CleanupPolicy, error) {
	return deletingPolicyFromObject(obj, false)
}

// deletingPolicyFromObject is DeletingPolicyFromObject; payloads accepts
// a policy without matchConstraints, which Kyverno's CLI evaluates on
// JSON payloads only (test files).
func deletingPolicyFromObject(obj map[string]any, payloads bool) (*CleanupPolicy, error) {
	var errs FieldErrors
	checkUnknownFields(obj, dpolSchema, "", &errs)
	var doc dpolDocument
	if err := fromUntyped(obj, &doc); err != nil {
		errs.add("", "%v", err)
		return nil, fmt.Errorf("%s %s: %w", doc.Kind, doc.Metadata.Name, errs.ToAggregate())
	}
	p := &CleanupPolicy{APIVersion: doc.APIVersion, Kind: doc.Kind, Metadata: doc.Metadata, Status: doc.Status, DPol: &doc.Spec}
	p.Spec.Schedule = doc.Spec.Schedule
	p.Spec.DeletionPropagationPolicy = doc.Spec.DeletionPropagationPolicy
	errs = append(errs, ValidateDeleting(p, payloads)...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Metadata.Name, errs.ToAggregate())
	}
	return p, nil
}

// ValidateDeleting finds what makes a DeletingPolicy unusable, each
// problem with its field path: its kind, name and namespace, schedule,
// deletion propagation policy, resource rules, and the names and
// expressions its conditions and variables must have. payloads accepts a
// policy without matchConstraints (it selects JSON payloads only, as in
// Kyverno's CLI); a policy for the cluster needs resource rules. CEL
// expressions are compiled (and their errors reported) by the engine.
func ValidateDeleting(p *CleanupPolicy, payloads bool) FieldErrors {
	var errs FieldErrors
	if !IsDeletingPolicyKind(p.Kind) {
		errs.add("kind", "must be DeletingPolicy or NamespacedDeletingPolicy, not %q", p.Kind)
	}
	if p.Metadata.Name == "" {
		errs.add("metadata.name", "a policy needs a name")
	}
	if p.Kind == KindNamespacedDeletingPolicy && p.Metadata.Namespace == "" {
		errs.add("metadata.namespace", "a %s needs a namespace", p.Kind)
	}
	s := p.DPol
	if s == nil {
		errs.add("spec", "is required")
		return errs
	}
	if _, err := ParseCronSchedule(s.Schedule); err != nil {
		errs.add("spec.schedule", "%v", err)
	}
	if p.Spec.Schedule != s.Schedule {
		errs.add("spec.schedule", "the cleanup schedule %q is not the policy's %q", p.Spec.Schedule, s.Schedule)
	}
	checkPropagation(s.DeletionPropagationPolicy, &errs)
	mc := s.MatchConstraints
	switch {
	case mc == nil && payloads:
	case mc == nil || len(mc.ResourceRules) == 0:
		errs.add("spec.matchConstraints.resourceRules", "at least one resource rule is required")
	}
	if mc != nil {
		for i, r := range mc.ResourceRules {
			if len(r.Resources) == 0 {
				errs.add(fmt.Sprintf("spec.matchConstraints.resourceRules[%d].resources", i), "at least one resource is required")
			}
		}
	}
	for i, c := range s.Conditions {
		if c.Name == "" {
			errs.add(fmt.Sprintf("spec.conditions[%d].name", i), "a condition needs a name")
		}
		if strings.TrimSpace(c.Expression) == "" {
			errs.add(fmt.Sprintf("spec.conditions[%d].expression", i), "a condition needs an expression")
		}
	}
	for i, v := range s.Variables {
		if v.Name == "" {
			errs.add(fmt.Sprintf("spec.variables[%d].name", i), "a variable needs a name")
		}
		if strings.TrimSpace(v.Expression) == "" {
			errs.add(fmt.Sprintf("spec.variables[%d].expression", i), "a variable needs an expression")
		}
	}
	return errs
}
