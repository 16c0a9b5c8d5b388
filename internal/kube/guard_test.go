package kube_test

import (
	"errors"
	"testing"

	"github.com/verdict-dev/verdict/internal/kube"
)

// TestProtected: Verdict's namespace's Secrets, and lists of every
// namespace's Secrets, are refused; the rest is not, and nothing is when
// no namespace is protected.
func TestProtected(t *testing.T) {
	tests := map[string]struct {
		p                          kube.Protected
		group, resource, namespace string
		refused                    bool
	}{
		"Verdict's Secret":            {p: "verdict", resource: "secrets", namespace: "verdict", refused: true},
		"every namespace's Secrets":   {p: "verdict", resource: "secrets", refused: true},
		"another namespace's Secrets": {p: "verdict", resource: "secrets", namespace: "team"},
		"Verdict's ConfigMaps":        {p: "verdict", resource: "configmaps", namespace: "verdict"},
		"a CRD named secrets":         {p: "verdict", group: "example.com", resource: "secrets", namespace: "verdict"},
		"nothing protected":           {resource: "secrets", namespace: "verdict"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.p.Check(tc.group, tc.resource, tc.namespace)
			if got := errors.Is(err, kube.ErrProtected); got != tc.refused {
				t.Fatalf("Check = %v, refused %v", err, tc.refused)
			}
		})
	}
}
