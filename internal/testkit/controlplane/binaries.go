package controlplane

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// ErrBinariesNotFound is wrapped when the control-plane binaries can be
// neither found nor built.
var ErrBinariesNotFound = errors.New("controlplane: binaries not found")

const (
	binEtcd              = "etcd"
	binAPIServer         = "kube-apiserver"
	binControllerManager = "kube-controller-manager"

	modulePath  = "github.com/verdict-dev/verdict"
	buildScript = "hack/controlplane.sh"
)

// The result of a successful run of the build script, once per process.
var (
	scriptMu  sync.Mutex
	scriptBin string
)

// EnsureBinaries returns the directory holding etcd, kube-apiserver and
// kube-controller-manager: the WithBinDir option, else
// $VERDICT_CONTROLPLANE_BIN, else the output of hack/controlplane.sh, which
// builds them when its cache is cold (about ten minutes on two cores).
// A TestMain can call it before m.Run so that a cold build does not count
// against a test's deadline.
func EnsureBinaries(ctx context.Context, opts ...Option) (string, error) {
	cfg := defaultConfig()
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return "", err
		}
	}
	return ensureBinaries(ctx, &cfg)
}

func ensureBinaries(ctx context.Context, cfg *config) (string, error) {
	dir, source := cfg.binDir, "WithBinDir"
	if dir == "" {
		dir, source = os.Getenv(envBin), envBin
	}
	if dir != "" {
		if err := checkBinaries(dir); err != nil {
			return "", fmt.Errorf("%w (from %s): %w", ErrBinariesNotFound, source, err)
		}
		return dir, nil
	}

	scriptMu.Lock()
	defer scriptMu.Unlock()
	if scriptBin != "" {
		return scriptBin, nil
	}
	root, err := repoRoot()
	if err != nil {
		return "", fmt.Errorf("%w: set %s or run from the repository: %w", ErrBinariesNotFound, envBin, err)
	}
	dir, err = runBuildScript(ctx, root, cfg.buildOutput)
	if err != nil {
		return "", err
	}
	if err := checkBinaries(dir); err != nil {
		return "", fmt.Errorf("%w: after %s: %w", ErrBinariesNotFound, buildScript, err)
	}
	scriptBin = dir
	return dir, nil
}

func checkBinaries(dir string) error {
	for _, name := range []string{binEtcd, binAPIServer, binControllerManager} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		if fi.IsDir() || fi.Mode()&0o111 == 0 {
			return fmt.Errorf("%s is not an executable file", filepath.Join(dir, name))
		}
	}
	return nil
}

// repoRoot walks up from the working directory (a test runs in its package
// directory) to the go.mod of this module.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if isRepoRoot(dir) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s above the working directory", modulePath)
		}
		dir = parent
	}
}

func isRepoRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) == 2 && fields[0] == "module" {
			if fields[1] != modulePath {
				return false
			}
			_, err := os.Stat(filepath.Join(dir, buildScript))
			return err == nil
		}
	}
	return false
}

// runBuildScript runs hack/controlplane.sh under an exclusive lock on the
// cache, so that test binaries of several packages started together build
// once. The lock's descriptor is inherited by the script: if this process
// is killed mid-build (go test's own deadline), the build carries on and
// the next run waits for it instead of starting a second one.
func runBuildScript(ctx context.Context, root string, out io.Writer) (string, error) {
	cache := os.Getenv("VERDICT_CACHE")
	if cache == "" {
		cache = filepath.Join(root, ".cache")
	}
	cache = filepath.Join(cache, "controlplane")
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", fmt.Errorf("controlplane: build cache: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(cache, ".build.lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return "", fmt.Errorf("controlplane: build lock: %w", err)
	}
	defer func() { _ = lock.Close() }() // the script holds its own copy
	if err := flock(ctx, lock, out); err != nil {
		return "", err
	}

	if checkBinaries(filepath.Join(cache, "bin")) != nil {
		fmt.Fprintf(out, "controlplane: no cached control-plane binaries in %s: building them (about ten minutes cold on two cores).\n"+
			"controlplane: under go test, give -timeout 30m, or run %s first. If this run is killed mid-build, the build\n"+
			"controlplane: carries on and the next run waits for it.\n", cache, buildScript)
	}
	var stdout bytes.Buffer
	stderr := &tailWriter{max: 8 << 10}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, buildScript))
	cmd.Dir = root
	cmd.Stdout = &stdout
	cmd.Stderr = io.MultiWriter(out, stderr)
	cmd.ExtraFiles = []*os.File{lock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%w: %s: %w\n%s", ErrBinariesNotFound, buildScript, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	dir := strings.TrimSpace(lines[len(lines)-1])
	if dir == "" {
		return "", fmt.Errorf("%w: %s printed no bin directory", ErrBinariesNotFound, buildScript)
	}
	return dir, nil
}

func flock(ctx context.Context, f *os.File, out io.Writer) error {
	told := false
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return fmt.Errorf("controlplane: build lock: %w", err)
		}
		if !told {
			fmt.Fprintf(out, "controlplane: waiting for another build of the control plane (lock %s)\n", f.Name())
			told = true
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("controlplane: waiting for the build lock: %w", ctx.Err())
		case <-time.After(time.Second):
		}
	}
}

// tailWriter keeps the last max bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if over := len(w.buf) - w.max; over > 0 {
		w.buf = append(w.buf[:0], w.buf[over:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}
