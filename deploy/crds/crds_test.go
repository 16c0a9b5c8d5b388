package crds

import (
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

type crd struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Group string `json:"group"`
		Names struct {
			Kind       string   `json:"kind"`
			Plural     string   `json:"plural"`
			ShortNames []string `json:"shortNames"`
		} `json:"names"`
		Scope    string `json:"scope"`
		Versions []struct {
			Name         string         `json:"name"`
			Served       bool           `json:"served"`
			Storage      bool           `json:"storage"`
			Subresources map[string]any `json:"subresources"`
			Columns      []struct {
				Name     string `json:"name"`
				Priority int    `json:"priority"`
			} `json:"additionalPrinterColumns"`
			Schema struct {
				OpenAPIV3Schema struct {
					Type       string                    `json:"type"`
					Properties map[string]map[string]any `json:"properties"`
				} `json:"openAPIV3Schema"`
			} `json:"schema"`
		} `json:"versions"`
	} `json:"spec"`
}

// policyColumns are the columns of `kubectl get cpol` and `kubectl get
// pol`, Kyverno's.
var policyColumns = []string{"ADMISSION", "BACKGROUND", "READY", "AGE", "FAILURE POLICY",
	"VALIDATE", "MUTATE", "GENERATE", "VERIFY IMAGES", "MESSAGE"}

func TestManifests(t *testing.T) {
	want := map[string]struct {
		group, version, kind, short, scope string
		status                             bool
		columns                            []string
	}{
		"clusterpolicies.verdict.dev":                   {"verdict.dev", "v1", "ClusterPolicy", "cpol", "Cluster", true, policyColumns},
		"policies.verdict.dev":                          {"verdict.dev", "v1", "Policy", "pol", "Namespaced", true, policyColumns},
		"policyexceptions.verdict.dev":                  {"verdict.dev", "v1", "PolicyException", "polex", "Namespaced", false, []string{"Age"}},
		"clustercleanuppolicies.verdict.dev":            {"verdict.dev", "v1", "ClusterCleanupPolicy", "ccleanpol", "Cluster", true, nil},
		"cleanuppolicies.verdict.dev":                   {"verdict.dev", "v1", "CleanupPolicy", "cleanpol", "Namespaced", true, nil},
		"validatingpolicies.verdict.dev":                {"verdict.dev", "v1", "ValidatingPolicy", "vpol", "Cluster", true, []string{"AGE", "ACTIONS"}},
		"namespacedvalidatingpolicies.verdict.dev":      {"verdict.dev", "v1", "NamespacedValidatingPolicy", "nvpol", "Namespaced", true, []string{"AGE", "ACTIONS"}},
		"mutatingpolicies.verdict.dev":                  {"verdict.dev", "v1", "MutatingPolicy", "mpol", "Cluster", true, []string{"AGE"}},
		"namespacedmutatingpolicies.verdict.dev":        {"verdict.dev", "v1", "NamespacedMutatingPolicy", "nmpol", "Namespaced", true, []string{"AGE"}},
		"generatingpolicies.verdict.dev":                {"verdict.dev", "v1", "GeneratingPolicy", "gpol", "Cluster", true, []string{"AGE"}},
		"namespacedgeneratingpolicies.verdict.dev":      {"verdict.dev", "v1", "NamespacedGeneratingPolicy", "ngpol", "Namespaced", true, []string{"AGE"}},
		"imagevalidatingpolicies.verdict.dev":           {"verdict.dev", "v1", "ImageValidatingPolicy", "ivpol", "Cluster", true, []string{"AGE", "ACTIONS"}},
		"namespacedimagevalidatingpolicies.verdict.dev": {"verdict.dev", "v1", "NamespacedImageValidatingPolicy", "nivpol", "Namespaced", true, []string{"AGE", "ACTIONS"}},
		"deletingpolicies.verdict.dev":                  {"verdict.dev", "v1", "DeletingPolicy", "dpol", "Cluster", false, []string{"SCHEDULE", "AGE"}},
		"namespaceddeletingpolicies.verdict.dev":        {"verdict.dev", "v1", "NamespacedDeletingPolicy", "ndpol", "Namespaced", false, []string{"SCHEDULE", "AGE"}},
		"policyreports.wgpolicyk8s.io": {"wgpolicyk8s.io", "v1alpha2", "PolicyReport", "polr", "Namespaced", false,
			[]string{"Kind", "Name", "Pass", "Fail", "Warn", "Error", "Skip", "Age"}},
		"clusterpolicyreports.wgpolicyk8s.io": {"wgpolicyk8s.io", "v1alpha2", "ClusterPolicyReport", "cpolr", "Cluster", false,
			[]string{"Kind", "Name", "Pass", "Fail", "Warn", "Error", "Skip", "Age"}},
	}
	seen := map[string]bool{}
	for i, raw := range All() {
		var c crd
		if err := yaml.Unmarshal(raw, &c); err != nil {
			t.Fatalf("%s: %v", Names()[i], err)
		}
		w, ok := want[c.Metadata.Name]
		if !ok {
			t.Errorf("%s: unexpected CRD %q", Names()[i], c.Metadata.Name)
			continue
		}
		seen[c.Metadata.Name] = true
		if c.APIVersion != "apiextensions.k8s.io/v1" || c.Kind != "CustomResourceDefinition" {
			t.Errorf("%s: %s/%s, want apiextensions.k8s.io/v1 CustomResourceDefinition", c.Metadata.Name, c.APIVersion, c.Kind)
		}
		if c.Metadata.Name != c.Spec.Names.Plural+"."+c.Spec.Group {
			t.Errorf("%s: name is not plural.group", c.Metadata.Name)
		}
		if c.Spec.Group != w.group || c.Spec.Names.Kind != w.kind || c.Spec.Scope != w.scope {
			t.Errorf("%s: group %q kind %q scope %q", c.Metadata.Name, c.Spec.Group, c.Spec.Names.Kind, c.Spec.Scope)
		}
		if len(c.Spec.Names.ShortNames) != 1 || c.Spec.Names.ShortNames[0] != w.short {
			t.Errorf("%s: short names %v, want [%s]", c.Metadata.Name, c.Spec.Names.ShortNames, w.short)
		}
		if len(c.Spec.Versions) != 1 {
			t.Fatalf("%s: %d versions", c.Metadata.Name, len(c.Spec.Versions))
		}
		v := c.Spec.Versions[0]
		if v.Name != w.version || !v.Served || !v.Storage {
			t.Errorf("%s: version %q served %v storage %v", c.Metadata.Name, v.Name, v.Served, v.Storage)
		}
		if _, ok := v.Subresources["status"]; ok != w.status {
			t.Errorf("%s: status subresource %v, want %v", c.Metadata.Name, ok, w.status)
		}
		if v.Schema.OpenAPIV3Schema.Type != "object" {
			t.Errorf("%s: schema root type %q", c.Metadata.Name, v.Schema.OpenAPIV3Schema.Type)
		}
		if w.columns != nil {
			var got []string
			for _, col := range v.Columns {
				got = append(got, col.Name)
			}
			if len(got) != len(w.columns) {
				t.Fatalf("%s: columns %v, want %v", c.Metadata.Name, got, w.columns)
			}
			for i := range got {
				if got[i] != w.columns[i] {
					t.Errorf("%s: columns %v, want %v", c.Metadata.Name, got, w.columns)
					break
				}
			}
		}
		if w.group == "wgpolicyk8s.io" {
			for _, f := range []string{"pass", "fail", "warn", "error", "skip"} {
				summary := v.Schema.OpenAPIV3Schema.Properties["summary"]["properties"].(map[string]any)
				if typ := summary[f].(map[string]any)["type"]; typ != "integer" {
					t.Errorf("%s: summary.%s type %v", c.Metadata.Name, f, typ)
				}
			}
		} else {
			for _, f := range []string{"spec"} {
				if p := v.Schema.OpenAPIV3Schema.Properties[f]; p["x-kubernetes-preserve-unknown-fields"] != true {
					t.Errorf("%s: %s does not preserve unknown fields", c.Metadata.Name, f)
				}
			}
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("missing CRD %s", name)
		}
	}
}

// TestPolicySchemas checks what users of the policy kinds rely on: the
// fields are described (kubectl explain), Kyverno's defaults are filled in,
// and unknown fields are kept.
func TestPolicySchemas(t *testing.T) {
	tests := map[string]struct {
		defaults  map[string]any
		described []string
	}{
		"clusterpolicies.yaml": {
			defaults: map[string]any{"spec.admission": true, "spec.background": true, "spec.validationFailureAction": "Audit"},
			described: []string{"spec", "spec.rules", "spec.rules[]", "spec.rules[].validate",
				"spec.rules[].mutate", "spec.rules[].generate", "spec.rules[].match", "status"},
		},
		"policies.yaml": {
			defaults:  map[string]any{"spec.admission": true, "spec.background": true},
			described: []string{"spec", "spec.rules[].validate", "status.conditions[]"},
		},
		"policyexceptions.yaml": {
			described: []string{"spec", "spec.exceptions[]", "spec.match"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			raw, err := FS.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			var c struct {
				Spec struct {
					Versions []struct {
						Schema struct {
							OpenAPIV3Schema map[string]any `json:"openAPIV3Schema"`
						} `json:"schema"`
					} `json:"versions"`
				} `json:"spec"`
			}
			if err := yaml.Unmarshal(raw, &c); err != nil {
				t.Fatal(err)
			}
			root := c.Spec.Versions[0].Schema.OpenAPIV3Schema
			for path, want := range tc.defaults {
				if got := lookup(t, root, path)["default"]; got != want {
					t.Errorf("%s: default %v, want %v", path, got, want)
				}
			}
			for _, path := range tc.described {
				if d, _ := lookup(t, root, path)["description"].(string); d == "" {
					t.Errorf("%s: no description", path)
				}
			}
			for _, path := range []string{"spec", "spec.match"} {
				if name == "policyexceptions.yaml" || path == "spec" {
					if lookup(t, root, path)["x-kubernetes-preserve-unknown-fields"] != true {
						t.Errorf("%s: unknown fields are pruned", path)
					}
				}
			}
		})
	}
}

// lookup follows a path of property names, "[]" after a name for an
// array's items.
func lookup(t *testing.T, s map[string]any, path string) map[string]any {
	t.Helper()
	for _, p := range strings.Split(path, ".") {
		items := strings.HasSuffix(p, "[]")
		props, _ := s["properties"].(map[string]any)
		next, ok := props[strings.TrimSuffix(p, "[]")].(map[string]any)
		if ok && items {
			next, ok = next["items"].(map[string]any)
		}
		if !ok {
			t.Fatalf("%s: no %s", path, p)
		}
		s = next
	}
	return s
}
