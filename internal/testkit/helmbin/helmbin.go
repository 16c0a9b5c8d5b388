// Package helmbin finds the helm command lines the repository builds from
// their Go modules (hack/helm.sh; helm v4 pinned in hack/tools/helm/go.mod,
// helm v3 in hack/tools/helm3/go.mod) and runs them, for the chart's tests
// under deploy/helm and the harnesses that render the chart. v4 is the
// helm the chart is written for; v3 checks it still lints and renders
// there.
//
// A binary is found, in order: its environment variable (VERDICT_HELM,
// VERDICT_HELM3; `make test` sets them), else the output of hack/helm.sh,
// which builds helm when its cache is cold (a few minutes on two cores)
// and otherwise only checks a stamp.
package helmbin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// Major is a major version of helm the repository builds.
type Major int

const (
	V4 Major = 4
	V3 Major = 3
)

// Env is the environment variable naming the binary to use instead of
// building one: VERDICT_HELM for v4, VERDICT_HELM3 for v3.
func (m Major) Env() string {
	if m == V3 {
		return "VERDICT_HELM3"
	}
	return "VERDICT_HELM"
}

// cacheDir is the folder under the cache hack/helm.sh builds into.
func (m Major) cacheDir() string {
	if m == V3 {
		return "helm3"
	}
	return "helm"
}

// ErrNotFound is wrapped when helm can be neither found nor built.
var ErrNotFound = errors.New("helmbin: helm not found")

const (
	modulePath  = "github.com/verdict-dev/verdict"
	buildScript = "hack/helm.sh"
)

var (
	mu    sync.Mutex
	built = map[Major]string{}
)

// Path returns the helm binary of major version m: its environment
// variable, else what hack/helm.sh prints (building it once per cold
// cache).
func Path(ctx context.Context, m Major) (string, error) {
	if p := os.Getenv(m.Env()); p != "" {
		if err := executable(p); err != nil {
			return "", fmt.Errorf("%w (from %s): %w", ErrNotFound, m.Env(), err)
		}
		return p, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if p := built[m]; p != "" {
		return p, nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", fmt.Errorf("%w: set %s or run from the repository: %w", ErrNotFound, m.Env(), err)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(root, buildScript), strconv.Itoa(int(m)))
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s: %w\n%s", ErrNotFound, buildScript, err, stderr.String())
	}
	p := strings.TrimSpace(stdout.String())
	if err := executable(p); err != nil {
		return "", fmt.Errorf("%w: after %s: %w", ErrNotFound, buildScript, err)
	}
	built[m] = p
	return p, nil
}

// Cached returns the helm binary of major version m when it needs no
// build: its environment variable's, or the one hack/helm.sh left in the
// repository's cache (possibly built from an older pin). ok is false when
// neither exists.
func Cached(m Major) (path string, ok bool) {
	if p := os.Getenv(m.Env()); p != "" {
		return p, executable(p) == nil
	}
	root, err := RepoRoot()
	if err != nil {
		return "", false
	}
	cache := os.Getenv("VERDICT_CACHE")
	if cache == "" {
		cache = filepath.Join(root, ".cache")
	}
	p := filepath.Join(cache, m.cacheDir(), "bin", "helm")
	return p, executable(p) == nil
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}

// RepoRoot walks up from the working directory (a test runs in its
// package's directory) to this module's go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && isModule(b) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

func isModule(gomod []byte) bool {
	for _, line := range strings.Split(string(gomod), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == "module" {
			return f[1] == modulePath
		}
	}
	return false
}

// Result is the outcome of one helm run.
type Result struct {
	Stdout, Stderr []byte
	// Err is the run's error (an *exec.ExitError when helm exited
	// non-zero).
	Err error
}

// Run runs helm with args, in an empty helm home (no repositories, no
// plugins, no cache of the user's) so that a run depends on its arguments
// only.
func Run(ctx context.Context, helm string, home string, args ...string) Result {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Env = append(os.Environ(),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_DATA_HOME="+filepath.Join(home, "data"),
		"KUBECONFIG="+filepath.Join(home, "kubeconfig-none"),
	)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return Result{Stdout: stdout.Bytes(), Stderr: stderr.Bytes(), Err: err}
}
