// Package kube holds the Kubernetes client start-up shared by Verdict's
// services: clients from a kubeconfig or the in-cluster config.
package kube

import (
	_ "k8s.io/client-go/dynamic"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/tools/leaderelection"
)
