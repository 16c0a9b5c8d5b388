//go:build tools

// Package tools pins the helm v3 command line this module builds
// (hack/helm.sh 3): the chart must also lint and render under helm v3.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
