package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
)

// ErrBuild is a service whose main package does not build.
var ErrBuild = errors.New("build failed")

// buildFlags make a static, reproducible binary: no cgo (so no libc to
// find at run time), no file system paths or VCS stamp in it, no symbol
// table or DWARF. The timetzdata tag embeds the time zone database:
// scratch has no /usr/share/zoneinfo, and cleanup schedules may name a
// zone (CRON_TZ=Europe/Paris ...), which pkg/engine/policy checks with
// time.LoadLocation in the cleaner and in the webhook's policy validation.
var buildFlags = []string{"-trimpath", "-buildvcs=false", "-tags=timetzdata", "-ldflags=-s -w -buildid="}

// goBuild builds the main package pkg (run from dir, the module root) for
// linux/arch into out. A package that does not compile is an error
// wrapping ErrBuild with the compiler's output.
func goBuild(ctx context.Context, dir, pkg, arch, out string) error {
	args := append([]string{"build"}, buildFlags...)
	args = append(args, "-o", out, pkg)
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+arch)
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("go build %s: %w", pkg, ctx.Err())
		}
		return fmt.Errorf("%w: go build %s: %w\n%s", ErrBuild, pkg, err, strings.TrimSpace(output.String()))
	}
	return nil
}
