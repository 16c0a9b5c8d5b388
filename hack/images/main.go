// Command images builds one container image per service (webhook,
// reporter, generator, cleaner) without a container engine: each service
// is compiled into a static binary (CGO_ENABLED=0, -trimpath, -ldflags
// "-s -w") and put on an empty base, run as 65532:65532 with the binary
// as its entrypoint, no shell and nothing else. Each image is written as
// a `docker save`-style tarball, bin/images/verdict-<service>.tar, tagged
// <registry>/verdict-<service>:<tag>, the name the Helm chart's values
// use. Every file and the image are stamped with SOURCE_DATE_EPOCH, so
// the same sources give the same digests. Run it from the module root,
// as `make images` does:
//
//	go run ./hack/images --registry ghcr.io/verdict-dev --tag v0.1.0
//	go run ./hack/images --services webhook --arch arm64
//
// A service whose main package does not build is skipped with the
// compiler's output (--strict makes that an error). docs/images.md says
// why there is no CA bundle by default and how to load the images.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// Services are the services that have an image, in build order.
var Services = []string{"webhook", "reporter", "generator", "cleaner"}

// ErrInvalidConfig wraps every problem config.Validate finds.
var ErrInvalidConfig = errors.New("invalid configuration")

// config is what the flags say.
type config struct {
	// ModuleDir is the module root the services are built from.
	ModuleDir string
	// OutDir receives verdict-<service>.tar and images.txt.
	OutDir string
	// Services to build (default: all).
	Services []string
	// Registry and Tag make the names: <registry>/verdict-<service>:<tag>.
	Registry, Tag string
	// Revision is the source commit, for the revision label.
	Revision string
	// SourceDateEpoch is the time, in seconds since 1970, stamped on the
	// images and their files.
	SourceDateEpoch int64
	// Arch is the GOARCH to build for.
	Arch string
	// CABundle is a PEM file added at /etc/ssl/certs/ca-certificates.crt
	// (empty: none).
	CABundle string
	// Strict makes a service that does not build an error instead of a
	// skip.
	Strict bool
}

func defaultConfig() config {
	return config{
		ModuleDir: ".",
		OutDir:    filepath.Join("bin", "images"),
		Services:  Services,
		Registry:  "ghcr.io/verdict-dev",
		Tag:       "dev",
		Arch:      runtime.GOARCH,
	}
}

// Validate returns every problem, each wrapping ErrInvalidConfig.
func (c config) Validate() error {
	var errs []error
	if len(c.Services) == 0 {
		errs = append(errs, fmt.Errorf("%w: no service to build", ErrInvalidConfig))
	}
	seen := map[string]bool{}
	for _, s := range c.Services {
		known := false
		for _, k := range Services {
			known = known || s == k
		}
		if !known {
			errs = append(errs, fmt.Errorf("%w: unknown service %q (want one of %s)", ErrInvalidConfig, s, strings.Join(Services, ", ")))
		}
		if seen[s] {
			errs = append(errs, fmt.Errorf("%w: service %q given twice", ErrInvalidConfig, s))
		}
		seen[s] = true
	}
	if _, err := Reference(c.Registry, "webhook", c.Tag); err != nil {
		errs = append(errs, fmt.Errorf("%w: --registry %q and --tag %q: %w", ErrInvalidConfig, c.Registry, c.Tag, err))
	}
	if c.SourceDateEpoch < 0 {
		errs = append(errs, fmt.Errorf("%w: --source-date-epoch must not be negative, got %d", ErrInvalidConfig, c.SourceDateEpoch))
	}
	if c.Arch == "" {
		errs = append(errs, fmt.Errorf("%w: --arch is required", ErrInvalidConfig))
	}
	return errors.Join(errs...)
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg := defaultConfig()
	if v := os.Getenv("SOURCE_DATE_EPOCH"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			fmt.Fprintf(stderr, "images: SOURCE_DATE_EPOCH=%q: not a number of seconds\n", v)
			return exitUsage
		}
		cfg.SourceDateEpoch = n
	}
	fs := flag.NewFlagSet("images", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.ModuleDir, "module-dir", cfg.ModuleDir, "module root the services are built from")
	fs.StringVar(&cfg.OutDir, "out-dir", cfg.OutDir, "directory the image tarballs are written to")
	fs.Func("services", "comma-separated services to build (default "+strings.Join(cfg.Services, ",")+")", func(v string) error {
		cfg.Services = nil
		for s := range strings.SplitSeq(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				cfg.Services = append(cfg.Services, s)
			}
		}
		return nil
	})
	fs.StringVar(&cfg.Registry, "registry", cfg.Registry, "registry and path the names start with: <registry>/verdict-<service>:<tag>")
	fs.StringVar(&cfg.Tag, "tag", cfg.Tag, "image tag, also the version label")
	fs.StringVar(&cfg.Revision, "revision", cfg.Revision, "source commit for the revision label")
	fs.Int64Var(&cfg.SourceDateEpoch, "source-date-epoch", cfg.SourceDateEpoch, "time stamped on the images and their files, in `seconds` since 1970 (default $SOURCE_DATE_EPOCH, else 0)")
	fs.StringVar(&cfg.Arch, "arch", cfg.Arch, "GOARCH to build for (the OS is linux)")
	fs.StringVar(&cfg.CABundle, "ca-bundle", cfg.CABundle, "PEM `file` to add at "+CABundlePath+" (default: none)")
	fs.BoolVar(&cfg.Strict, "strict", cfg.Strict, "fail when a service does not build instead of skipping it")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "images: unexpected arguments %v\n", fs.Args())
		return exitUsage
	}
	if err := cfg.Validate(); err != nil {
		fmt.Fprintln(stderr, "images:", err)
		return exitUsage
	}
	if err := build(ctx, cfg, stdout, stderr); err != nil {
		fmt.Fprintln(stderr, "images:", err)
		return exitError
	}
	return exitOK
}

// build builds every service's image into cfg.OutDir and lists them, as
// <name>@<digest>, on stdout and in images.txt. A service that does not
// build is skipped (its old tarball removed) unless cfg.Strict.
func build(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	var caBundle []byte
	if cfg.CABundle != "" {
		b, err := os.ReadFile(cfg.CABundle)
		if err != nil {
			return fmt.Errorf("ca bundle: %w", err)
		}
		caBundle = b
	}
	if err := os.MkdirAll(cfg.OutDir, 0o755); err != nil {
		return fmt.Errorf("output directory: %w", err)
	}
	binDir, err := os.MkdirTemp("", "verdict-images-")
	if err != nil {
		return fmt.Errorf("build directory: %w", err)
	}
	defer os.RemoveAll(binDir) //nolint:errcheck // a temporary directory
	var built, skipped []string
	for _, svc := range cfg.Services {
		tarPath := filepath.Join(cfg.OutDir, namePrefix+svc+".tar")
		binPath := filepath.Join(binDir, svc)
		err := goBuild(ctx, cfg.ModuleDir, "./cmd/"+svc, cfg.Arch, binPath)
		if errors.Is(err, ErrBuild) && !cfg.Strict {
			fmt.Fprintf(stderr, "images: skipping %s, its main package does not build:\n%s\n", svc, indent(err.Error()))
			if err := os.Remove(tarPath); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove stale %s: %w", tarPath, err)
			}
			skipped = append(skipped, svc)
			continue
		}
		if err != nil {
			return err
		}
		binary, err := os.ReadFile(binPath)
		if err != nil {
			return fmt.Errorf("%s binary: %w", svc, err)
		}
		img, err := Image(Spec{
			Service:  svc,
			Binary:   binary,
			Arch:     cfg.Arch,
			Version:  cfg.Tag,
			Revision: cfg.Revision,
			Created:  time.Unix(cfg.SourceDateEpoch, 0),
			CABundle: caBundle,
		})
		if err != nil {
			return err
		}
		ref, err := Reference(cfg.Registry, svc, cfg.Tag)
		if err != nil {
			return err
		}
		if err := writeTarball(tarPath, ref, img); err != nil {
			return err
		}
		digest, err := img.Digest()
		if err != nil {
			return fmt.Errorf("digest of %s: %w", svc, err)
		}
		line := ref.String() + "@" + digest.String()
		fmt.Fprintf(stdout, "%s\t%s\n", line, tarPath)
		built = append(built, line)
	}
	if len(built) == 0 {
		return fmt.Errorf("no image built (skipped: %s)", strings.Join(skipped, ", "))
	}
	list := strings.Join(built, "\n") + "\n"
	if err := os.WriteFile(filepath.Join(cfg.OutDir, "images.txt"), []byte(list), 0o644); err != nil { //nolint:gosec // a listing, not a secret
		return fmt.Errorf("image list: %w", err)
	}
	if len(skipped) > 0 {
		fmt.Fprintf(stderr, "images: built %d, skipped %s\n", len(built), strings.Join(skipped, ", "))
	}
	return nil
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(s, "\n", "\n    ")
}
