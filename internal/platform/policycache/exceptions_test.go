package policycache_test

import (
	"errors"
	"testing"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
)

// TestExceptionConfigAdmit: which namespace's exceptions count, and
// which reach every namespace, under each setting; namespaces that are
// no namespace names are refused at start.
func TestExceptionConfigAdmit(t *testing.T) {
	for name, tc := range map[string]struct {
		config      policycache.ExceptionConfig
		namespace   string
		clusterWide bool
		err         error
	}{
		"default":                          {namespace: "team-b"},
		"an exception namespace":           {config: policycache.ExceptionConfig{Namespaces: []string{"policy-admin"}}, namespace: "policy-admin", clusterWide: true},
		"outside the exception namespaces": {config: policycache.ExceptionConfig{Namespaces: []string{"policy-admin"}}, namespace: "team-b", err: policycache.ErrExceptionNamespace},
		"disabled":                         {config: policycache.ExceptionConfig{Disabled: true, Namespaces: []string{"policy-admin"}}, namespace: "policy-admin", err: policycache.ErrExceptionsDisabled},
	} {
		t.Run(name, func(t *testing.T) {
			cw, err := tc.config.Admit(tc.namespace)
			if cw != tc.clusterWide || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Errorf("Admit(%s) = %v, %v; want %v, %v", tc.namespace, cw, err, tc.clusterWide, tc.err)
			}
		})
	}
	if err := (policycache.ExceptionConfig{Namespaces: []string{"policy-admin", "Bad_NS", ""}}).Validate(); !errors.Is(err, policycache.ErrInvalidExceptionConfig) {
		t.Errorf("invalid namespaces: %v", err)
	}
	if err := (policycache.ExceptionConfig{Namespaces: []string{"policy-admin"}}).Validate(); err != nil {
		t.Errorf("valid namespaces: %v", err)
	}
}
