// Package kyvernocrds gives tests Kyverno's own CustomResourceDefinitions,
// as a Kyverno installation leaves them in a cluster: kyverno.io,
// policies.kyverno.io and the wgpolicyk8s.io reports, read from Kyverno's
// source at a released version, which the Go module proxy serves (the
// module's zip holds config/crds, which Kyverno's chart installs). Nothing
// of Kyverno's is copied into this repository.
package kyvernocrds

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
)

// Version is the Kyverno release whose CRDs tests install: the release
// Verdict is measured against (docs/conformance.md).
const Version = "v1.19.0"

// Module is Kyverno's Go module.
const Module = "github.com/kyverno/kyverno"

// Folders of config/crds that a Kyverno installation's CRDs come from.
var Folders = []string{"kyverno", "policies.kyverno.io", "policyreport"}

// ErrNoCRDs is returned when the module holds none of the CRDs.
var ErrNoCRDs = errors.New("kyvernocrds: no CRDs in the module")

// Load downloads Kyverno's module at Version into the module cache (once:
// `go mod download`, from GOPROXY) and returns its CRDs, one YAML
// document each, sorted by file name within each of Folders.
func Load(ctx context.Context) ([][]byte, error) {
	dir, err := moduleDir(ctx)
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, folder := range Folders {
		files, err := filepath.Glob(filepath.Join(dir, "config", "crds", folder, "*.yaml"))
		if err != nil {
			return nil, err
		}
		sort.Strings(files)
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			out = append(out, b)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: %s@%s in %s", ErrNoCRDs, Module, Version, dir)
	}
	return out, nil
}

// moduleDir is where the go command extracted the module.
func moduleDir(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", Module+"@"+Version)
	// Outside any module: the download is Kyverno's alone, and this
	// repository's go.mod does not list it.
	cmd.Dir = os.TempDir()
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=mod", "GO111MODULE=on")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kyvernocrds: go mod download %s@%s: %w\n%s", Module, Version, err, stderr.String())
	}
	var info struct {
		Dir   string
		Error string
	}
	if err := json.Unmarshal(out, &info); err != nil {
		return "", fmt.Errorf("kyvernocrds: go mod download output: %w", err)
	}
	if info.Error != "" || info.Dir == "" {
		return "", fmt.Errorf("kyvernocrds: go mod download %s@%s: %s", Module, Version, info.Error)
	}
	return info.Dir, nil
}
