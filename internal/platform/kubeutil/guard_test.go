package kubeutil_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
)

// TestProtected: Verdict's namespace's Secrets are refused, and taken
// out of lists of every namespace's Secrets; the rest is not, and nothing
// is when no namespace is protected.
func TestProtected(t *testing.T) {
	tests := map[string]struct {
		p                          kubeutil.Protected
		group, resource, namespace string
		refused                    bool
	}{
		"Verdict's Secret":            {p: "verdict", resource: "secrets", namespace: "verdict", refused: true},
		"every namespace's Secrets":   {p: "verdict", resource: "secrets"},
		"another namespace's Secrets": {p: "verdict", resource: "secrets", namespace: "team"},
		"Verdict's ConfigMaps":        {p: "verdict", resource: "configmaps", namespace: "verdict"},
		"a CRD named secrets":         {p: "verdict", group: "example.com", resource: "secrets", namespace: "verdict"},
		"nothing protected":           {resource: "secrets", namespace: "verdict"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.p.Check(tc.group, tc.resource, tc.namespace)
			if got := errors.Is(err, kubeutil.ErrProtected); got != tc.refused {
				t.Fatalf("Check = %v, refused %v", err, tc.refused)
			}
		})
	}
}

func TestProtectedFilter(t *testing.T) {
	items := []map[string]any{
		{"metadata": map[string]any{"name": "ca", "namespace": "verdict"}},
		{"metadata": map[string]any{"name": "regcred", "namespace": "team"}},
	}
	if got := kubeutil.Protected("verdict").Filter("", "configmaps", slices.Clone(items)); len(got) != 2 {
		t.Fatalf("ConfigMaps filtered: %v", got)
	}
	got := kubeutil.Protected("verdict").Filter("", "secrets", slices.Clone(items))
	if len(got) != 1 || got[0]["metadata"].(map[string]any)["name"] != "regcred" {
		t.Fatalf("Secrets of every namespace: %v", got)
	}
}
