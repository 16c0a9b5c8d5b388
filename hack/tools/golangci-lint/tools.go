//go:build tools

// Package tools pins the golangci-lint command line this module builds
// (hack/golangci-lint.sh).
package tools

import _ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
