package policy

// FromObject converts an untyped policy of any kind the engine compiles
// into a Policy: ClusterPolicy and Policy, and the CEL kinds of
// policies.kyverno.io (in any group: the caller checks it), each by its
// own conversion, which checks it.
func FromObject(obj map[string]any) (*Policy, error) {
	switch kind, _ := obj["kind"].(string); kind {
	case KindValidatingPolicy, KindNamespacedValidatingPolicy:
		return ValidatingPolicyFromObject(obj)
	case KindMutatingPolicy, KindNamespacedMutatingPolicy:
		return MutatingPolicyFromObject(obj)
	case KindGeneratingPolicy, KindNamespacedGeneratingPolicy:
		return GeneratingPolicyFromObject(obj)
	case KindImageValidatingPolicy, KindNamespacedImageValidatingPolicy:
		return ImageValidatingPolicyFromObject(obj)
	}
	return PolicyFromObject(obj)
}

// IsCELPolicyKind reports whether kind is one of the CEL policy kinds
// FromObject converts.
func IsCELPolicyKind(kind string) bool {
	switch kind {
	case KindValidatingPolicy, KindNamespacedValidatingPolicy, KindMutatingPolicy, KindNamespacedMutatingPolicy,
		KindGeneratingPolicy, KindNamespacedGeneratingPolicy, KindImageValidatingPolicy, KindNamespacedImageValidatingPolicy:
		return true
	}
	return false
}
