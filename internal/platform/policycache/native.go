package policycache

import (
	"sort"
	"strings"

	"github.com/rs/zerolog"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// The Kubernetes-native admission policies, which the API server
// enforces: the reporter watches them (WithNativePolicies) so that its
// background scans report on them, as Kyverno does. The webhooks never
// do: their answers are the API server's to give.
var (
	ValidatingAdmissionPolicies       = schema.GroupVersionResource{Group: policy.GroupAdmissionRegistration, Version: "v1", Resource: "validatingadmissionpolicies"}
	ValidatingAdmissionPolicyBindings = schema.GroupVersionResource{Group: policy.GroupAdmissionRegistration, Version: "v1", Resource: "validatingadmissionpolicybindings"}
	// MutatingAdmissionPolicies and their bindings are watched at the
	// newest of these versions the API server serves.
	mutatingAdmissionPolicyVersions = []string{"v1", "v1beta1", "v1alpha1"}
)

const (
	resourceMAP  = "mutatingadmissionpolicies"
	resourceMAPB = "mutatingadmissionpolicybindings"
)

// WithNativePolicies makes the cache watch ValidatingAdmissionPolicies
// and MutatingAdmissionPolicies with their bindings, where the API
// server serves them, and compile them into the set (before Start). Only
// the reporter sets it: a webhook must never evaluate what the API server
// enforces.
func (c *Cache) WithNativePolicies() *Cache {
	c.native = true
	return c
}

// servedNative returns the native policy resources the API server
// serves: VAPs and their bindings at v1, MAPs and theirs at the newest
// version served. Discovery that fails leaves them out, said so: the
// scans then cover Verdict's own kinds only.
func servedNative(kube kubernetes.Interface, log zerolog.Logger) []schema.GroupVersionResource {
	var out []schema.GroupVersionResource
	has := func(version string, resources ...string) bool {
		list, err := kube.Discovery().ServerResourcesForGroupVersion(policy.GroupAdmissionRegistration + "/" + version)
		if err != nil {
			return false
		}
		served := map[string]bool{}
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
		for _, r := range resources {
			if !served[r] {
				return false
			}
		}
		return true
	}
	if has("v1", ValidatingAdmissionPolicies.Resource, ValidatingAdmissionPolicyBindings.Resource) {
		out = append(out, ValidatingAdmissionPolicies, ValidatingAdmissionPolicyBindings)
	} else {
		log.Warn().Str(logkey.Resource, ValidatingAdmissionPolicies.Resource).Msg("native policy kind not served: not watched")
	}
	for _, v := range mutatingAdmissionPolicyVersions {
		if has(v, resourceMAP, resourceMAPB) {
			return append(out,
				schema.GroupVersionResource{Group: policy.GroupAdmissionRegistration, Version: v, Resource: resourceMAP},
				schema.GroupVersionResource{Group: policy.GroupAdmissionRegistration, Version: v, Resource: resourceMAPB})
		}
	}
	log.Info().Str(logkey.Resource, resourceMAP).Msg("native policy kind not served (MutatingAdmissionPolicy needs its feature gate before v1): not watched")
	return out
}

// nativeBindings gathers the stored bindings of the native policies by
// the kind and name of the policy they bind, sorted by name, with a
// version string of each set (the names and resourceVersions), so a
// policy is compiled again when one of its bindings changes.
func (c *Cache) nativeBindings() (map[string][]*policy.NativeBinding, map[string]string) {
	byPolicy := map[string][]*policy.NativeBinding{}
	versions := map[string][]string{}
	for _, gr := range []schema.GroupResource{ValidatingAdmissionPolicyBindings.GroupResource(), {Group: policy.GroupAdmissionRegistration, Resource: resourceMAPB}} {
		inf := c.byResource[gr]
		if inf == nil {
			continue
		}
		for _, obj := range inf.GetStore().List() {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			b, err := policy.NativeBindingFromObject(u.Object)
			if err != nil {
				// The API server validated it; a binding it holds that
				// does not read is logged and left out.
				c.log.Warn().Err(err).Str(logkey.Policy, u.GetName()).Msg("binding left out")
				continue
			}
			kind := policy.KindValidatingAdmissionPolicy
			if b.MAP != nil {
				kind = policy.KindMutatingAdmissionPolicy
			}
			id := kind + "/" + b.PolicyName()
			byPolicy[id] = append(byPolicy[id], b)
			versions[id] = append(versions[id], u.GetName()+"@"+u.GetResourceVersion())
		}
	}
	out := make(map[string]string, len(versions))
	for id, v := range versions {
		sort.Strings(v)
		out[id] = strings.Join(v, ",")
		bs := byPolicy[id]
		sort.Slice(bs, func(i, j int) bool { return bs[i].Name() < bs[j].Name() })
	}
	return byPolicy, out
}

// nativePolicy reads a stored native policy with its bindings.
func nativePolicy(obj map[string]any, bindings []*policy.NativeBinding) (*policy.Policy, error) {
	p, err := policy.NativePolicyFromObject(obj)
	if err != nil {
		return nil, err
	}
	docs := &policy.Documents{Policies: []*policy.Policy{p}, Bindings: bindings}
	docs.Bind()
	return p, nil
}

// isNativeBinding reports whether kind is a native policy binding, which
// the rebuild reads with its policy.
func isNativeBinding(kind string) bool {
	return kind == policy.KindValidatingAdmissionPolicyBinding || kind == policy.KindMutatingAdmissionPolicyBinding
}
