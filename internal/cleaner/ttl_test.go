package cleaner

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
)

// TestTTLGuarded: the sweep honours the TTL label only where the TTL
// label's webhook receives the writes (issue 28, finding 12).
func TestTTLGuarded(t *testing.T) {
	f := admissionfilter.New([]string{"verdict"}, nil)
	configMaps := kubeutil.Kind{GVR: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true}
	leases := kubeutil.Kind{GVR: schema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"}, Namespaced: true}
	namespaces := kubeutil.Kind{GVR: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}}
	tests := map[string]struct {
		kind            kubeutil.Kind
		namespace, name string
		want            bool
	}{
		"a ConfigMap of a tenant":         {kind: configMaps, namespace: "team", name: "a", want: true},
		"a ConfigMap in kube-system":      {kind: configMaps, namespace: "kube-system", name: "a"},
		"a ConfigMap in Verdict's":        {kind: configMaps, namespace: "verdict", name: "a"},
		"a Lease: no webhook receives it": {kind: leases, namespace: "team", name: "a"},
		"a tenant's Namespace":            {kind: namespaces, name: "team", want: true},
		"the Namespace kube-system":       {kind: namespaces, name: "kube-system"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ttlGuarded(f, tc.kind, tc.namespace, tc.name); got != tc.want {
				t.Fatalf("guarded %v, want %v", got, tc.want)
			}
		})
	}
}
