package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const corpus = "../../../shared/conformance/kyverno-policies"

// classicDirs returns the corpus folders of classic policies (no -cel,
// -vpol, -mpol or -gpol suffix).
func classicDirs(t *testing.T) []string {
	t.Helper()
	entries, err := os.ReadDir(corpus)
	if err != nil {
		t.Skipf("conformance corpus not found at %s: %v", corpus, err)
	}
	var dirs []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		name := e.Name()
		if strings.HasSuffix(name, "-cel") || strings.HasSuffix(name, "-vpol") ||
			strings.HasSuffix(name, "-mpol") || strings.HasSuffix(name, "-gpol") {
			continue
		}
		dirs = append(dirs, filepath.Join(corpus, name))
	}
	return dirs
}

// TestConformanceClassic runs `verdict test` on the classic policies of
// the Kyverno policy library. The reference CLI checks 1,424 assertions
// there; Verdict must pass at least 97% (1,382), load every test, and never
// crash. docs/conformance.md lists what still fails.
func TestConformanceClassic(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance corpus run skipped in -short mode")
	}
	var out bytes.Buffer
	sum, err := RunTests(t.Context(), TestOptions{Dirs: classicDirs(t)}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Errors) > 0 {
		t.Errorf("test files that could not be run: %v", sum.Errors)
	}
	if sum.Unsupported != 0 {
		t.Errorf("%d assertions counted unsupported in the classic folders", sum.Unsupported)
	}
	if sum.Passed < 1382 {
		t.Errorf("passed %d assertions, want at least 1382; failures:\n%s", sum.Passed, out.String())
	}
	if strings.Contains(out.String(), "internal error") {
		t.Errorf("an evaluation crashed:\n%s", out.String())
	}
	t.Logf("%d passed, %d failed", sum.Passed, sum.Failed)
}

// celDirs returns the corpus folders whose name ends in suffix (-cel:
// ClusterPolicies validating with validate.cel).
func celDirs(t *testing.T, suffix string) []string {
	t.Helper()
	entries, err := os.ReadDir(corpus)
	if err != nil {
		t.Skipf("conformance corpus not found at %s: %v", corpus, err)
	}
	var dirs []string
	for _, e := range entries {
		if e.IsDir() && strings.HasSuffix(e.Name(), suffix) {
			dirs = append(dirs, filepath.Join(corpus, e.Name()))
		}
	}
	return dirs
}

// TestConformanceValidateCEL runs `verdict test` on the -cel folders of
// the policy library: ClusterPolicies whose rules validate with
// validate.cel (and their autogen rules for Pod controllers). Every one
// of their 1,377 assertions passes.
func TestConformanceValidateCEL(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance corpus run skipped in -short mode")
	}
	var out bytes.Buffer
	sum, err := RunTests(t.Context(), TestOptions{Dirs: celDirs(t, "-cel")}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Errors) > 0 {
		t.Errorf("test files that could not be run: %v", sum.Errors)
	}
	if sum.Passed < 1377 || sum.Failed != 0 || sum.Unsupported != 0 {
		t.Errorf("-cel folders: %d passed, %d failed, %d unsupported; want 1377, 0, 0:\n%s", sum.Passed, sum.Failed, sum.Unsupported, out.String())
	}
}

// TestConformanceValidatingPolicy runs `verdict test` on the -vpol
// folders (ValidatingPolicy, their autogen variants for Pod controllers,
// Kyverno's CEL functions for image metadata, resource lists and the
// time): every one of their 1,152 assertions passes.
func TestConformanceValidatingPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance corpus run skipped in -short mode")
	}
	var out bytes.Buffer
	sum, err := RunTests(t.Context(), TestOptions{Dirs: celDirs(t, "-vpol")}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if sum.Passed < 1152 || sum.Failed != 0 || sum.Unsupported != 0 {
		t.Errorf("-vpol folders: %d passed, %d failed, %d unsupported; want 1152, 0, 0:\n%s", sum.Passed, sum.Failed, sum.Unsupported, out.String())
	}
	if strings.Contains(out.String(), "internal error") {
		t.Errorf("an evaluation crashed:\n%s", out.String())
	}
}

// TestConformanceMutatingPolicy runs `verdict test` on the -mpol folders
// (MutatingPolicy: JSONPatch and ApplyConfiguration mutations, their
// autogen variants): every one of their 72 judged assertions passes; 3
// name a resource their patchedResources file lacks and are left out, as
// the reference CLI leaves them.
func TestConformanceMutatingPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance corpus run skipped in -short mode")
	}
	var out bytes.Buffer
	sum, err := RunTests(t.Context(), TestOptions{Dirs: celDirs(t, "-mpol")}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Errors) > 0 {
		t.Errorf("test files that could not be run: %v", sum.Errors)
	}
	if sum.Passed < 72 || sum.Failed != 0 || sum.Unsupported != 0 {
		t.Errorf("-mpol folders: %d passed, %d failed, %d unsupported; want 72, 0, 0:\n%s", sum.Passed, sum.Failed, sum.Unsupported, out.String())
	}
	if strings.Contains(out.String(), "internal error") {
		t.Errorf("an evaluation crashed:\n%s", out.String())
	}
}

// TestConformanceGeneratingPolicy runs `verdict test` on the -gpol
// folders (GeneratingPolicy: generator.Apply of data objects): every
// test loads, its policy compiles, and each of the 2 assertions passes,
// the generated resource included.
func TestConformanceGeneratingPolicy(t *testing.T) {
	if testing.Short() {
		t.Skip("conformance corpus run skipped in -short mode")
	}
	dirs := celDirs(t, "-gpol")
	if len(dirs) == 0 {
		t.Skip("gpol corpus folders not found")
	}
	var out bytes.Buffer
	sum, err := RunTests(t.Context(), TestOptions{Dirs: dirs}, &out)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.Errors) > 0 {
		t.Errorf("test files that could not be run: %v", sum.Errors)
	}
	if sum.Passed < 2 || sum.Failed != 0 || sum.Unsupported != 0 {
		t.Errorf("-gpol folders: %d passed, %d failed, %d unsupported; want 2, 0, 0:\n%s", sum.Passed, sum.Failed, sum.Unsupported, out.String())
	}
	if strings.Contains(out.String(), "internal error") {
		t.Errorf("an evaluation crashed:\n%s", out.String())
	}
}
