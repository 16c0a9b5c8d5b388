package main

import (
	"bufio"
	"bytes"
	"debug/buildinfo"
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func TestRun(t *testing.T) {
	tests := map[string]struct {
		args []string
		want int
	}{
		"help":              {[]string{"--help"}, exitOK},
		"unknown flag":      {[]string{"--no-such-flag"}, exitUsage},
		"argument":          {[]string{"webhook"}, exitUsage},
		"unknown service":   {[]string{"--services", "webhook,scheduler"}, exitUsage},
		"service twice":     {[]string{"--services", "webhook,webhook"}, exitUsage},
		"no service":        {[]string{"--services", ","}, exitUsage},
		"bad tag":           {[]string{"--tag", "v1:2"}, exitUsage},
		"bad registry":      {[]string{"--registry", "Upper/Case"}, exitUsage},
		"negative epoch":    {[]string{"--source-date-epoch", "-1"}, exitUsage},
		"no arch":           {[]string{"--arch", ""}, exitUsage},
		"missing CA bundle": {[]string{"--services", "webhook", "--out-dir", t.TempDir(), "--ca-bundle", filepath.Join(t.TempDir(), "none.pem")}, exitError},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if got := run(t.Context(), tc.args, &stdout, &stderr); got != tc.want {
				t.Errorf("exit %d, want %d; stderr:\n%s", got, tc.want, stderr.String())
			}
		})
	}
}

func TestRunSourceDateEpochFromEnv(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	var stdout, stderr bytes.Buffer
	if got := run(t.Context(), nil, &stdout, &stderr); got != exitUsage {
		t.Errorf("exit %d, want %d; stderr:\n%s", got, exitUsage, stderr.String())
	}
}

// The real services, built as `make images` builds them: each image
// holds its static binary alone, and that binary runs as the image's
// user in a root file system holding nothing but the image's files. A
// second build gives the same digest.
func TestServiceImages(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every service (a few minutes the first time)")
	}
	moduleDir, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	const tag, registry = "test", "registry.example/verdict"
	created := time.Unix(1700000000, 0).UTC()
	arch := runtime.GOARCH
	build := func(services ...string) (dir string, digests map[string]string) {
		t.Helper()
		dir = t.TempDir()
		args := []string{"--module-dir", moduleDir, "--out-dir", dir, "--registry", registry, "--tag", tag,
			"--source-date-epoch", "1700000000", "--arch", arch, "--strict", "--services", strings.Join(services, ",")}
		var stdout, stderr bytes.Buffer
		if code := run(t.Context(), args, &stdout, &stderr); code != exitOK {
			t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
		}
		list, err := os.ReadFile(filepath.Join(dir, "images.txt"))
		if err != nil {
			t.Fatal(err)
		}
		digests = map[string]string{}
		sc := bufio.NewScanner(bytes.NewReader(list))
		for sc.Scan() {
			ref, digest, ok := strings.Cut(sc.Text(), "@")
			if !ok {
				t.Fatalf("images.txt line %q: want <name>@<digest>", sc.Text())
			}
			digests[ref] = digest
		}
		return dir, digests
	}
	dir, digests := build(Services...)
	if len(digests) != len(Services) {
		t.Errorf("images.txt lists %d images, want %d", len(digests), len(Services))
	}
	for _, svc := range Services {
		t.Run(svc, func(t *testing.T) {
			ref, err := name.NewTag(registry + "/verdict-" + svc + ":" + tag)
			if err != nil {
				t.Fatal(err)
			}
			img, err := tarball.ImageFromPath(filepath.Join(dir, "verdict-"+svc+".tar"), &ref)
			if err != nil {
				t.Fatal(err)
			}
			if d, err := img.Digest(); err != nil || d.String() != digests[ref.Name()] {
				t.Errorf("digest %s (%v), images.txt says %s", d, err, digests[ref.Name()])
			}
			files := checkImage(t, img, svc, arch, tag, created, map[string]int64{svc: 0o755})
			binary := files[svc].data
			checkStatic(t, binary, moduleDir)
			runInImage(t, svc, binary)
		})
	}
	// The second build: the webhook alone, to keep the test short.
	_, again := build("webhook")
	webhook := registry + "/verdict-webhook:" + tag
	if again[webhook] != digests[webhook] {
		t.Errorf("webhook: second build's digest %s, first %s", again[webhook], digests[webhook])
	}
}

// checkStatic checks that binary needs nothing from the image: no
// dynamic loader, no shared library, built without cgo, with the time
// zones inside, and no path of the machine that built it.
func checkStatic(t *testing.T, binary []byte, moduleDir string) {
	t.Helper()
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		t.Fatalf("entrypoint is not an ELF executable: %v", err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP || p.Type == elf.PT_DYNAMIC {
			t.Errorf("program header %s: the binary is dynamically linked", p.Type)
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Errorf("shared libraries %q", libs)
	}
	if f.Section(".symtab") != nil {
		t.Error("symbol table kept: want -ldflags -s")
	}
	info, err := buildinfo.Read(bytes.NewReader(binary))
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for key, want := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "-tags": "timetzdata", "GOOS": "linux"} {
		if settings[key] != want {
			t.Errorf("build setting %s = %q, want %q", key, settings[key], want)
		}
	}
	if bytes.Contains(binary, []byte(moduleDir)) {
		t.Errorf("the binary holds the build directory %s", moduleDir)
	}
}

// runInImage runs the service's binary with --help as the image would:
// in a root file system holding only the binary, as the image's user,
// with an empty environment. It needs root (for chroot); otherwise it is
// skipped.
func runInImage(t *testing.T, svc string, binary []byte) {
	t.Helper()
	if os.Geteuid() != 0 || runtime.GOOS != "linux" {
		t.Log("not root: the binary is not run in a bare root file system")
		return
	}
	root := t.TempDir()
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, svc), binary, 0o755); err != nil { //nolint:gosec // an executable
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), Entrypoint(svc), "--help")
	cmd.Env = []string{}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Chroot:     root,
		Credential: &syscall.Credential{Uid: 65532, Gid: 65532, NoSetGroups: true},
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s --help in its image: %v\n%s", svc, err, out)
	}
	if !strings.Contains(strings.ToLower(string(out)), "usage") {
		t.Errorf("%s --help printed no usage:\n%s", svc, out)
	}
}
