package policy

import "fmt"

// Manifests is a validate.manifests rule: the resource must carry a
// sigstore signature of the YAML manifest it was made from (the
// annotations k8s-manifest-sigstore writes: <domain>/message, the
// manifest gzipped, and <domain>/signature, <domain>/signature_1, ...),
// made by the attestors, and equal that manifest but for the fields
// ignored.
type Manifests struct {
	// Attestors are the sets of signers, each of which must reach its
	// count.
	Attestors []AttestorSet `json:"attestors,omitempty"`
	// AnnotationDomain is the domain of the signature annotations
	// (default cosign.sigstore.dev).
	AnnotationDomain string `json:"annotationDomain,omitempty"`
	// IgnoreFields are fields of the resource that may differ from the
	// manifest, by the objects they apply to.
	IgnoreFields []ObjectFieldBinding `json:"ignoreFields,omitempty"`
	// DryRun asks Kyverno to compare the manifest as the API server
	// would create it (a dry-run create); Verdict compares directly.
	DryRun *ManifestDryRun `json:"dryRun,omitempty"`
	// Repository is an OCI repository holding the signed manifests, rather
	// than the resource's annotations.
	Repository string `json:"repository,omitempty"`
}

// ObjectFieldBinding ignores Fields (dotted paths; "*" matches any run
// of characters, a list's elements are their indexes) in the Objects it
// names.
type ObjectFieldBinding struct {
	Fields  []string          `json:"fields,omitempty"`
	Objects []ObjectReference `json:"objects,omitempty"`
}

// ObjectReference names objects: each field set must match ("*"
// wildcards allowed); an empty one matches any.
type ObjectReference struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// ManifestDryRun is Kyverno's dry-run option of validate.manifests.
type ManifestDryRun struct {
	Enable    bool   `json:"enable,omitempty"`
	Namespace string `json:"namespace,omitempty"`
}

// check validates the rule's manifests block at path.
func (m *Manifests) check(path string, errs *FieldErrors) {
	if len(m.Attestors) == 0 {
		errs.add(path+".attestors", "%s", "at least one attestor set is required")
	}
	for i := range m.Attestors {
		checkAttestorSet(&m.Attestors[i], fmt.Sprintf("%s.attestors[%d]", path, i), errs)
	}
}
