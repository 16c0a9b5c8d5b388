// Package policy holds the Kyverno-compatible policy types Verdict reads
// (kyverno.io/v1 and verdict.dev/v1 ClusterPolicy and Policy, kyverno.io/v2
// PolicyException), their loading from YAML or JSON, and their validation.
//
// Values the engine interprets itself (patterns, overlays, context values,
// condition keys and values) are kept as untyped JSON values: map[string]any,
// []any, string, float64, bool and nil.
package policy

import (
	"encoding/json"
	"fmt"
)

// API groups whose policy kinds Verdict reads.
const (
	GroupKyverno = "kyverno.io"
	GroupVerdict = "verdict.dev"
)

// Kinds of policy documents.
const (
	KindClusterPolicy   = "ClusterPolicy"
	KindPolicy          = "Policy"
	KindPolicyException = "PolicyException"
)

// Failure actions.
const (
	Enforce = "Enforce"
	Audit   = "Audit"
)

// ObjectMeta is the part of Kubernetes object metadata the engine uses.
type ObjectMeta struct {
	Name              string            `json:"name,omitempty"`
	Namespace         string            `json:"namespace,omitempty"`
	UID               string            `json:"uid,omitempty"`
	ResourceVersion   string            `json:"resourceVersion,omitempty"`
	Generation        int64             `json:"generation,omitempty"`
	Labels            map[string]string `json:"labels,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	CreationTimestamp any               `json:"creationTimestamp,omitempty"`
	Finalizers        []string          `json:"finalizers,omitempty"`
	ManagedFields     []any             `json:"managedFields,omitempty"`
	OwnerReferences   []any             `json:"ownerReferences,omitempty"`
	GenerateName      string            `json:"generateName,omitempty"`
	DeletionTimestamp any               `json:"deletionTimestamp,omitempty"`
}

// Policy is a ClusterPolicy (cluster-wide) or a Policy (namespaced).
type Policy struct {
	APIVersion string     `json:"apiVersion"`
	Kind       string     `json:"kind"`
	Metadata   ObjectMeta `json:"metadata"`
	Spec       Spec       `json:"spec"`
	Status     *Status    `json:"status,omitempty"`
	// VPol is the spec of a ValidatingPolicy (or its namespaced kind),
	// whose document has no Spec of the classic kinds.
	VPol *ValidatingPolicySpec `json:"-"`
	// MPol is the spec of a MutatingPolicy (or its namespaced kind).
	MPol *MutatingPolicySpec `json:"-"`
	// GPol is the spec of a GeneratingPolicy (or its namespaced kind).
	GPol *GeneratingPolicySpec `json:"-"`
	// GPolStatus is a GeneratingPolicy's status, as stored.
	GPolStatus *GeneratingPolicyStatus `json:"-"`
	// IVPol is the spec of an ImageValidatingPolicy (or its namespaced
	// kind).
	IVPol *ImageValidatingPolicySpec `json:"-"`
	// Native is a Kubernetes ValidatingAdmissionPolicy or
	// MutatingAdmissionPolicy with its bindings (native.go).
	Native *NativePolicy `json:"-"`
}

// Namespaced reports whether the policy is a namespaced kind (Policy,
// NamespacedValidatingPolicy, NamespacedMutatingPolicy,
// NamespacedGeneratingPolicy).
func (p *Policy) Namespaced() bool {
	return p.Kind == KindPolicy || p.Kind == KindNamespacedValidatingPolicy || p.Kind == KindNamespacedMutatingPolicy ||
		p.Kind == KindNamespacedGeneratingPolicy || p.Kind == KindNamespacedImageValidatingPolicy
}

// Key identifies the policy: "name" for a ClusterPolicy, "namespace/name" for a Policy.
func (p *Policy) Key() string {
	if p.Namespaced() {
		return p.Metadata.Namespace + "/" + p.Metadata.Name
	}
	return p.Metadata.Name
}

// Spec is the body of a policy.
type Spec struct {
	// Rules are the policy's rules, evaluated in order; at least one.
	Rules []Rule `json:"rules,omitempty"`
	// ApplyRules is All (the default: every matching rule applies) or One
	// (evaluation stops after the first rule that passes).
	ApplyRules string `json:"applyRules,omitempty"`
	// FailurePolicy is Fail (the default) or Ignore: whether the API server
	// rejects requests when the webhook cannot answer for this policy, and
	// whether an error of one of its rules denies.
	FailurePolicy string `json:"failurePolicy,omitempty"`
	// ValidationFailureAction is what a failing validate rule does: Enforce
	// denies the request, Audit (the default) admits it and reports the
	// failure. A rule's validate.failureAction overrides it.
	ValidationFailureAction string `json:"validationFailureAction,omitempty"`
	// ValidationFailureActionOverrides change the action in some
	// namespaces; a rule's validate.failureActionOverrides replace them.
	ValidationFailureActionOverrides []FailureActionOverride `json:"validationFailureActionOverrides,omitempty"`
	// EmitWarning is Kyverno's switch for admission warnings on mutate
	// rules and Audit failures (default false).
	EmitWarning *bool `json:"emitWarning,omitempty"`
	// Admission is whether the rules apply to admission requests (default
	// true).
	Admission *bool `json:"admission,omitempty"`
	// Background is whether background scans apply the rules to existing
	// resources (default true). It must be false when a rule reads what
	// only an admission request has (request.userInfo, for example).
	Background *bool `json:"background,omitempty"`
	// SchemaValidation is deprecated in Kyverno and ignored.
	SchemaValidation *bool `json:"schemaValidation,omitempty"`
	// WebhookTimeoutSeconds is Kyverno's per-policy webhook timeout.
	WebhookTimeoutSeconds *int32 `json:"webhookTimeoutSeconds,omitempty"`
	// MutateExistingOnPolicyUpdate applies the mutate rules to existing
	// targets when the policy changes (deprecated in Kyverno for the
	// rule's mutate.mutateExistingOnPolicyUpdate).
	MutateExistingOnPolicyUpdate bool `json:"mutateExistingOnPolicyUpdate,omitempty"`
	// GenerateExistingOnPolicyUpdate is the deprecated name of
	// GenerateExisting.
	GenerateExistingOnPolicyUpdate *bool `json:"generateExistingOnPolicyUpdate,omitempty"`
	// GenerateExisting applies the generate rules to existing triggers
	// when the policy is created or changes (deprecated in Kyverno for the
	// rule's generate.generateExisting).
	GenerateExisting bool `json:"generateExisting,omitempty"`
	// UseServerSideApply makes generate and mutate-existing write with
	// server-side apply.
	UseServerSideApply bool `json:"useServerSideApply,omitempty"`
	// WebhookConfiguration is Kyverno's per-policy webhook settings
	// (failurePolicy, timeoutSeconds, matchConditions), kept as written.
	WebhookConfiguration any `json:"webhookConfiguration,omitempty"`
}

// BackgroundEnabled reports whether background processing is on (the default).
func (s *Spec) BackgroundEnabled() bool { return s.Background == nil || *s.Background }

// AdmissionEnabled reports whether admission processing is on (the default).
func (s *Spec) AdmissionEnabled() bool { return s.Admission == nil || *s.Admission }

// FailureActionOverride changes the failure action for some namespaces.
type FailureActionOverride struct {
	Action            string         `json:"action,omitempty"`
	Namespaces        []string       `json:"namespaces,omitempty"`
	NamespaceSelector *LabelSelector `json:"namespaceSelector,omitempty"`
}

// Rule is one rule of a policy; exactly one of validate, mutate, generate and
// verifyImages is set.
type Rule struct {
	// Name identifies the rule in its policy, in results and in
	// exceptions.
	Name string `json:"name"`
	// Context adds variables to the rule's context, in order.
	Context []ContextEntry `json:"context,omitempty"`
	// MatchResources selects the resources and requests the rule applies
	// to.
	MatchResources MatchResources `json:"match"`
	// ExcludeResources leaves some of the matched resources and requests
	// out.
	ExcludeResources *MatchResources `json:"exclude,omitempty"`
	// ImageExtractors say where images are in custom resources, by kind.
	ImageExtractors map[string][]any `json:"imageExtractors,omitempty"`
	// RawAnyAllConditions must hold for the rule to apply: an object with
	// any and all condition lists, or a bare list (read as all).
	RawAnyAllConditions *Conditions `json:"preconditions,omitempty"`
	// CELPreconditions are CEL conditions that must all hold for the
	// rule to apply (admission match conditions).
	CELPreconditions []MatchCondition `json:"celPreconditions,omitempty"`
	// Mutation makes this a mutate rule.
	Mutation *Mutation `json:"mutate,omitempty"`
	// Validation makes this a validate rule.
	Validation *Validation `json:"validate,omitempty"`
	// Generation makes this a generate rule.
	Generation *Generation `json:"generate,omitempty"`
	// VerifyImages makes this an image verification rule: each entry
	// checks the images its imageReferences select.
	VerifyImages []ImageVerification `json:"verifyImages,omitempty"`
	// SkipBackgroundRequests is Kyverno's switch to skip admission requests
	// made by its own background controllers (default true).
	SkipBackgroundRequests *bool `json:"skipBackgroundRequests,omitempty"`
	// ReportProperties are Kyverno's extra properties for the rule's
	// results in policy reports.
	ReportProperties map[string]string `json:"reportProperties,omitempty"`
}

// Type names the kind of rule.
func (r *Rule) Type() string {
	switch {
	case r.Validation != nil:
		return "Validation"
	case r.Mutation != nil:
		return "Mutation"
	case r.Generation != nil:
		return "Generation"
	case len(r.VerifyImages) > 0:
		return "ImageVerify"
	}
	return ""
}

// ContextEntry adds a variable to the rule's context.
type ContextEntry struct {
	Name            string           `json:"name"`
	Variable        *ContextVariable `json:"variable,omitempty"`
	ConfigMap       *ConfigMapRef    `json:"configMap,omitempty"`
	APICall         *APICall         `json:"apiCall,omitempty"`
	ImageRegistry   *ImageRegistry   `json:"imageRegistry,omitempty"`
	GlobalReference *GlobalReference `json:"globalReference,omitempty"`
}

// ContextVariable is a literal value or a JMESPath query, with a default.
type ContextVariable struct {
	Value    any    `json:"value,omitempty"`
	JMESPath string `json:"jmesPath,omitempty"`
	Default  any    `json:"default,omitempty"`
}

// ConfigMapRef names a ConfigMap whose content becomes a variable.
type ConfigMapRef struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// APICall fetches data from the Kubernetes API or a service.
type APICall struct {
	URLPath  string        `json:"urlPath,omitempty"`
	Method   string        `json:"method,omitempty"`
	Data     []RequestData `json:"data,omitempty"`
	Service  *ServiceCall  `json:"service,omitempty"`
	JMESPath string        `json:"jmesPath,omitempty"`
	Default  any           `json:"default,omitempty"`
}

// RequestData is one key of a POST body.
type RequestData struct {
	Key   string `json:"key"`
	Value any    `json:"value"`
}

// ServiceCall is an HTTP call to a service.
type ServiceCall struct {
	URL      string `json:"url"`
	CABundle string `json:"caBundle,omitempty"`
	Headers  []any  `json:"headers,omitempty"`
}

// ImageRegistry loads image metadata from a registry.
type ImageRegistry struct {
	Reference                string `json:"reference"`
	JMESPath                 string `json:"jmesPath,omitempty"`
	ImageRegistryCredentials any    `json:"imageRegistryCredentials,omitempty"`
}

// GlobalReference reads a global context entry.
type GlobalReference struct {
	Name     string `json:"name"`
	JMESPath string `json:"jmesPath,omitempty"`
}

// MatchResources selects resources by any / all filters, or by the legacy
// inline filter.
type MatchResources struct {
	Any                 []ResourceFilter `json:"any,omitempty"`
	All                 []ResourceFilter `json:"all,omitempty"`
	UserInfo            `json:",inline"`
	ResourceDescription `json:"resources,omitempty"`
}

// ResourceFilter is one selector: resource attributes and requester identity.
type ResourceFilter struct {
	UserInfo            `json:",inline"`
	ResourceDescription `json:"resources,omitempty"`
}

// UserInfo selects requests by the requester.
type UserInfo struct {
	Roles        []string  `json:"roles,omitempty"`
	ClusterRoles []string  `json:"clusterRoles,omitempty"`
	Subjects     []Subject `json:"subjects,omitempty"`
}

// IsEmpty reports whether no user attribute is set.
func (u *UserInfo) IsEmpty() bool {
	return len(u.Roles) == 0 && len(u.ClusterRoles) == 0 && len(u.Subjects) == 0
}

// Subject is an RBAC subject.
type Subject struct {
	Kind      string `json:"kind"`
	APIGroup  string `json:"apiGroup,omitempty"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
}

// ResourceDescription selects resources by their attributes.
type ResourceDescription struct {
	Kinds             []string          `json:"kinds,omitempty"`
	Name              string            `json:"name,omitempty"`
	Names             []string          `json:"names,omitempty"`
	Namespaces        []string          `json:"namespaces,omitempty"`
	Annotations       map[string]string `json:"annotations,omitempty"`
	Selector          *LabelSelector    `json:"selector,omitempty"`
	NamespaceSelector *LabelSelector    `json:"namespaceSelector,omitempty"`
	Operations        []string          `json:"operations,omitempty"`
}

// IsEmpty reports whether no attribute is set.
func (r *ResourceDescription) IsEmpty() bool {
	return len(r.Kinds) == 0 && r.Name == "" && len(r.Names) == 0 && len(r.Namespaces) == 0 &&
		len(r.Annotations) == 0 && r.Selector == nil && r.NamespaceSelector == nil && len(r.Operations) == 0
}

// LabelSelector is a Kubernetes label selector.
type LabelSelector struct {
	MatchLabels      map[string]string          `json:"matchLabels,omitempty"`
	MatchExpressions []LabelSelectorRequirement `json:"matchExpressions,omitempty"`
}

// LabelSelectorRequirement is one expression of a label selector.
type LabelSelectorRequirement struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values,omitempty"`
}

// Condition compares a key with a value.
type Condition struct {
	Key      any    `json:"key"`
	Operator string `json:"operator"`
	Value    any    `json:"value,omitempty"`
	Message  string `json:"message,omitempty"`
}

// Conditions are any / all condition lists. The legacy form, a bare list, is
// read as All.
type Conditions struct {
	Any []Condition `json:"any,omitempty"`
	All []Condition `json:"all,omitempty"`
}

// UnmarshalJSON accepts both {any, all} and a bare list.
func (c *Conditions) UnmarshalJSON(data []byte) error {
	var list []Condition
	if err := json.Unmarshal(data, &list); err == nil {
		c.All = list
		return nil
	}
	type plain Conditions
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return fmt.Errorf("conditions must be a list or an object with any / all: %w", err)
	}
	*c = Conditions(p)
	return nil
}

// IsEmpty reports whether there is no condition.
func (c *Conditions) IsEmpty() bool { return c == nil || (len(c.Any) == 0 && len(c.All) == 0) }

// Validation is a validate rule.
type Validation struct {
	// Message is shown when the rule fails; it may hold variables.
	Message string `json:"message,omitempty"`
	// FailureAction is Enforce (deny) or Audit (admit and report); it
	// overrides the policy's validationFailureAction.
	FailureAction string `json:"failureAction,omitempty"`
	// FailureActionOverrides change the action in some namespaces.
	FailureActionOverrides []FailureActionOverride `json:"failureActionOverrides,omitempty"`
	// AllowExistingViolations lets updates of resources that already
	// failed the rule through (default true).
	AllowExistingViolations *bool `json:"allowExistingViolations,omitempty"`
	// Pattern is the shape the resource must have, with anchors and
	// operators.
	Pattern any `json:"pattern,omitempty"`
	// AnyPattern passes when one of its patterns does.
	AnyPattern []any `json:"anyPattern,omitempty"`
	// Deny fails the rule when its conditions hold.
	Deny *Deny `json:"deny,omitempty"`
	// ForEach validates each element of lists the resource holds.
	ForEach []ForEachValidation `json:"foreach,omitempty"`
	// PodSecurity checks Pods against a Pod Security Standard level.
	PodSecurity *PodSecurity `json:"podSecurity,omitempty"`
	// CEL validates with CEL expressions, as a ValidatingAdmissionPolicy
	// does.
	CEL *CEL `json:"cel,omitempty"`
	// Manifests checks that the resource is signed: the YAML manifest
	// it was made from, signed with sigstore (k8s-manifest-sigstore's
	// annotations), equal to the resource.
	Manifests *Manifests `json:"manifests,omitempty"`
	// Assert holds a Kyverno assertion tree, kept as written.
	Assert any `json:"assert,omitempty"`
}

// CEL is a validation written in CEL: each expression must hold.
type CEL struct {
	// Expressions must each evaluate to true.
	Expressions []CELExpression `json:"expressions,omitempty"`
	// ParamKind and ParamRef name the resources the expressions read as
	// params.
	ParamKind *ParamKind `json:"paramKind,omitempty"`
	ParamRef  *ParamRef  `json:"paramRef,omitempty"`
	// AuditAnnotations are annotations added to the audit event.
	AuditAnnotations []AuditAnnotation `json:"auditAnnotations,omitempty"`
	// Variables are named expressions the others read as variables.<name>.
	Variables []NamedExpression `json:"variables,omitempty"`
}

// CELExpression is one CEL validation expression.
type CELExpression struct {
	// Expression must evaluate to true.
	Expression string `json:"expression"`
	// Message is shown when it does not.
	Message string `json:"message,omitempty"`
	// MessageExpression builds the message; Message is the fallback.
	MessageExpression string `json:"messageExpression,omitempty"`
	// Reason is the status reason of a denial.
	Reason *string `json:"reason,omitempty"`
}

// ParamKind is the kind of the params resources.
type ParamKind struct {
	// APIVersion is the group/version of the params resources.
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind is their kind.
	Kind string `json:"kind,omitempty"`
}

// ParamRef selects the params resources.
type ParamRef struct {
	// Name is the params resource's name.
	Name string `json:"name,omitempty"`
	// Namespace is its namespace (cluster-scoped kinds: none).
	Namespace string `json:"namespace,omitempty"`
	// Selector selects params resources by label instead of by name.
	Selector *LabelSelector `json:"selector,omitempty"`
	// ParameterNotFoundAction is Allow or Deny: what no params means.
	ParameterNotFoundAction *string `json:"parameterNotFoundAction,omitempty"`
}

// AuditAnnotation is an annotation of the audit event, computed by CEL.
type AuditAnnotation struct {
	// Key is the annotation's key (prefixed with the policy's name).
	Key string `json:"key"`
	// ValueExpression computes its value: a string, or null for none.
	ValueExpression string `json:"valueExpression"`
}

// NamedExpression is a CEL expression with a name (a variable).
type NamedExpression struct {
	// Name is how other expressions read it: variables.<name>.
	Name string `json:"name"`
	// Expression computes its value.
	Expression string `json:"expression"`
}

// MatchCondition is a named CEL condition.
type MatchCondition struct {
	// Name names the condition.
	Name string `json:"name"`
	// Expression must evaluate to true.
	Expression string `json:"expression"`
}

// Deny fails the rule when its conditions hold.
type Deny struct {
	Conditions *Conditions `json:"conditions,omitempty"`
}

// ForEachValidation validates each element of a list.
type ForEachValidation struct {
	List          string          `json:"list"`
	ElementScope  *bool           `json:"elementScope,omitempty"`
	Context       []ContextEntry  `json:"context,omitempty"`
	Preconditions *Conditions     `json:"preconditions,omitempty"`
	Pattern       any             `json:"pattern,omitempty"`
	AnyPattern    []any           `json:"anyPattern,omitempty"`
	Deny          *Deny           `json:"deny,omitempty"`
	ForEach       json.RawMessage `json:"foreach,omitempty"`
}

// PodSecurity applies a Pod Security Standard level.
type PodSecurity struct {
	Level   string               `json:"level"`
	Version string               `json:"version,omitempty"`
	Exclude []PodSecurityExclude `json:"exclude,omitempty"`
}

// PodSecurityExclude exempts some values of one control.
type PodSecurityExclude struct {
	ControlName     string   `json:"controlName"`
	Images          []string `json:"images,omitempty"`
	RestrictedField string   `json:"restrictedField,omitempty"`
	Values          []string `json:"values,omitempty"`
}

// Mutation is a mutate rule.
type Mutation struct {
	MutateExistingOnPolicyUpdate *bool             `json:"mutateExistingOnPolicyUpdate,omitempty"`
	Targets                      []TargetResource  `json:"targets,omitempty"`
	PatchStrategicMerge          any               `json:"patchStrategicMerge,omitempty"`
	PatchesJSON6902              string            `json:"patchesJson6902,omitempty"`
	ForEach                      []ForEachMutation `json:"foreach,omitempty"`
}

// TargetResource names existing resources a mutate rule changes.
type TargetResource struct {
	APIVersion    string         `json:"apiVersion,omitempty"`
	Kind          string         `json:"kind,omitempty"`
	Name          string         `json:"name,omitempty"`
	Namespace     string         `json:"namespace,omitempty"`
	UID           string         `json:"uid,omitempty"`
	Selector      *LabelSelector `json:"selector,omitempty"`
	Context       []ContextEntry `json:"context,omitempty"`
	Preconditions *Conditions    `json:"preconditions,omitempty"`
}

// ForEachMutation mutates each element of a list.
type ForEachMutation struct {
	List                string          `json:"list"`
	Order               string          `json:"order,omitempty"`
	Context             []ContextEntry  `json:"context,omitempty"`
	Preconditions       *Conditions     `json:"preconditions,omitempty"`
	PatchStrategicMerge any             `json:"patchStrategicMerge,omitempty"`
	PatchesJSON6902     string          `json:"patchesJson6902,omitempty"`
	ForEach             json.RawMessage `json:"foreach,omitempty"`
}

// Generation is a generate rule.
type Generation struct {
	APIVersion                     string            `json:"apiVersion,omitempty"`
	Kind                           string            `json:"kind,omitempty"`
	Name                           string            `json:"name,omitempty"`
	Namespace                      string            `json:"namespace,omitempty"`
	UID                            string            `json:"uid,omitempty"`
	Synchronize                    bool              `json:"synchronize,omitempty"`
	OrphanDownstreamOnPolicyDelete bool              `json:"orphanDownstreamOnPolicyDelete,omitempty"`
	GenerateExisting               *bool             `json:"generateExisting,omitempty"`
	Data                           any               `json:"data,omitempty"`
	Clone                          *CloneFrom        `json:"clone,omitempty"`
	CloneList                      *CloneList        `json:"cloneList,omitempty"`
	ForEach                        []ForEachGenerate `json:"foreach,omitempty"`

	// FromCEL marks the rule a GeneratingPolicy acts as: what it writes
	// is known once evaluated, and every kind of it counts as data (the
	// policy's changes reach what it generated).
	FromCEL bool `json:"-"`
	// Recorded are the kinds a GeneratingPolicy's status records it
	// generated (GeneratingPolicyStatus.DownstreamKinds).
	Recorded []KindRef `json:"-"`
}

// CloneFrom names one resource to clone.
type CloneFrom struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// CloneList selects resources to clone.
type CloneList struct {
	Namespace string         `json:"namespace,omitempty"`
	Kinds     []string       `json:"kinds,omitempty"`
	Selector  *LabelSelector `json:"selector,omitempty"`
}

// ForEachGenerate generates for each element of a list.
type ForEachGenerate struct {
	List          string         `json:"list"`
	Context       []ContextEntry `json:"context,omitempty"`
	Preconditions *Conditions    `json:"preconditions,omitempty"`
	APIVersion    string         `json:"apiVersion,omitempty"`
	Kind          string         `json:"kind,omitempty"`
	Name          string         `json:"name,omitempty"`
	Namespace     string         `json:"namespace,omitempty"`
	UID           string         `json:"uid,omitempty"`
	Data          any            `json:"data,omitempty"`
	Clone         *CloneFrom     `json:"clone,omitempty"`
	CloneList     *CloneList     `json:"cloneList,omitempty"`
}

// Exception is a PolicyException (kyverno.io/v2).
type Exception struct {
	APIVersion string        `json:"apiVersion"`
	Kind       string        `json:"kind"`
	Metadata   ObjectMeta    `json:"metadata"`
	Spec       ExceptionSpec `json:"spec"`
	// ClusterWide is set by whoever loads the exception, never read from
	// the object: false (the default), the exception exempts only
	// resources in its own namespace; true, resources wherever its match
	// selects them. The cluster's services set it for exceptions in the
	// exception namespaces an operator names, the CLI for the exceptions
	// it reads from files.
	ClusterWide bool `json:"-"`
}

// ExceptionSpec says which resources are exempt from which rules.
type ExceptionSpec struct {
	// Background is whether the exception also applies in Kyverno's
	// background scans (absent means true).
	Background *bool `json:"background,omitempty"`
	// Match selects the resources and requests the exception covers
	// (required; not in the schema, which also serves the CEL shape of
	// PolicyException: policyRefs and matchConditions).
	Match MatchResources `json:"match,omitempty"`
	// Conditions must hold for the exception to apply.
	Conditions *Conditions `json:"conditions,omitempty"`
	// Exceptions name the policies and rules the covered resources are
	// exempt from (required, as match).
	Exceptions []ExceptionEntry `json:"exceptions,omitempty"`
	// PodSecurity exempts some values of some Pod Security controls of
	// podSecurity rules.
	PodSecurity []PodSecurityExclude `json:"podSecurity,omitempty"`
}

// ExceptionEntry names a policy and some of its rules.
type ExceptionEntry struct {
	PolicyName string   `json:"policyName"`
	RuleNames  []string `json:"ruleNames"`
}
