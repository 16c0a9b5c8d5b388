// Package kube holds the Kubernetes pieces shared by Verdict's services:
// client-go's logging routed into zerolog, and the engine's
// ResourceLister served from the cluster (Lister).
package kubeutil
