package generator

import (
	"errors"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

func TestLabels(t *testing.T) {
	got := Labels("team", "add-defaults", "config", Trigger{
		GVK: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: "team", Name: "web", UID: "u-1",
	})
	want := map[string]string{
		LabelManagedBy: "verdict", LabelPolicyName: "add-defaults", LabelPolicyNamespace: "team", LabelRuleName: "config",
		LabelTriggerName: "web", LabelTriggerUID: "u-1", LabelTriggerNS: "team", LabelTriggerKind: "Deployment",
		LabelTriggerVersion: "v1", LabelTriggerGroup: "apps",
	}
	if len(got) != len(want) {
		t.Fatalf("labels %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q", k, got[k], v)
		}
	}
	// Kyverno's keys, as its background controller writes them.
	for _, k := range []string{"generate.kyverno.io/policy-name", "generate.kyverno.io/rule-name", "generate.kyverno.io/trigger-uid", "app.kubernetes.io/managed-by"} {
		if _, ok := got[k]; !ok {
			t.Errorf("no label %s", k)
		}
	}
}

func TestLabelValue(t *testing.T) {
	tests := map[string]struct{ in, want string }{
		"plain":          {in: "web", want: "web"},
		"empty":          {in: "", want: ""},
		"dots kept":      {in: "a.b_c-d", want: "a.b_c-d"},
		"bad characters": {in: "a/b:c", want: "a-b-c"},
		"long, cut":      {in: strings.Repeat("a", 62) + "-b", want: strings.Repeat("a", 62)},
		"edges trimmed":  {in: "-x-", want: "x"},
		"non-ascii":      {in: "é", want: ""},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := labelValue(tc.in)
			if got != tc.want {
				t.Fatalf("labelValue(%q) = %q, want %q", tc.in, got, tc.want)
			}
			if errs := validation.IsValidLabelValue(got); len(errs) > 0 {
				t.Fatalf("%q is no label value: %v", got, errs)
			}
		})
	}
}

func TestNamespaceAllowed(t *testing.T) {
	cluster := &policy.Policy{Kind: policy.KindClusterPolicy, Metadata: policy.ObjectMeta{Name: "p"}}
	ns := &policy.Policy{Kind: policy.KindPolicy, Metadata: policy.ObjectMeta{Name: "p", Namespace: "team"}}
	tests := map[string]struct {
		p         *policy.Policy
		namespace string
		want      string
	}{
		"cluster policy, any namespace":   {p: cluster, namespace: "other"},
		"cluster policy, cluster-scoped":  {p: cluster},
		"namespaced policy, its own":      {p: ns, namespace: "team"},
		"namespaced policy, another":      {p: ns, namespace: "other", want: "only into namespace team, not other"},
		"namespaced policy, cluster-wide": {p: ns, want: "may not generate cluster-scoped"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := namespaceAllowed(tc.p, tc.namespace)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}

func TestPermanent(t *testing.T) {
	gr := schema.GroupResource{Resource: "configmaps"}
	tests := map[string]struct {
		err  error
		want bool
	}{
		"invalid":     {err: apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, "x", nil), want: true},
		"bad request": {err: apierrors.NewBadRequest("no"), want: true},
		"forbidden":   {err: apierrors.NewForbidden(gr, "x", errors.New("namespace is being terminated")), want: true},
		"too large":   {err: apierrors.NewRequestEntityTooLargeError("big"), want: true},
		"conflict":    {err: apierrors.NewConflict(gr, "x", errors.New("changed"))},
		"not found":   {err: apierrors.NewNotFound(gr, "x")},
		"throttled":   {err: apierrors.NewTooManyRequests("slow down", 1)},
		"unavailable": {err: apierrors.NewServiceUnavailable("later")},
		"timeout":     {err: apierrors.NewTimeoutError("slow", 1)},
		"network":     {err: errors.New("connection refused")},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Permanent(tc.err); got != tc.want {
				t.Fatalf("Permanent(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}
