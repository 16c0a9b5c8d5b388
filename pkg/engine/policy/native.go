package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"

	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// The Kubernetes-native admission policies: the API server enforces
// them; Verdict evaluates them in `verdict apply` / `verdict test` and in
// background scans, for reports, as Kyverno does. Every served version
// (v1, v1beta1, v1alpha1) has the fields of v1 under the same names, so
// each is read into the v1 types.
const (
	GroupAdmissionRegistration = "admissionregistration.k8s.io"

	KindValidatingAdmissionPolicy        = "ValidatingAdmissionPolicy"
	KindValidatingAdmissionPolicyBinding = "ValidatingAdmissionPolicyBinding"
	KindMutatingAdmissionPolicy          = "MutatingAdmissionPolicy"
	KindMutatingAdmissionPolicyBinding   = "MutatingAdmissionPolicyBinding"
)

// LabelGeneratedFrom, on a ValidatingAdmissionPolicy and its binding,
// names the ValidatingPolicy Verdict generated them from (the policy's
// enforcement in the API server, not a policy of its own).
const LabelGeneratedFrom = "verdict.dev/generated-from"

// IsNativeKind reports whether kind is one of the Kubernetes-native
// admission policy kinds or their bindings.
func IsNativeKind(kind string) bool {
	switch kind {
	case KindValidatingAdmissionPolicy, KindValidatingAdmissionPolicyBinding, KindMutatingAdmissionPolicy, KindMutatingAdmissionPolicyBinding:
		return true
	}
	return false
}

// NativePolicy is a ValidatingAdmissionPolicy or a
// MutatingAdmissionPolicy (one of VAP and MAP is set) with the bindings
// that name it, sorted by name. A policy without bindings is evaluated
// as the Kyverno CLI does: on everything its matchConstraints select,
// denying.
type NativePolicy struct {
	VAP         *admissionregistrationv1.ValidatingAdmissionPolicy
	MAP         *admissionregistrationv1.MutatingAdmissionPolicy
	VAPBindings []admissionregistrationv1.ValidatingAdmissionPolicyBinding
	MAPBindings []admissionregistrationv1.MutatingAdmissionPolicyBinding
}

// BindingsVersion names the bindings at their versions ("name@rv,...",
// in the order of their names; "none" without any): it changes whenever
// a binding is added, changed or deleted.
func (np *NativePolicy) BindingsVersion() string {
	var parts []string
	for i := range np.VAPBindings {
		parts = append(parts, np.VAPBindings[i].Name+"@"+np.VAPBindings[i].ResourceVersion)
	}
	for i := range np.MAPBindings {
		parts = append(parts, np.MAPBindings[i].Name+"@"+np.MAPBindings[i].ResourceVersion)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// NativeBinding is a ValidatingAdmissionPolicyBinding or a
// MutatingAdmissionPolicyBinding (one is set).
type NativeBinding struct {
	VAP *admissionregistrationv1.ValidatingAdmissionPolicyBinding
	MAP *admissionregistrationv1.MutatingAdmissionPolicyBinding
}

// Name is the binding's name.
func (b *NativeBinding) Name() string {
	if b.VAP != nil {
		return b.VAP.Name
	}
	return b.MAP.Name
}

// PolicyName is the name of the policy the binding binds.
func (b *NativeBinding) PolicyName() string {
	if b.VAP != nil {
		return b.VAP.Spec.PolicyName
	}
	return b.MAP.Spec.PolicyName
}

// NativePolicyFromObject reads a ValidatingAdmissionPolicy or a
// MutatingAdmissionPolicy of any served version. Unknown fields are an
// error, as the API server's strict decoding makes them.
func NativePolicyFromObject(obj map[string]any) (*Policy, error) {
	kind := document.String(obj, "kind")
	np := &NativePolicy{}
	var meta *ObjectMeta
	switch kind {
	case KindValidatingAdmissionPolicy:
		np.VAP = &admissionregistrationv1.ValidatingAdmissionPolicy{}
		if err := decodeNative(obj, np.VAP); err != nil {
			return nil, err
		}
		meta = nativeMeta(np.VAP.Name, np.VAP.Labels, np.VAP.Annotations, string(np.VAP.UID), np.VAP.ResourceVersion, np.VAP.Generation)
		if err := checkVAP(np.VAP); err != nil {
			return nil, err
		}
	case KindMutatingAdmissionPolicy:
		np.MAP = &admissionregistrationv1.MutatingAdmissionPolicy{}
		if err := decodeNative(obj, np.MAP); err != nil {
			return nil, err
		}
		meta = nativeMeta(np.MAP.Name, np.MAP.Labels, np.MAP.Annotations, string(np.MAP.UID), np.MAP.ResourceVersion, np.MAP.Generation)
		if err := checkMAP(np.MAP); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: %s is no Kubernetes admission policy", ErrUnsupportedKind, kind)
	}
	return &Policy{APIVersion: document.String(obj, "apiVersion"), Kind: kind, Metadata: *meta, Native: np}, nil
}

// NativeBindingFromObject reads a ValidatingAdmissionPolicyBinding or a
// MutatingAdmissionPolicyBinding of any served version.
func NativeBindingFromObject(obj map[string]any) (*NativeBinding, error) {
	b := &NativeBinding{}
	switch kind := document.String(obj, "kind"); kind {
	case KindValidatingAdmissionPolicyBinding:
		b.VAP = &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
		if err := decodeNative(obj, b.VAP); err != nil {
			return nil, err
		}
		if err := checkBinding(kind, b.VAP.Name, b.VAP.Spec.PolicyName, b.VAP.Spec.ParamRef); err != nil {
			return nil, err
		}
		for _, a := range b.VAP.Spec.ValidationActions {
			switch a {
			case admissionregistrationv1.Deny, admissionregistrationv1.Warn, admissionregistrationv1.Audit:
			default:
				return nil, fmt.Errorf("%s %s: spec.validationActions: %q is not Deny, Warn or Audit", kind, b.VAP.Name, a)
			}
		}
	case KindMutatingAdmissionPolicyBinding:
		b.MAP = &admissionregistrationv1.MutatingAdmissionPolicyBinding{}
		if err := decodeNative(obj, b.MAP); err != nil {
			return nil, err
		}
		if err := checkBinding(kind, b.MAP.Name, b.MAP.Spec.PolicyName, b.MAP.Spec.ParamRef); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("%w: %s is no Kubernetes admission policy binding", ErrUnsupportedKind, kind)
	}
	return b, nil
}

// Bind gives each native policy the bindings that name it (those of its
// own kind), sorted by name; it replaces what the policy had. Bindings
// that name no policy of docs are left in Bindings, as they are.
func (d *Documents) Bind() {
	vaps := map[string]*NativePolicy{}
	maps := map[string]*NativePolicy{}
	for _, p := range d.Policies {
		switch np := p.Native; {
		case np == nil:
		case np.VAP != nil:
			np.VAPBindings = nil
			vaps[np.VAP.Name] = np
		default:
			np.MAPBindings = nil
			maps[np.MAP.Name] = np
		}
	}
	for _, b := range d.Bindings {
		switch {
		case b.VAP != nil && vaps[b.VAP.Spec.PolicyName] != nil:
			np := vaps[b.VAP.Spec.PolicyName]
			np.VAPBindings = append(np.VAPBindings, *b.VAP)
		case b.MAP != nil && maps[b.MAP.Spec.PolicyName] != nil:
			np := maps[b.MAP.Spec.PolicyName]
			np.MAPBindings = append(np.MAPBindings, *b.MAP)
		}
	}
	for _, np := range vaps {
		sort.SliceStable(np.VAPBindings, func(i, j int) bool { return np.VAPBindings[i].Name < np.VAPBindings[j].Name })
	}
	for _, np := range maps {
		sort.SliceStable(np.MAPBindings, func(i, j int) bool { return np.MAPBindings[i].Name < np.MAPBindings[j].Name })
	}
}

// Unbound lists the bindings that name no policy of docs, as
// "Kind name (policy)".
func (d *Documents) Unbound() []string {
	names := map[string]bool{}
	for _, p := range d.Policies {
		if p.Native != nil {
			names[p.Kind+"/"+p.Metadata.Name] = true
		}
	}
	var out []string
	for _, b := range d.Bindings {
		kind := KindValidatingAdmissionPolicy
		bkind := KindValidatingAdmissionPolicyBinding
		if b.MAP != nil {
			kind, bkind = KindMutatingAdmissionPolicy, KindMutatingAdmissionPolicyBinding
		}
		if !names[kind+"/"+b.PolicyName()] {
			out = append(out, fmt.Sprintf("%s %s (%s %s)", bkind, b.Name(), kind, b.PolicyName()))
		}
	}
	return out
}

func decodeNative(obj map[string]any, out any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("%s %s: %w", document.String(obj, "kind"), document.String(obj, "metadata", "name"), err)
	}
	return nil
}

// checkVAP checks what the API server requires of a
// ValidatingAdmissionPolicy that the evaluation relies on.
func checkVAP(p *admissionregistrationv1.ValidatingAdmissionPolicy) error {
	var errs []error
	if p.Name == "" {
		errs = append(errs, errors.New("metadata.name: required"))
	}
	if len(p.Spec.Validations) == 0 && len(p.Spec.AuditAnnotations) == 0 {
		errs = append(errs, errors.New("spec.validations: one validation or audit annotation is required"))
	}
	errs = append(errs, checkNativeCommon(p.Spec.ParamKind, p.Spec.MatchConstraints, p.Spec.FailurePolicy)...)
	for i, v := range p.Spec.Validations {
		if strings.TrimSpace(v.Expression) == "" {
			errs = append(errs, fmt.Errorf("spec.validations[%d].expression: required", i))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s %s: %w", KindValidatingAdmissionPolicy, p.Name, errors.Join(errs...))
	}
	return nil
}

// checkMAP checks what the API server requires of a
// MutatingAdmissionPolicy that the evaluation relies on.
func checkMAP(p *admissionregistrationv1.MutatingAdmissionPolicy) error {
	var errs []error
	if p.Name == "" {
		errs = append(errs, errors.New("metadata.name: required"))
	}
	if len(p.Spec.Mutations) == 0 {
		errs = append(errs, errors.New("spec.mutations: at least one mutation is required"))
	}
	errs = append(errs, checkNativeCommon(p.Spec.ParamKind, p.Spec.MatchConstraints, p.Spec.FailurePolicy)...)
	for i, m := range p.Spec.Mutations {
		switch m.PatchType {
		case admissionregistrationv1.PatchTypeApplyConfiguration:
			if m.ApplyConfiguration == nil || strings.TrimSpace(m.ApplyConfiguration.Expression) == "" {
				errs = append(errs, fmt.Errorf("spec.mutations[%d].applyConfiguration.expression: required with patchType ApplyConfiguration", i))
			}
		case admissionregistrationv1.PatchTypeJSONPatch:
			if m.JSONPatch == nil || strings.TrimSpace(m.JSONPatch.Expression) == "" {
				errs = append(errs, fmt.Errorf("spec.mutations[%d].jsonPatch.expression: required with patchType JSONPatch", i))
			}
		default:
			errs = append(errs, fmt.Errorf("spec.mutations[%d].patchType: %q is not ApplyConfiguration or JSONPatch", i, m.PatchType))
		}
	}
	switch r := p.Spec.ReinvocationPolicy; r {
	case "", admissionregistrationv1.NeverReinvocationPolicy, admissionregistrationv1.IfNeededReinvocationPolicy:
	default:
		errs = append(errs, fmt.Errorf("spec.reinvocationPolicy: %q is not Never or IfNeeded", r))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s %s: %w", KindMutatingAdmissionPolicy, p.Name, errors.Join(errs...))
	}
	return nil
}

func checkNativeCommon(pk *admissionregistrationv1.ParamKind, mc *admissionregistrationv1.MatchResources, fp *admissionregistrationv1.FailurePolicyType) []error {
	var errs []error
	if pk != nil && (pk.APIVersion == "" || pk.Kind == "") {
		errs = append(errs, errors.New("spec.paramKind: apiVersion and kind are required"))
	}
	if mc == nil || len(mc.ResourceRules) == 0 {
		errs = append(errs, errors.New("spec.matchConstraints.resourceRules: required"))
	}
	if fp != nil && *fp != admissionregistrationv1.Fail && *fp != admissionregistrationv1.Ignore {
		errs = append(errs, fmt.Errorf("spec.failurePolicy: %q is not Fail or Ignore", *fp))
	}
	return errs
}

func checkBinding(kind, name, policyName string, ref *admissionregistrationv1.ParamRef) error {
	var errs []error
	if name == "" {
		errs = append(errs, errors.New("metadata.name: required"))
	}
	if policyName == "" {
		errs = append(errs, errors.New("spec.policyName: required"))
	}
	if ref != nil {
		if (ref.Name == "") == (ref.Selector == nil) {
			errs = append(errs, errors.New("spec.paramRef: exactly one of name and selector is required"))
		}
		if a := ref.ParameterNotFoundAction; a != nil && *a != admissionregistrationv1.AllowAction && *a != admissionregistrationv1.DenyAction {
			errs = append(errs, fmt.Errorf("spec.paramRef.parameterNotFoundAction: %q is not Allow or Deny", *a))
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s %s: %w", kind, name, errors.Join(errs...))
	}
	return nil
}

func nativeMeta(name string, labels, annotations map[string]string, uid, rv string, gen int64) *ObjectMeta {
	return &ObjectMeta{Name: name, Labels: labels, Annotations: annotations, UID: uid, ResourceVersion: rv, Generation: gen}
}

// AdmissionPolicyOf is the ValidatingAdmissionPolicy and binding that
// enforce a ValidatingPolicy in the API server: its matchConstraints,
// matchConditions, variables, validations, audit annotations and
// failurePolicy as they are (a ValidatingPolicy has their fields), named
// after the policy, the binding with the policy's validationActions
// (Deny by default). A policy the API server cannot enforce as it is
// written is an error saying why: JSON mode, params, no
// matchConstraints. Whether its expressions compile in the API server's
// environment is the engine's to say (Engine.Compile of the result).
func AdmissionPolicyOf(p *Policy) (*admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.ValidatingAdmissionPolicyBinding, error) {
	s := p.VPol
	switch {
	case s == nil || p.Kind != KindValidatingPolicy:
		return nil, nil, fmt.Errorf("%s %s: only a ValidatingPolicy becomes a ValidatingAdmissionPolicy", p.Kind, p.Key())
	case s.JSONMode():
		return nil, nil, errors.New("it validates JSON payloads (evaluation mode JSON), which the API server never sees")
	case s.ParamKind != nil || s.ParamRef != nil:
		return nil, nil, errors.New("it has params")
	case s.MatchConstraints == nil || len(s.MatchConstraints.ResourceRules) == 0:
		return nil, nil, errors.New("it has no matchConstraints.resourceRules")
	}
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{}
	vap.APIVersion, vap.Kind = GroupAdmissionRegistration+"/v1", KindValidatingAdmissionPolicy
	vap.Name = p.Metadata.Name
	spec := map[string]any{
		"matchConstraints": s.MatchConstraints,
		"matchConditions":  s.MatchConditions,
		"variables":        s.Variables,
		"validations":      s.Validations,
		"auditAnnotations": s.AuditAnnotations,
	}
	if s.FailurePolicy != "" {
		spec["failurePolicy"] = s.FailurePolicy
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return nil, nil, err
	}
	if err := json.Unmarshal(b, &vap.Spec); err != nil {
		return nil, nil, err
	}
	actions := s.ValidationActions
	if len(actions) == 0 {
		actions = []string{string(admissionregistrationv1.Deny)}
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{}
	binding.APIVersion, binding.Kind = GroupAdmissionRegistration+"/v1", KindValidatingAdmissionPolicyBinding
	binding.Name = p.Metadata.Name
	binding.Spec.PolicyName = vap.Name
	for _, a := range actions {
		binding.Spec.ValidationActions = append(binding.Spec.ValidationActions, admissionregistrationv1.ValidationAction(a))
	}
	return vap, binding, nil
}
