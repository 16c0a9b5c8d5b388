package policy

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The CEL policy kinds of policies.kyverno.io (v1alpha1, v1beta1 and v1
// share these fields).
const (
	GroupPolicies                  = "policies.kyverno.io"
	KindValidatingPolicy           = "ValidatingPolicy"
	KindNamespacedValidatingPolicy = "NamespacedValidatingPolicy"
)

// ValidatingPolicySpec is the spec of a ValidatingPolicy: CEL validations
// of the requests matchConstraints select, as a ValidatingAdmissionPolicy
// with its binding.
type ValidatingPolicySpec struct {
	// MatchConstraints select the requests by resource and operation,
	// namespace and object labels.
	MatchConstraints *MatchConstraints `json:"matchConstraints,omitempty"`
	// MatchConditions must all hold for the policy to apply.
	MatchConditions []MatchCondition `json:"matchConditions,omitempty"`
	// Variables are named expressions the others read as variables.<name>.
	Variables []NamedExpression `json:"variables,omitempty"`
	// Validations must each evaluate to true.
	Validations []CELExpression `json:"validations,omitempty"`
	// ValidationActions are Deny, Audit and Warn.
	ValidationActions []string `json:"validationActions,omitempty"`
	// AuditAnnotations are annotations added to the audit event.
	AuditAnnotations []AuditAnnotation `json:"auditAnnotations,omitempty"`
	// FailurePolicy is Fail (the default) or Ignore: what an error in a
	// match condition does.
	FailurePolicy string `json:"failurePolicy,omitempty"`
	// Autogen says for which Pod controllers the policy is also applied
	// to the pod template.
	Autogen *AutogenConfiguration `json:"autogen,omitempty"`
	// Evaluation says where the policy applies: admission, background.
	Evaluation *EvaluationConfiguration `json:"evaluation,omitempty"`
	// ParamKind and ParamRef name the params resources.
	ParamKind *ParamKind `json:"paramKind,omitempty"`
	ParamRef  *ParamRef  `json:"paramRef,omitempty"`
	// WebhookConfiguration tunes the webhook (timeoutSeconds).
	WebhookConfiguration map[string]any `json:"webhookConfiguration,omitempty"`
}

// MatchConstraints is a ValidatingAdmissionPolicy's matchConstraints.
type MatchConstraints struct {
	// NamespaceSelector selects by the labels of the resource's namespace
	// (of the Namespace itself for a Namespace).
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`
	// ObjectSelector selects by the object's labels.
	ObjectSelector *LabelSelector `json:"objectSelector,omitempty"`
	// ResourceRules select requests; ExcludeResourceRules leave some out.
	ResourceRules        []ResourceRule `json:"resourceRules,omitempty"`
	ExcludeResourceRules []ResourceRule `json:"excludeResourceRules,omitempty"`
	// MatchPolicy is Exact or Equivalent.
	MatchPolicy string `json:"matchPolicy,omitempty"`
}

// ResourceRule selects requests by operation and resource.
type ResourceRule struct {
	// ResourceNames, when set, limit the rule to these names.
	ResourceNames []string `json:"resourceNames,omitempty"`
	// Operations are CREATE, UPDATE, DELETE, CONNECT or *.
	Operations []string `json:"operations,omitempty"`
	// APIGroups, APIVersions and Resources ("pods", "pods/status", "*",
	// "*/*") name the resources.
	APIGroups   []string `json:"apiGroups,omitempty"`
	APIVersions []string `json:"apiVersions,omitempty"`
	Resources   []string `json:"resources,omitempty"`
	// Scope is Cluster, Namespaced or *.
	Scope string `json:"scope,omitempty"`
}

// AutogenConfiguration is a CEL policy's autogen setting.
type AutogenConfiguration struct {
	PodControllers *PodControllers `json:"podControllers,omitempty"`
	// ValidatingAdmissionPolicy asks for the policy to be enforced by the
	// API server as a ValidatingAdmissionPolicy where it can be (off by
	// default; the cluster's operator enables the generation too).
	ValidatingAdmissionPolicy *Toggle `json:"validatingAdmissionPolicy,omitempty"`
}

// PodControllers lists the controllers autogen covers (deployments,
// cronjobs, ...): absent means all of them, an empty list none.
type PodControllers struct {
	Controllers *[]string `json:"controllers,omitempty"`
}

// EvaluationConfiguration says where a CEL policy applies.
type EvaluationConfiguration struct {
	// Mode is Kubernetes (the default) or JSON.
	Mode       string  `json:"mode,omitempty"`
	Admission  *Toggle `json:"admission,omitempty"`
	Background *Toggle `json:"background,omitempty"`
}

// Toggle is an enabled flag (default true).
type Toggle struct {
	Enabled *bool `json:"enabled,omitempty"`
}

func (t *Toggle) on() bool { return t == nil || t.Enabled == nil || *t.Enabled }

// GeneratesAdmissionPolicy reports whether the policy asks to be
// enforced by the API server as a ValidatingAdmissionPolicy
// (autogen.validatingAdmissionPolicy.enabled, false by default).
func (s *ValidatingPolicySpec) GeneratesAdmissionPolicy() bool {
	a := s.Autogen
	return a != nil && a.ValidatingAdmissionPolicy != nil && a.ValidatingAdmissionPolicy.Enabled != nil && *a.ValidatingAdmissionPolicy.Enabled
}

// JSONMode reports whether the policy validates JSON payloads (evaluation
// mode JSON: object is the payload, there is no request) rather than
// Kubernetes objects.
func (s *ValidatingPolicySpec) JSONMode() bool {
	return s.Evaluation != nil && strings.EqualFold(s.Evaluation.Mode, "JSON")
}

// ValidatingPolicyFromObject converts an untyped ValidatingPolicy or
// NamespacedValidatingPolicy into a Policy whose VPol holds its spec;
// its Spec carries what the rest of Verdict reads of any policy: the
// failure action (Enforce when validationActions hold Deny), admission
// and background.
func ValidatingPolicyFromObject(obj map[string]any) (*Policy, error) {
	var doc struct {
		APIVersion string               `json:"apiVersion"`
		Kind       string               `json:"kind"`
		Metadata   ObjectMeta           `json:"metadata"`
		Spec       ValidatingPolicySpec `json:"spec"`
	}
	if err := fromUntyped(obj, &doc); err != nil {
		return nil, err
	}
	p := &Policy{APIVersion: doc.APIVersion, Kind: doc.Kind, Metadata: doc.Metadata, VPol: &doc.Spec}
	if errs := validateVPol(p); len(errs) > 0 {
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Metadata.Name, errs.ToAggregate())
	}
	s := &doc.Spec
	p.Spec.ValidationFailureAction = Audit
	if slices.Contains(s.ValidationActions, "Deny") {
		p.Spec.ValidationFailureAction = Enforce
	}
	var admission, background *Toggle
	if e := s.Evaluation; e != nil {
		admission, background = e.Admission, e.Background
	}
	p.setCELSpec(admission, background, s.FailurePolicy, s.WebhookConfiguration)
	return p, nil
}

// setCELSpec sets what the rest of Verdict reads of any policy from a CEL
// policy's fields: admission and background (evaluation, when given),
// the failure policy and the webhook's timeout.
func (p *Policy) setCELSpec(admission, background *Toggle, failurePolicy string, webhook map[string]any) {
	if admission != nil || background != nil {
		a, b := admission.on(), background.on()
		p.Spec.Admission, p.Spec.Background = &a, &b
	}
	p.Spec.FailurePolicy = failurePolicy
	if t, ok := webhook["timeoutSeconds"].(float64); ok && t > 0 {
		secs := int32(t)
		p.Spec.WebhookTimeoutSeconds = &secs
	}
}

// validateVPol finds what makes a ValidatingPolicy unusable. CEL
// expressions are compiled (and their errors reported) by the engine.
func validateVPol(p *Policy) FieldErrors {
	s := p.VPol
	return validateValidating(p, KindNamespacedValidatingPolicy, validatingFields{
		json: s.JSONMode(), match: s.MatchConstraints, validations: len(s.Validations),
		actions: s.ValidationActions, failurePolicy: s.FailurePolicy, evaluation: s.Evaluation,
	})
}

// validatingFields are what the validating CEL kinds (ValidatingPolicy,
// ImageValidatingPolicy) share and validateValidating checks.
type validatingFields struct {
	json          bool
	match         *MatchConstraints
	validations   int
	actions       []string
	failurePolicy string
	evaluation    *EvaluationConfiguration
}

// validateValidating checks the fields a validating CEL policy cannot do
// without: a name (and a namespace for namespacedKind), resource rules
// unless it checks JSON payloads, a validation, known actions, failure
// policy and evaluation mode.
func validateValidating(p *Policy, namespacedKind string, f validatingFields) FieldErrors {
	var errs FieldErrors
	if p.Metadata.Name == "" {
		errs.add("metadata.name", "a policy needs a name")
	}
	if p.Kind == namespacedKind && p.Metadata.Namespace == "" {
		errs.add("metadata.namespace", "a %s needs a namespace", p.Kind)
	}
	if !f.json && (f.match == nil || len(f.match.ResourceRules) == 0) {
		errs.add("spec.matchConstraints.resourceRules", "at least one resource rule is required")
	}
	if f.validations == 0 {
		errs.add("spec.validations", "at least one validation is required")
	}
	for i, a := range f.actions {
		switch a {
		case "Deny", "Audit", "Warn":
		default:
			errs.add(fmt.Sprintf("spec.validationActions[%d]", i), "%q is not Deny, Audit or Warn", a)
		}
	}
	switch f.failurePolicy {
	case "", "Fail", "Ignore":
	default:
		errs.add("spec.failurePolicy", "%q is not Fail or Ignore", f.failurePolicy)
	}
	if e := f.evaluation; e != nil && e.Mode != "" && !strings.EqualFold(e.Mode, "Kubernetes") && !f.json {
		errs.add("spec.evaluation.mode", "mode %s is not supported yet (Kubernetes and JSON are)", e.Mode)
	}
	return errs
}

// CELException is a PolicyException of policies.kyverno.io: it exempts
// the requests its match conditions select from the CEL policies it
// names, wholly, or (with images or allowedValues) only for those, which
// the policy reads as exceptions.allowedImages and
// exceptions.allowedValues.
type CELException struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   ObjectMeta       `json:"metadata"`
	Spec       CELExceptionSpec `json:"spec"`
	// ClusterWide is Exception.ClusterWide: set by the loader; false,
	// the exception exempts only resources in its own namespace.
	ClusterWide bool `json:"-"`
}

// CELExceptionSpec is the body of a CELException.
type CELExceptionSpec struct {
	// PolicyRefs name the policies it applies to.
	PolicyRefs []PolicyRef `json:"policyRefs"`
	// MatchConditions must all hold for it to apply.
	MatchConditions []MatchCondition `json:"matchConditions,omitempty"`
	// Images and AllowedValues make it partial: the policy still runs,
	// and reads them.
	Images        []string `json:"images,omitempty"`
	AllowedValues []string `json:"allowedValues,omitempty"`
	// ReportResult is skip (the default) or pass.
	ReportResult string `json:"reportResult,omitempty"`
	// ExpiresAt, when set (RFC 3339), is when it stops applying: from
	// then on the policies it names apply again (Kyverno 1.19).
	ExpiresAt *time.Time `json:"expiresAt,omitempty"`
}

// PolicyRef names a policy by name and kind.
type PolicyRef struct {
	Name string `json:"name"`
	Kind string `json:"kind"`
}

// Key is namespace/name, or the name of a cluster-wide one.
func (e *CELException) Key() string {
	if e.Metadata.Namespace != "" {
		return e.Metadata.Namespace + "/" + e.Metadata.Name
	}
	return e.Metadata.Name
}

// IsCELException reports whether a PolicyException is of the CEL shape
// (spec.policyRefs, as policies.kyverno.io's) rather than the classic one
// (spec.exceptions, as kyverno.io's). In Verdict's group one kind,
// PolicyException, carries either: their fields do not overlap.
func IsCELException(obj map[string]any) bool {
	spec, _ := obj["spec"].(map[string]any)
	_, cel := spec["policyRefs"]
	_, classic := spec["exceptions"]
	return cel && !classic
}

// CELExceptionFromObject converts an untyped policies.kyverno.io
// PolicyException.
func CELExceptionFromObject(obj map[string]any) (*CELException, error) {
	var e CELException
	if err := fromUntyped(obj, &e); err != nil {
		return nil, err
	}
	var errs FieldErrors
	if e.Metadata.Name == "" {
		errs.add("metadata.name", "an exception needs a name")
	}
	if len(e.Spec.PolicyRefs) == 0 {
		errs.add("spec.policyRefs", "at least one policy reference is required")
	}
	switch e.Spec.ReportResult {
	case "", "skip", "pass":
	default:
		errs.add("spec.reportResult", "%q is not skip or pass", e.Spec.ReportResult)
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("PolicyException %s: %w", e.Metadata.Name, errs.ToAggregate())
	}
	return &e, nil
}
