package controlplane

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// ErrInvalidOption is wrapped by the errors of options given bad values.
var ErrInvalidOption = errors.New("controlplane: invalid option")

// Option configures Start.
type Option func(*config) error

type config struct {
	binDir            string
	controllerManager bool
	installCRDs       bool
	startTimeout      time.Duration
	stopTimeout       time.Duration
	rootDir           string
	keepDir           bool
	apiServerArgs     []string
	controllerMgrArgs []string
	etcdArgs          []string
	buildOutput       io.Writer
}

func defaultConfig() config {
	return config{
		installCRDs:  true,
		startTimeout: 2 * time.Minute,
		stopTimeout:  15 * time.Second,
		keepDir:      os.Getenv(envKeep) != "" && os.Getenv(envKeep) != "0",
		buildOutput:  os.Stderr,
	}
}

const (
	envBin  = "VERDICT_CONTROLPLANE_BIN"
	envKeep = "VERDICT_CONTROLPLANE_KEEP"
)

// WithBinDir uses the etcd, kube-apiserver and kube-controller-manager
// binaries in dir instead of looking them up or building them.
func WithBinDir(dir string) Option {
	return func(c *config) error {
		if dir == "" {
			return fmt.Errorf("%w: empty bin dir", ErrInvalidOption)
		}
		c.binDir = dir
		return nil
	}
}

// WithControllerManager also starts kube-controller-manager (garbage
// collection of owned objects, Deployment → ReplicaSet → Pod, default
// service accounts and their tokens, namespace deletion). Start then waits
// until the default service account of the default namespace exists.
func WithControllerManager() Option {
	return func(c *config) error {
		c.controllerManager = true
		return nil
	}
}

// WithoutCRDs skips installing Verdict's CRDs.
func WithoutCRDs() Option {
	return func(c *config) error {
		c.installCRDs = false
		return nil
	}
}

// WithStartTimeout bounds start-up (not a build of the binaries); the
// default is two minutes.
func WithStartTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: start timeout %v", ErrInvalidOption, d)
		}
		c.startTimeout = d
		return nil
	}
}

// WithStopTimeout is how long Stop waits after SIGTERM before it sends
// SIGKILL to a component; the default is 15 seconds.
func WithStopTimeout(d time.Duration) Option {
	return func(c *config) error {
		if d <= 0 {
			return fmt.Errorf("%w: stop timeout %v", ErrInvalidOption, d)
		}
		c.stopTimeout = d
		return nil
	}
}

// WithRootDir creates the temporary directory (PKI, kubeconfigs, etcd data,
// logs) under dir instead of os.TempDir().
func WithRootDir(dir string) Option {
	return func(c *config) error {
		if dir == "" {
			return fmt.Errorf("%w: empty root dir", ErrInvalidOption)
		}
		c.rootDir = dir
		return nil
	}
}

// WithKeepDir keeps the temporary directory after Stop (as
// VERDICT_CONTROLPLANE_KEEP=1 does).
func WithKeepDir() Option {
	return func(c *config) error {
		c.keepDir = true
		return nil
	}
}

// WithAPIServerArgs appends flags to kube-apiserver's command line; a flag
// given again overrides the harness's value (for example
// "--enable-admission-plugins=...", "--feature-gates=...").
func WithAPIServerArgs(args ...string) Option {
	return func(c *config) error {
		if err := checkFlags(args); err != nil {
			return err
		}
		c.apiServerArgs = append(c.apiServerArgs, args...)
		return nil
	}
}

// WithControllerManagerArgs appends flags to kube-controller-manager's
// command line (with WithControllerManager).
func WithControllerManagerArgs(args ...string) Option {
	return func(c *config) error {
		if err := checkFlags(args); err != nil {
			return err
		}
		c.controllerMgrArgs = append(c.controllerMgrArgs, args...)
		return nil
	}
}

// WithEtcdArgs appends flags to etcd's command line.
func WithEtcdArgs(args ...string) Option {
	return func(c *config) error {
		if err := checkFlags(args); err != nil {
			return err
		}
		c.etcdArgs = append(c.etcdArgs, args...)
		return nil
	}
}

// WithBuildOutput is where the progress of a build of the binaries goes;
// the default is os.Stderr.
func WithBuildOutput(w io.Writer) Option {
	return func(c *config) error {
		if w == nil {
			w = io.Discard
		}
		c.buildOutput = w
		return nil
	}
}

func checkFlags(args []string) error {
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			return fmt.Errorf("%w: %q is not a --flag=value argument", ErrInvalidOption, a)
		}
	}
	return nil
}
