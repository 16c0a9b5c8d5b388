package generator

import (
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The labels on every generated resource: the keys of Kyverno's background
// controller (pkg/background/common), so that tooling that recognises
// Kyverno's downstream resources recognises Verdict's.
const (
	LabelManagedBy       = "app.kubernetes.io/managed-by"
	LabelPolicyName      = "generate.kyverno.io/policy-name"
	LabelPolicyNamespace = "generate.kyverno.io/policy-namespace"
	LabelRuleName        = "generate.kyverno.io/rule-name"
	LabelTriggerName     = "generate.kyverno.io/trigger-name"
	LabelTriggerUID      = "generate.kyverno.io/trigger-uid"
	LabelTriggerNS       = "generate.kyverno.io/trigger-namespace"
	LabelTriggerKind     = "generate.kyverno.io/trigger-kind"
	LabelTriggerVersion  = "generate.kyverno.io/trigger-version"
	LabelTriggerGroup    = "generate.kyverno.io/trigger-group"

	// LabelPolicyKind names the policy's kind when it is a CEL kind
	// (GeneratingPolicy, NamespacedGeneratingPolicy), which may share its
	// name with a ClusterPolicy. Verdict's own key.
	LabelPolicyKind = "generate.verdict.dev/policy-kind"

	// ManagedByValue is Verdict's value of LabelManagedBy.
	ManagedByValue = "verdict"
)

// Trigger identifies the resource that triggered a generate rule.
type Trigger struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
	UID       string
}

// Labels are the labels Verdict puts on what rule of the policy
// (policyNamespace empty for a ClusterPolicy) generates for trigger.
// Values longer than a label value may be (63 characters) are cut, as
// Kyverno cuts them, and left ending in a letter or digit.
func Labels(policyNamespace, policyName, rule string, t Trigger) map[string]string {
	return map[string]string{
		LabelManagedBy:       ManagedByValue,
		LabelPolicyName:      labelValue(policyName),
		LabelPolicyNamespace: labelValue(policyNamespace),
		LabelRuleName:        labelValue(rule),
		LabelTriggerName:     labelValue(t.Name),
		LabelTriggerUID:      labelValue(t.UID),
		LabelTriggerNS:       labelValue(t.Namespace),
		LabelTriggerKind:     labelValue(t.GVK.Kind),
		LabelTriggerVersion:  labelValue(t.GVK.Version),
		LabelTriggerGroup:    labelValue(t.GVK.Group),
	}
}

// labelValue makes s a valid label value: at most 63 characters of
// [A-Za-z0-9._-], beginning and ending with a letter or digit (other
// characters become '-').
func labelValue(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			b[i] = '-'
		}
	}
	if len(b) > 63 {
		b = b[:63]
	}
	return strings.TrimFunc(string(b), func(r rune) bool { return r > 127 || !isAlnum(byte(r)) })
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}
