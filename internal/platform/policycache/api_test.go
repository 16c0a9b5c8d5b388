package policycache

import (
	"errors"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

func TestParseAPI(t *testing.T) {
	for name, want := range map[string]string{"": APIVerdict, "verdict": APIVerdict, "kyverno": APIKyverno} {
		a, err := ParseAPI(name)
		if err != nil || a.Name != want {
			t.Errorf("ParseAPI(%q) = %q, %v; want %s", name, a.Name, err, want)
		}
	}
	if _, err := ParseAPI("kyverno.io"); !errors.Is(err, ErrUnknownAPI) {
		t.Errorf("ParseAPI(kyverno.io): %v, want ErrUnknownAPI", err)
	}
}

// Each kind where its API serves it: Kyverno's at the versions Kyverno
// 1.19 stores and serves, with their original apiVersions.
func TestAPIResources(t *testing.T) {
	tests := map[string]struct {
		api  API
		want map[string]string
	}{
		"verdict": {api: VerdictAPI, want: map[string]string{
			policy.KindClusterPolicy:            "verdict.dev/v1, Resource=clusterpolicies",
			policy.KindCleanupPolicy:            "verdict.dev/v1, Resource=cleanuppolicies",
			policy.KindValidatingPolicy:         "verdict.dev/v1, Resource=validatingpolicies",
			policy.KindNamespacedDeletingPolicy: "verdict.dev/v1, Resource=namespaceddeletingpolicies",
		}},
		"zero is verdict": {api: API{}, want: map[string]string{policy.KindPolicy: "verdict.dev/v1, Resource=policies"}},
		"kyverno": {api: KyvernoAPI, want: map[string]string{
			policy.KindClusterPolicy:              "kyverno.io/v1, Resource=clusterpolicies",
			policy.KindPolicy:                     "kyverno.io/v1, Resource=policies",
			policy.KindClusterCleanupPolicy:       "kyverno.io/v2, Resource=clustercleanuppolicies",
			policy.KindCleanupPolicy:              "kyverno.io/v2, Resource=cleanuppolicies",
			policy.KindValidatingPolicy:           "policies.kyverno.io/v1, Resource=validatingpolicies",
			policy.KindNamespacedGeneratingPolicy: "policies.kyverno.io/v1, Resource=namespacedgeneratingpolicies",
			policy.KindDeletingPolicy:             "policies.kyverno.io/v1, Resource=deletingpolicies",
			policy.KindValidatingAdmissionPolicy:  "admissionregistration.k8s.io/v1, Resource=validatingadmissionpolicies",
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			for kind, want := range tc.want {
				if gvr, ok := tc.api.Resource(kind); !ok || gvr.String() != want {
					t.Errorf("%s: %v %v, want %s", kind, gvr, ok, want)
				}
			}
		})
	}
	var ex []string
	for _, gvr := range KyvernoAPI.Exceptions() {
		ex = append(ex, gvr.String())
	}
	if len(ex) != 2 || ex[0] != "kyverno.io/v2, Resource=policyexceptions" || ex[1] != "policies.kyverno.io/v1, Resource=policyexceptions" {
		t.Errorf("Kyverno's exceptions %v", ex)
	}
	// Verdict's group requires its three CRDs; Kyverno's, none (a
	// release of Kyverno may have removed the classic kinds).
	for _, a := range []API{VerdictAPI, {}} {
		if req, opt := a.watched(); len(req) != 3 || len(opt) != 8 {
			t.Errorf("Verdict's watched kinds: required %v, optional %d", req, len(opt))
		}
	}
	req, opt := KyvernoAPI.watched()
	if len(req) != 0 || len(opt) != 12 {
		t.Errorf("Kyverno's watched kinds: required %v, optional %d", req, len(opt))
	}
}
