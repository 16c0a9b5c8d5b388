// Package kube holds the Kubernetes start-up shared by Verdict's services:
// client-go's logging routed into zerolog.
package kube
