// Package crds embeds Verdict's CustomResourceDefinitions so that programs
// (the local control plane, installers, tests) apply exactly the manifests
// shipped under deploy/crds.
//
// verdict.dev/v1: ClusterPolicy (cpol), Policy (pol), PolicyException (polex),
// ClusterCleanupPolicy (ccleanpol), CleanupPolicy (cleanpol),
// ValidatingPolicy (vpol), NamespacedValidatingPolicy (nvpol),
// MutatingPolicy (mpol), NamespacedMutatingPolicy (nmpol),
// GeneratingPolicy (gpol), NamespacedGeneratingPolicy (ngpol),
// ImageValidatingPolicy (ivpol), NamespacedImageValidatingPolicy (nivpol),
// DeletingPolicy (dpol), NamespacedDeletingPolicy (ndpol).
// wgpolicyk8s.io/v1alpha2: PolicyReport (polr), ClusterPolicyReport (cpolr).
//
// clusterpolicies.yaml, policies.yaml, policyexceptions.yaml,
// validatingpolicies.yaml, namespacedvalidatingpolicies.yaml,
// mutatingpolicies.yaml, namespacedmutatingpolicies.yaml,
// generatingpolicies.yaml, namespacedgeneratingpolicies.yaml,
// imagevalidatingpolicies.yaml, namespacedimagevalidatingpolicies.yaml,
// deletingpolicies.yaml and namespaceddeletingpolicies.yaml are
// generated from the types of pkg/engine/policy (`make crds`, see
// internal/tools/crdgen) and must not be edited; the others are hand-written.
package crds

import (
	"embed"
	"io/fs"
	"sort"
)

// FS holds one CustomResourceDefinition per YAML file.
//
//go:embed *.yaml
var FS embed.FS

// Names returns the file names of the embedded manifests, sorted.
func Names() []string {
	names, err := fs.Glob(FS, "*.yaml")
	if err != nil { // only for a malformed pattern
		panic("crds: " + err.Error())
	}
	sort.Strings(names)
	return names
}

// All returns the embedded manifests in file-name order, one
// CustomResourceDefinition each.
func All() [][]byte {
	names := Names()
	out := make([][]byte, 0, len(names))
	for _, name := range names {
		b, err := FS.ReadFile(name)
		if err != nil { // the names come from the same embedded FS
			panic("crds: " + err.Error())
		}
		out = append(out, b)
	}
	return out
}

// ReportNames are the report CRDs (wgpolicyk8s.io PolicyReport and
// ClusterPolicyReport). The chart installs them in the reporter's CRD
// mode only: in its serving mode the reporter serves the group itself.
func ReportNames() []string {
	return []string{"clusterpolicyreports.yaml", "policyreports.yaml"}
}
