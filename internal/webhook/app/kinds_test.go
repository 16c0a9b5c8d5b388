package app

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestBuiltinKinds: files mode finds the kind of the built-in resources
// that have subresources policies name (Pod/exec, Deployment/scale).
func TestBuiltinKinds(t *testing.T) {
	m := builtinKinds()
	for gvr, want := range map[schema.GroupVersionResource]schema.GroupVersionKind{
		{Version: "v1", Resource: "pods"}:                        {Version: "v1", Kind: "Pod"},
		{Group: "apps", Version: "v1", Resource: "deployments"}:  {Group: "apps", Version: "v1", Kind: "Deployment"},
		{Group: "apps", Version: "v1", Resource: "statefulsets"}: {Group: "apps", Version: "v1", Kind: "StatefulSet"},
		{Version: "v1", Resource: "services"}:                    {Version: "v1", Kind: "Service"},
	} {
		got, err := m.KindFor(gvr)
		if err != nil || got != want {
			t.Errorf("%v: %v %v, want %v", gvr, got, err, want)
		}
	}
	if _, err := m.KindFor(schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"}); err == nil {
		t.Error("an unknown resource has a kind")
	}
}
