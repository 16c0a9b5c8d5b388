//go:build tools

// Package tools pins the helm command line this module builds
// (hack/helm.sh).
package tools

import _ "helm.sh/helm/v4/cmd/helm"
