package webhook

import (
	"slices"
	"strings"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// A cluster policy and a tenant's Policy in team, each with an audited
// validate rule and a generate rule on the same ConfigMaps.
const (
	clusterAuditGenerate = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: cluster-policy}
spec:
  rules:
  - name: named
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
  - name: gen
    match: {any: [{resources: {kinds: [ConfigMap], names: ["trigger-*"]}}]}
    generate: {apiVersion: v1, kind: ConfigMap, name: from-cluster, namespace: "{{request.object.metadata.namespace}}", data: {data: {a: b}}}
`
	tenantAuditGenerate = `apiVersion: verdict.dev/v1
kind: Policy
metadata: {name: tenant-policy, namespace: team}
spec:
  rules:
  - name: named
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
  - name: gen
    match: {any: [{resources: {kinds: [ConfigMap], names: ["trigger-*"]}}]}
    generate: {apiVersion: v1, kind: ConfigMap, name: from-team, namespace: team, data: {data: {a: b}}}
`
)

// TestValidateEndpointScopes: each validate endpoint evaluates the
// policies of its scope, and publishes their results and work only:
// /validate-cluster the cluster policies (the shared webhooks),
// /validate-namespaced the namespaced policies of the request's namespace
// (a tenant's webhook), /validate every policy. A request in the
// tenant's namespace that the API server sends through both webhooks
// has each policy's result and work published once.
func TestValidateEndpointScopes(t *testing.T) {
	trigger := func(ns string) map[string]any {
		return map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": "trigger-1", "namespace": ns, "uid": "uid-trigger-" + ns},
		}
	}
	tests := map[string]struct {
		paths     []string
		namespace string
		want      []string // the policies whose results and work are published
	}{
		"shared webhook":                  {paths: []string{PathValidateCluster}, namespace: "team", want: []string{"cluster-policy"}},
		"tenant's webhook":                {paths: []string{PathValidateNamespaced}, namespace: "team", want: []string{"team/tenant-policy"}},
		"both, as the API server sends":   {paths: []string{PathValidateCluster, PathValidateNamespaced}, namespace: "team", want: []string{"cluster-policy", "team/tenant-policy"}},
		"every policy":                    {paths: []string{PathValidate}, namespace: "team", want: []string{"cluster-policy", "team/tenant-policy"}},
		"tenant's endpoint elsewhere":     {paths: []string{PathValidateNamespaced}, namespace: "other"},
		"shared webhook in another place": {paths: []string{PathValidateCluster}, namespace: "other", want: []string{"cluster-policy"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			h := newHarness(t, staticSource(t, clusterAuditGenerate, tenantAuditGenerate), testConfig())
			for i, path := range tc.paths {
				// The API server gives each webhook call a uid of its own.
				ar := reviewOf(t, admissionv1.Create, trigger(tc.namespace), func(r *admissionv1.AdmissionRequest) {
					r.UID = types.UID("call-" + string(rune('a'+i)))
				})
				if resp := h.admit(path, ar); !resp.Allowed {
					t.Fatalf("%s denied: %+v", path, resp.Result)
				}
			}
			var results, work []string
			for _, ev := range h.results.Events() {
				results = append(results, ev.Policy.Key)
			}
			for _, it := range h.work.Items() {
				work = append(work, it.Policy.Key)
			}
			slices.Sort(results)
			slices.Sort(work)
			if !slices.Equal(results, tc.want) || !slices.Equal(work, tc.want) {
				t.Fatalf("results of %q and work of %q, want each of %q once", results, work, tc.want)
			}
		})
	}
}

// A cluster policy labels Pods; a tenant's Policy in team appends a
// sidecar to its Pods (a list entry: applied twice, there would be two).
const (
	clusterLabel = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: cluster-label}
spec:
  rules:
  - name: label
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate: {patchStrategicMerge: {metadata: {labels: {scanned: "yes"}}}}
`
	tenantSidecar = `apiVersion: verdict.dev/v1
kind: Policy
metadata: {name: sidecar, namespace: team}
spec:
  rules:
  - name: add
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
      patchesJson6902: |-
        - op: add
          path: /spec/containers/-
          value: {name: proxy, image: registry.example.com/proxy:v1}
`
)

// TestMutateEachPolicyOnce: the API server calls the shared mutating
// webhook, then the tenant's, each on the object the previous one
// patched. Each endpoint applies the mutations of its own policies, so
// the cluster policy's label and the tenant's sidecar are each applied
// once (with every policy on both calls, the sidecar was appended twice).
func TestMutateEachPolicyOnce(t *testing.T) {
	h := newHarness(t, staticSource(t, clusterLabel, tenantSidecar), testConfig())
	cur := pod("web", inNamespace("team"))
	for _, path := range []string{PathMutateCluster, PathMutateNamespaced} {
		ar := reviewOf(t, admissionv1.Create, cur, func(r *admissionv1.AdmissionRequest) { r.UID = types.UID("call-" + strings.TrimPrefix(path, "/")) })
		resp := h.admit(path, ar)
		if !resp.Allowed || resp.Patch == nil {
			t.Fatalf("%s: response %+v", path, resp)
		}
		p, err := jsonpatch.DecodePatch(resp.Patch)
		if err != nil {
			t.Fatalf("%s: patch %s: %v", path, resp.Patch, err)
		}
		patched, err := p.Apply(ar.Request.Object.Raw)
		if err != nil {
			t.Fatalf("%s: apply %s: %v", path, resp.Patch, err)
		}
		v, err := document.Decode(patched)
		if err != nil {
			t.Fatal(err)
		}
		cur = v.(map[string]any)
		if strings.Contains(path, "cluster") && strings.Contains(string(resp.Patch), "proxy") {
			t.Fatalf("the shared webhook's call applied the tenant's policy: %s", resp.Patch)
		}
	}
	var names []string
	for _, c := range cur["spec"].(map[string]any)["containers"].([]any) {
		names = append(names, document.String(c.(map[string]any), "name"))
	}
	if !slices.Equal(names, []string{"app", "proxy"}) {
		t.Fatalf("containers %q, want app and one proxy", names)
	}
	if document.String(cur, "metadata", "labels", "scanned") != "yes" {
		t.Fatalf("labels %v", cur["metadata"])
	}
	// Outside the tenant's namespace its endpoint changes nothing.
	resp := h.admit(PathMutateNamespaced, reviewOf(t, admissionv1.Create, pod("elsewhere", inNamespace("other"))))
	if !resp.Allowed || resp.Patch != nil {
		t.Fatalf("response %+v", resp)
	}
}
