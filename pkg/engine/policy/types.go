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
}

// Namespaced reports whether the policy is a namespaced Policy.
func (p *Policy) Namespaced() bool { return p.Kind == KindPolicy }

// Key identifies the policy: "name" for a ClusterPolicy, "namespace/name" for a Policy.
func (p *Policy) Key() string {
	if p.Namespaced() {
		return p.Metadata.Namespace + "/" + p.Metadata.Name
	}
	return p.Metadata.Name
}

// Spec is the body of a policy.
type Spec struct {
	Rules                            []Rule                  `json:"rules,omitempty"`
	ApplyRules                       string                  `json:"applyRules,omitempty"`
	FailurePolicy                    string                  `json:"failurePolicy,omitempty"`
	ValidationFailureAction          string                  `json:"validationFailureAction,omitempty"`
	ValidationFailureActionOverrides []FailureActionOverride `json:"validationFailureActionOverrides,omitempty"`
	EmitWarning                      *bool                   `json:"emitWarning,omitempty"`
	Admission                        *bool                   `json:"admission,omitempty"`
	Background                       *bool                   `json:"background,omitempty"`
	SchemaValidation                 *bool                   `json:"schemaValidation,omitempty"`
	WebhookTimeoutSeconds            *int32                  `json:"webhookTimeoutSeconds,omitempty"`
	MutateExistingOnPolicyUpdate     bool                    `json:"mutateExistingOnPolicyUpdate,omitempty"`
	GenerateExistingOnPolicyUpdate   *bool                   `json:"generateExistingOnPolicyUpdate,omitempty"`
	GenerateExisting                 bool                    `json:"generateExisting,omitempty"`
	UseServerSideApply               bool                    `json:"useServerSideApply,omitempty"`
	WebhookConfiguration             any                     `json:"webhookConfiguration,omitempty"`
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

// Rule is one rule of a policy; exactly one of Validate, Mutate, Generate and
// VerifyImages is set.
type Rule struct {
	Name                   string            `json:"name"`
	Context                []ContextEntry    `json:"context,omitempty"`
	MatchResources         MatchResources    `json:"match"`
	ExcludeResources       *MatchResources   `json:"exclude,omitempty"`
	ImageExtractors        map[string][]any  `json:"imageExtractors,omitempty"`
	RawAnyAllConditions    *Conditions       `json:"preconditions,omitempty"`
	CELPreconditions       []any             `json:"celPreconditions,omitempty"`
	Mutation               *Mutation         `json:"mutate,omitempty"`
	Validation             *Validation       `json:"validate,omitempty"`
	Generation             *Generation       `json:"generate,omitempty"`
	VerifyImages           []any             `json:"verifyImages,omitempty"`
	SkipBackgroundRequests *bool             `json:"skipBackgroundRequests,omitempty"`
	ReportProperties       map[string]string `json:"reportProperties,omitempty"`
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
	Message                 string                  `json:"message,omitempty"`
	FailureAction           string                  `json:"failureAction,omitempty"`
	FailureActionOverrides  []FailureActionOverride `json:"failureActionOverrides,omitempty"`
	AllowExistingViolations *bool                   `json:"allowExistingViolations,omitempty"`
	Pattern                 any                     `json:"pattern,omitempty"`
	AnyPattern              []any                   `json:"anyPattern,omitempty"`
	Deny                    *Deny                   `json:"deny,omitempty"`
	ForEach                 []ForEachValidation     `json:"foreach,omitempty"`
	PodSecurity             *PodSecurity            `json:"podSecurity,omitempty"`
	CEL                     any                     `json:"cel,omitempty"`
	Manifests               any                     `json:"manifests,omitempty"`
	Assert                  any                     `json:"assert,omitempty"`
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
}

// ExceptionSpec says which resources are exempt from which rules.
type ExceptionSpec struct {
	Background  *bool                `json:"background,omitempty"`
	Match       MatchResources       `json:"match"`
	Conditions  *Conditions          `json:"conditions,omitempty"`
	Exceptions  []ExceptionEntry     `json:"exceptions"`
	PodSecurity []PodSecurityExclude `json:"podSecurity,omitempty"`
}

// ExceptionEntry names a policy and some of its rules.
type ExceptionEntry struct {
	PolicyName string   `json:"policyName"`
	RuleNames  []string `json:"ruleNames"`
}
