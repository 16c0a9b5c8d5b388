package registrar

import (
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PathValidateTTL is where the TTL label's webhook points
// (internal/webhook PathValidateTTL).
const PathValidateTTL = "/validate-ttl"

// LabelTTL is Kyverno's TTL label, which the cleaner honours.
const LabelTTL = "cleanup.kyverno.io/ttl"

// ttlSetCondition keeps from the TTL webhook the writes that leave the
// label as it is or remove it: only a write that sets the label or
// changes its value is sent, so while the webhook is down (it fails
// closed) nothing else about a labelled object is refused: updates,
// finalizers removed, the label taken off.
var ttlSetCondition = admissionregistrationv1.MatchCondition{
	Name: "verdict-ttl-label-set",
	Expression: `has(object.metadata.labels) && '` + LabelTTL + `' in object.metadata.labels && ` +
		`(oldObject == null || !has(oldObject.metadata.labels) || !('` + LabelTTL + `' in oldObject.metadata.labels) || ` +
		`oldObject.metadata.labels['` + LabelTTL + `'] != object.metadata.labels['` + LabelTTL + `'])`,
}

// ttlWebhook sends the API server's creates and updates of every object
// that carries the TTL label (before or after the write: an
// objectSelector is matched against both) to the webhook, which admits
// the label only from whoever may delete the object (the cleaner deletes
// it with its own rights). It fails closed: a label no one checked would
// be honoured all the same. The objectSelector and ttlSetCondition keep
// every other write away, and the namespaces and resources the filter
// excludes never reach it (the cleaner does not honour the label there
// either).
func ttlWebhook(o Options) admissionregistrationv1.ValidatingWebhook {
	scope := admissionregistrationv1.AllScopes
	timeout := int32(10)
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule: admissionregistrationv1.Rule{
			APIGroups:   []string{"*"},
			APIVersions: []string{"*"},
			Resources:   []string{"*"},
			Scope:       &scope,
		},
	}}
	return admissionregistrationv1.ValidatingWebhook{
		Name:              "ttl.verdict.dev",
		ClientConfig:      clientConfig(PathValidateTTL, o),
		Rules:             rules,
		FailurePolicy:     failurePolicy(true),
		MatchPolicy:       &matchEquivalent,
		NamespaceSelector: namespaceSelector(o, nil),
		ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: LabelTTL, Operator: metav1.LabelSelectorOpExists,
		}}},
		MatchConditions:         append(matchConditions(o, rules), ttlSetCondition),
		SideEffects:             &sideEffectsNone,
		TimeoutSeconds:          &timeout,
		AdmissionReviewVersions: []string{"v1"},
	}
}
