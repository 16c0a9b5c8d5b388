package policy

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// ErrUnsupportedKind marks documents of a policy kind the engine does not
// evaluate (for example CEL policies).
var ErrUnsupportedKind = errors.New("unsupported policy kind")

// Documents is what a set of YAML files holds, sorted by kind.
type Documents struct {
	Policies   []*Policy
	Exceptions []*Exception
	// CELExceptions are the PolicyExceptions of policies.kyverno.io.
	CELExceptions []*CELException
	// DeletingPolicies are the DeletingPolicies and
	// NamespacedDeletingPolicies, as the cleanup policies they are (a
	// policy without matchConstraints is accepted: it selects JSON
	// payloads only, as Kyverno's CLI evaluates it). ClusterCleanupPolicies
	// and CleanupPolicies are not read here: they stay among Others.
	DeletingPolicies []*CleanupPolicy
	// Bindings are the ValidatingAdmissionPolicyBindings and
	// MutatingAdmissionPolicyBindings; Bind gives them to their policies.
	Bindings []*NativeBinding
	// Others are every other object (resources).
	Others []map[string]any
}

// IsPolicyGroup reports whether apiVersion belongs to Kyverno's or
// Verdict's policy groups.
func IsPolicyGroup(apiVersion string) bool {
	g, _, _ := strings.Cut(apiVersion, "/")
	return g == GroupKyverno || g == GroupVerdict || strings.HasSuffix(g, "."+GroupKyverno)
}

// Parse reads every document of data. source names the input in errors.
// Policies are checked with Validate; the first invalid one is an error
// that lists all its problems.
func Parse(data []byte, source string) (*Documents, error) {
	docs, err := document.DecodeAll(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	out := &Documents{}
	for _, d := range docs {
		if err := out.add(d.Object, source); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, d.Index+1, err)
		}
	}
	return out, nil
}

// Merge appends another set of documents.
func (d *Documents) Merge(o *Documents) {
	d.Policies = append(d.Policies, o.Policies...)
	d.Exceptions = append(d.Exceptions, o.Exceptions...)
	d.CELExceptions = append(d.CELExceptions, o.CELExceptions...)
	d.DeletingPolicies = append(d.DeletingPolicies, o.DeletingPolicies...)
	d.Bindings = append(d.Bindings, o.Bindings...)
	d.Others = append(d.Others, o.Others...)
}

func (d *Documents) add(obj map[string]any, source string) error {
	apiVersion := document.String(obj, "apiVersion")
	kind := document.String(obj, "kind")
	if kind == "List" {
		items, _ := obj["items"].([]any)
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				if err := d.add(m, source); err != nil {
					return err
				}
			}
		}
		return nil
	}
	if !IsPolicyGroup(apiVersion) && !strings.HasPrefix(apiVersion, "admissionregistration.k8s.io/") {
		d.Others = append(d.Others, obj)
		return nil
	}
	switch {
	case kind == KindClusterPolicy || kind == KindPolicy:
		p, err := PolicyFromObject(obj)
		if err != nil {
			return err
		}
		d.Policies = append(d.Policies, p)
	case (kind == KindValidatingPolicy || kind == KindNamespacedValidatingPolicy) && strings.HasPrefix(apiVersion, GroupPolicies+"/"):
		p, err := ValidatingPolicyFromObject(obj)
		if err != nil {
			return err
		}
		d.Policies = append(d.Policies, p)
	case (kind == KindMutatingPolicy || kind == KindNamespacedMutatingPolicy) && strings.HasPrefix(apiVersion, GroupPolicies+"/"):
		p, err := MutatingPolicyFromObject(obj)
		if err != nil {
			return err
		}
		d.Policies = append(d.Policies, p)
	case (kind == KindGeneratingPolicy || kind == KindNamespacedGeneratingPolicy) && strings.HasPrefix(apiVersion, GroupPolicies+"/"):
		p, err := GeneratingPolicyFromObject(obj)
		if err != nil {
			return err
		}
		d.Policies = append(d.Policies, p)
	case (kind == KindImageValidatingPolicy || kind == KindNamespacedImageValidatingPolicy) && strings.HasPrefix(apiVersion, GroupPolicies+"/"):
		p, err := ImageValidatingPolicyFromObject(obj)
		if err != nil {
			return err
		}
		d.Policies = append(d.Policies, p)
	case IsDeletingPolicyKind(kind) && strings.HasPrefix(apiVersion, GroupPolicies+"/"):
		p, err := deletingPolicyFromObject(obj, true)
		if err != nil {
			return err
		}
		d.DeletingPolicies = append(d.DeletingPolicies, p)
	case kind == KindPolicyException && (strings.HasPrefix(apiVersion, GroupPolicies+"/") || IsCELException(obj)):
		e, err := CELExceptionFromObject(obj)
		if err != nil {
			return err
		}
		e.ClusterWide = true // see below
		d.CELExceptions = append(d.CELExceptions, e)
	case kind == KindPolicyException:
		e, err := ExceptionFromObject(obj)
		if err != nil {
			return err
		}
		// Files read with Parse are the pipeline's (verdict apply and
		// test): their exceptions reach as far as their match says, as
		// the reference CLI reads them. The cluster's loaders
		// (ExceptionFromObject) decide for themselves.
		e.ClusterWide = true
		d.Exceptions = append(d.Exceptions, e)
	case (kind == KindValidatingAdmissionPolicy || kind == KindMutatingAdmissionPolicy) && strings.HasPrefix(apiVersion, GroupAdmissionRegistration+"/"):
		p, err := NativePolicyFromObject(obj)
		if err != nil {
			return err
		}
		d.Policies = append(d.Policies, p)
	case (kind == KindValidatingAdmissionPolicyBinding || kind == KindMutatingAdmissionPolicyBinding) && strings.HasPrefix(apiVersion, GroupAdmissionRegistration+"/"):
		b, err := NativeBindingFromObject(obj)
		if err != nil {
			return err
		}
		d.Bindings = append(d.Bindings, b)
	default:
		d.Others = append(d.Others, obj)
	}
	return nil
}

// PolicyFromObject converts an untyped ClusterPolicy or Policy, checking it
// for unknown fields and every other problem Validate finds.
func PolicyFromObject(obj map[string]any) (*Policy, error) {
	var errs FieldErrors
	checkUnknownFields(obj, policySchema, "", &errs)
	var p Policy
	if err := fromUntyped(obj, &p); err != nil {
		errs.add("", "%v", err)
		return nil, errs.ToAggregate()
	}
	errs = append(errs, Validate(&p)...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Metadata.Name, errs.ToAggregate())
	}
	return &p, nil
}

// ExceptionFromObject converts an untyped PolicyException.
func ExceptionFromObject(obj map[string]any) (*Exception, error) {
	var errs FieldErrors
	checkUnknownFields(obj, exceptionSchema, "", &errs)
	var e Exception
	if err := fromUntyped(obj, &e); err != nil {
		errs.add("", "%v", err)
	}
	if len(e.Spec.Exceptions) == 0 {
		errs.add("spec.exceptions", "at least one exception is required")
	}
	if spec, _ := obj["spec"].(map[string]any); spec["match"] == nil {
		errs.add("spec.match", "a match block is required")
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("PolicyException %s: %w", e.Metadata.Name, errs.ToAggregate())
	}
	return &e, nil
}

func fromUntyped(obj map[string]any, out any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
