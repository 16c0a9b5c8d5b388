// Command crdgen writes the CustomResourceDefinitions of Verdict's policy
// kinds (clusterpolicies.yaml, policies.yaml, policyexceptions.yaml) with
// full OpenAPI v3 schemas generated from pkg/engine/policy; see
// internal/tools/crdgen. Run it from the module root, as `make crds` does:
//
//	go run ./hack/crdgen                 # rewrite deploy/crds
//	go run ./hack/crdgen --verify        # exit 1 if deploy/crds is stale
//
// The cleanup-policy and report CRDs under deploy/crds are hand-written
// (their Go types do not exist yet) and left alone.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"

	"github.com/verdict-dev/verdict/internal/tools/crdgen"
)

// Exit codes.
const (
	exitOK    = 0
	exitError = 1
	exitUsage = 2
)

// errStale is returned by --verify when a file differs from the output.
var errStale = errors.New("generated CRDs differ from the files; run `make crds`")

// config is what the flags say.
type config struct {
	OutDir string
	// KyvernoDir receives Verdict's CRDs in Kyverno's groups (the chart's
	// adopt mode): crdgen.KyvernoCRDs of every file of OutDir.
	KyvernoDir string
	Verify     bool
}

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Stderr))
}

func run(ctx context.Context, args []string, stderr io.Writer) int {
	cfg := config{OutDir: filepath.Join("deploy", "crds"), KyvernoDir: filepath.Join("deploy", "helm", "verdict", "kyverno-crds")}
	fs := flag.NewFlagSet("crdgen", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.OutDir, "out-dir", cfg.OutDir, "directory the CRDs are written to")
	fs.StringVar(&cfg.KyvernoDir, "kyverno-dir", cfg.KyvernoDir, "directory the CRDs in Kyverno's groups are written to (the chart's adopt mode)")
	fs.BoolVar(&cfg.Verify, "verify", false, "compare with the files instead of writing them")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "crdgen: unexpected arguments %v\n", fs.Args())
		return exitUsage
	}
	if err := generate(ctx, cfg, stderr); err != nil {
		fmt.Fprintln(stderr, "crdgen:", err)
		return exitError
	}
	return exitOK
}

func generate(ctx context.Context, cfg config, log io.Writer) error {
	docs, err := crdgen.LoadDocs(ctx)
	if err != nil {
		return err
	}
	files, err := crdgen.Generate(docs)
	if err != nil {
		return err
	}
	stale, err := write(cfg.OutDir, files, cfg.Verify, log)
	if err != nil {
		return err
	}
	// Every CRD of OutDir, the hand-written ones too, as the files will
	// be once written.
	all := map[string][]byte{}
	for name := range crdgen.KyvernoTargets {
		if b, ok := files[name]; ok {
			all[name] = b
			continue
		}
		b, err := os.ReadFile(filepath.Join(cfg.OutDir, name))
		if err != nil {
			return err
		}
		all[name] = b
	}
	kyverno, err := crdgen.KyvernoCRDs(all)
	if err != nil {
		return err
	}
	if !cfg.Verify {
		if err := os.MkdirAll(cfg.KyvernoDir, 0o755); err != nil {
			return err
		}
	}
	staleKyverno, err := write(cfg.KyvernoDir, kyverno, cfg.Verify, log)
	if err != nil {
		return err
	}
	if stale || staleKyverno {
		return errStale
	}
	return nil
}

// write writes files into dir, or with verify reports whether any
// differs from what dir holds.
func write(dir string, files map[string][]byte, verify bool, log io.Writer) (bool, error) {
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	sort.Strings(names)
	stale := false
	for _, name := range names {
		path := filepath.Join(dir, name)
		if verify {
			have, err := os.ReadFile(path)
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return false, err
			}
			if !bytes.Equal(have, files[name]) {
				fmt.Fprintf(log, "%s: stale\n", path)
				stale = true
			}
			continue
		}
		if err := os.WriteFile(path, files[name], 0o644); err != nil {
			return false, err
		}
		fmt.Fprintf(log, "wrote %s (%d bytes)\n", path, len(files[name]))
	}
	return stale, nil
}
