package cli

import (
	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// clusterScoped lists the built-in and common cluster-scoped kinds. The CLI
// has no API server to ask, so it gives every other kind the "default"
// namespace when a manifest has none, as the API server would.
var clusterScoped = map[string]bool{
	"APIService":                       true,
	"CertificateSigningRequest":        true,
	"ClusterRole":                      true,
	"ClusterRoleBinding":               true,
	"ComponentStatus":                  true,
	"CSIDriver":                        true,
	"CSINode":                          true,
	"CustomResourceDefinition":         true,
	"FlowSchema":                       true,
	"IngressClass":                     true,
	"MutatingWebhookConfiguration":     true,
	"MutatingAdmissionPolicy":          true,
	"MutatingAdmissionPolicyBinding":   true,
	"Namespace":                        true,
	"Node":                             true,
	"PersistentVolume":                 true,
	"PodSecurityPolicy":                true,
	"PriorityClass":                    true,
	"PriorityLevelConfiguration":       true,
	"RuntimeClass":                     true,
	"StorageClass":                     true,
	"ValidatingAdmissionPolicy":        true,
	"ValidatingAdmissionPolicyBinding": true,
	"ValidatingWebhookConfiguration":   true,
	"VolumeAttachment":                 true,
	"VolumeAttributesClass":            true,
	"IPAddress":                        true,
	"ServiceCIDR":                      true,
	"DeviceClass":                      true,
	"TokenReview":                      true,
	"SelfSubjectReview":                true,
	"SelfSubjectAccessReview":          true,
	"SelfSubjectRulesReview":           true,
	"SubjectAccessReview":              true,
	// Policy engines and common operators.
	"ClusterPolicy":               true,
	"ClusterPolicyReport":         true,
	"ClusterCleanupPolicy":        true,
	"ClusterIssuer":               true,
	"ClusterSecretStore":          true,
	"ClusterExternalSecret":       true,
	"Project":                     true,
	"ProjectRequest":              true,
	"ClusterTask":                 true,
	"NodePool":                    true,
	"EC2NodeClass":                true,
	"NodeClass":                   true,
	"Provisioner":                 true,
	"AWSNodeTemplate":             true,
	"ClusterVersion":              true,
	"SecurityContextConstraints":  true,
	"ImageContentSourcePolicy":    true,
	"OAuth":                       true,
	"APIServer":                   true,
	"Ingress.config.openshift.io": true,
}

// defaultNamespace sets metadata.namespace to "default" on a namespaced
// resource that has none. It returns the resource, copied when changed.
func defaultNamespace(obj map[string]any) map[string]any {
	kind := document.String(obj, "kind")
	if kind == "" || clusterScoped[kind] || document.String(obj, "metadata", "namespace") != "" {
		return obj
	}
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	meta := map[string]any{}
	for k, v := range document.Map(obj, "metadata") {
		meta[k] = v
	}
	meta["namespace"] = "default"
	out["metadata"] = meta
	return out
}
