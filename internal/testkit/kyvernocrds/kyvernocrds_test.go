package kyvernocrds

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// The CRDs a Kyverno installation leaves, every kind Verdict's
// KyvernoAPI reads among them.
func TestLoad(t *testing.T) {
	docs, err := Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, d := range docs {
		var crd struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal(d, &crd); err != nil {
			t.Fatal(err)
		}
		if crd.Kind != "CustomResourceDefinition" {
			t.Errorf("%s: kind %s", crd.Metadata.Name, crd.Kind)
		}
		names[crd.Metadata.Name] = true
	}
	for _, want := range []string{"clusterpolicies.kyverno.io", "policies.kyverno.io", "policyexceptions.kyverno.io", "clustercleanuppolicies.kyverno.io",
		"validatingpolicies.policies.kyverno.io", "policyexceptions.policies.kyverno.io", "policyreports.wgpolicyk8s.io"} {
		if !names[want] {
			t.Errorf("no %s among %d CRDs", want, len(names))
		}
	}
	if t.Failed() {
		t.Log(strings.Join(keys(names), "\n"))
	}
}

func keys(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
