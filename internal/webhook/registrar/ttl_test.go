package registrar

import (
	"slices"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
)

// TestBuildGuardsTTL: with GuardTTL, the validating configuration sends
// every create and update of an object carrying the TTL label (and only
// those) to PathValidateTTL, failing closed, outside the excluded
// namespaces and resources; without it, there is no such webhook (issue
// 28, finding 12).
func TestBuildGuardsTTL(t *testing.T) {
	filter := admissionfilter.New([]string{"verdict"}, nil)
	tests := map[string]struct {
		guard bool
	}{
		"guarded":   {guard: true},
		"unguarded": {},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, val, err := Build(nil, table, Options{URL: "https://x", Filter: filter, GuardTTL: tc.guard})
			if err != nil {
				t.Fatal(err)
			}
			var hook *admissionregistrationv1.ValidatingWebhook
			for i := range val.Webhooks {
				if val.Webhooks[i].Name == "ttl.verdict.dev" {
					hook = &val.Webhooks[i]
				}
			}
			if !tc.guard {
				if hook != nil {
					t.Fatal("a TTL webhook without GuardTTL")
				}
				return
			}
			if hook == nil {
				t.Fatal("no TTL webhook")
			}
			if *hook.ClientConfig.URL != "https://x"+PathValidateTTL || *hook.FailurePolicy != admissionregistrationv1.Fail {
				t.Errorf("url %s, failure policy %s", *hook.ClientConfig.URL, *hook.FailurePolicy)
			}
			want := metav1.LabelSelectorRequirement{Key: LabelTTL, Operator: metav1.LabelSelectorOpExists}
			if sel := hook.ObjectSelector; len(sel.MatchExpressions) != 1 || sel.MatchExpressions[0].Key != want.Key || sel.MatchExpressions[0].Operator != want.Operator {
				t.Errorf("object selector %+v", sel)
			}
			if len(hook.Rules) != 1 || hook.Rules[0].Resources[0] != "*" || len(hook.Rules[0].Operations) != 2 {
				t.Errorf("rules %+v", hook.Rules)
			}
			if ns := hook.NamespaceSelector.MatchExpressions[0]; ns.Operator != metav1.LabelSelectorOpNotIn || !slices.Contains(ns.Values, "verdict") || !slices.Contains(ns.Values, "kube-system") {
				t.Errorf("namespace selector %+v", hook.NamespaceSelector)
			}
			if len(hook.MatchConditions) != 2 || hook.MatchConditions[0].Expression != filter.Expression() || hook.MatchConditions[1] != ttlSetCondition {
				t.Errorf("match conditions %+v", hook.MatchConditions)
			}
		})
	}
}
