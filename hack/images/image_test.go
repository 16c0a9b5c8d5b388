package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// epoch is the SOURCE_DATE_EPOCH of the tests.
var epoch = time.Unix(1700000000, 0).UTC()

// fakeBinary stands for a service's binary: the image does not look
// inside it.
var fakeBinary = append([]byte("\x7fELF not really\x00"), bytes.Repeat([]byte{0xab}, 4096)...)

// testBundle stands for a CA bundle.
var testBundle = []byte("-----BEGIN CERTIFICATE-----\nnot a real one\n-----END CERTIFICATE-----\n")

// spec is a valid Spec, changed by mods.
func spec(mods ...func(*Spec)) Spec {
	s := Spec{Service: "webhook", Binary: fakeBinary, Arch: "amd64", Version: "v1.2.3", Revision: "0123abcd", Created: epoch}
	for _, m := range mods {
		m(&s)
	}
	return s
}

// entry is one file of an image as a test sees it.
type entry struct {
	mode     int64
	uid, gid int
	modTime  time.Time
	data     []byte
}

// layerFiles is every entry of every layer, by path without the leading
// slash; directories end with "/". Two layers holding the same path fail.
func layerFiles(t *testing.T, img v1.Image) map[string]entry {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]entry{}
	for i, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			hdr, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("layer %d: %v", i, err)
			}
			p := strings.TrimPrefix(path.Clean(hdr.Name), "/")
			switch hdr.Typeflag {
			case tar.TypeDir:
				p += "/"
			case tar.TypeReg:
			default:
				t.Errorf("layer %d: %s: type %q, want only files and directories", i, hdr.Name, hdr.Typeflag)
			}
			if _, dup := files[p]; dup {
				t.Errorf("layer %d: %s twice", i, p)
			}
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[p] = entry{mode: hdr.Mode, uid: hdr.Uid, gid: hdr.Gid, modTime: hdr.ModTime.UTC(), data: data}
		}
		if err := rc.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// shells are file names no image may hold.
var shells = []string{"sh", "bash", "ash", "dash", "zsh", "busybox", "toybox"}

// checkImage checks what every service image must be: run as the
// non-root user, the binary as entrypoint and nothing to run it with, no
// environment, the labels, one layer holding exactly want (path → mode;
// every entry owned by root and stamped with created), and no shell.
// It returns the layer's files.
func checkImage(t *testing.T, img v1.Image, service, arch, version string, created time.Time, want map[string]int64) map[string]entry {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != User || strings.HasPrefix(c.User, "0:") || c.User == "0" || c.User == "root" {
		t.Errorf("user %q, want %q", c.User, User)
	}
	if want := []string{"/" + service}; !slices.Equal(c.Entrypoint, want) {
		t.Errorf("entrypoint %q, want %q", c.Entrypoint, want)
	}
	if len(c.Cmd) != 0 {
		t.Errorf("cmd %q, want none (the chart gives the arguments)", c.Cmd)
	}
	if len(c.Env) != 0 {
		t.Errorf("env %q, want none", c.Env)
	}
	if c.WorkingDir != "/" {
		t.Errorf("working dir %q, want /", c.WorkingDir)
	}
	if cf.OS != "linux" || cf.Architecture != arch {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, arch)
	}
	if !cf.Created.Equal(created) {
		t.Errorf("created %s, want %s", cf.Created.Time, created)
	}
	for _, h := range cf.History {
		if !h.Created.Equal(created) {
			t.Errorf("history %q created %s, want %s", h.CreatedBy, h.Created.Time, created)
		}
	}
	for key, value := range map[string]string{
		labelSource:  Source,
		labelTitle:   "verdict-" + service,
		labelVersion: version,
		labelCreated: created.Format(time.RFC3339),
	} {
		if got := c.Labels[key]; got != value {
			t.Errorf("label %s = %q, want %q", key, got, value)
		}
	}
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 {
		t.Errorf("%d layers, want 1", len(layers))
	}
	files := layerFiles(t, img)
	if got := slices.Sorted(maps.Keys(files)); !slices.Equal(got, slices.Sorted(maps.Keys(want))) {
		t.Errorf("files %q, want %q", got, slices.Sorted(maps.Keys(want)))
	}
	for p, e := range files {
		if mode, ok := want[p]; ok && e.mode != mode {
			t.Errorf("%s: mode %o, want %o", p, e.mode, mode)
		}
		if e.uid != 0 || e.gid != 0 {
			t.Errorf("%s: owned by %d:%d, want root (the user must not be able to change it)", p, e.uid, e.gid)
		}
		if !e.modTime.Equal(created) {
			t.Errorf("%s: modified %s, want %s", p, e.modTime, created)
		}
		if slices.Contains(shells, path.Base(p)) {
			t.Errorf("%s: a shell", p)
		}
	}
	return files
}

func TestImage(t *testing.T) {
	tests := map[string]struct {
		spec  Spec
		files map[string]int64
	}{
		"binary only": {
			spec:  spec(),
			files: map[string]int64{"webhook": 0o755},
		},
		"another service": {
			spec:  spec(func(s *Spec) { s.Service = "cleaner"; s.Arch = "arm64" }),
			files: map[string]int64{"cleaner": 0o755},
		},
		"with a CA bundle": {
			spec: spec(func(s *Spec) { s.CABundle = testBundle }),
			files: map[string]int64{
				"webhook": 0o755, "etc/": 0o755, "etc/ssl/": 0o755, "etc/ssl/certs/": 0o755,
				"etc/ssl/certs/ca-certificates.crt": 0o644,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			img, err := Image(tc.spec)
			if err != nil {
				t.Fatal(err)
			}
			files := checkImage(t, img, tc.spec.Service, tc.spec.Arch, tc.spec.Version, epoch, tc.files)
			if got := files[tc.spec.Service].data; !bytes.Equal(got, fakeBinary) {
				t.Errorf("entrypoint holds %d bytes, want the binary's %d", len(got), len(fakeBinary))
			}
			if tc.spec.CABundle != nil && !bytes.Equal(files["etc/ssl/certs/ca-certificates.crt"].data, testBundle) {
				t.Error("CA bundle differs")
			}
			cf, err := img.ConfigFile()
			if err != nil {
				t.Fatal(err)
			}
			if got := cf.Config.Labels[labelRevision]; got != tc.spec.Revision {
				t.Errorf("revision label %q, want %q", got, tc.spec.Revision)
			}
		})
	}
}

// The same inputs give the same digest and the same tarball bytes; the
// time stamp is part of the inputs.
func TestReproducible(t *testing.T) {
	dir := t.TempDir()
	ref, err := Reference("registry.example/verdict", "webhook", "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	var digests []v1.Hash
	var tarballs [][]byte
	for i := range 2 {
		img, err := Image(spec())
		if err != nil {
			t.Fatal(err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatal(err)
		}
		digests = append(digests, d)
		file := filepath.Join(dir, "build"+string(rune('a'+i))+".tar")
		if err := writeTarball(file, ref, img); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		tarballs = append(tarballs, b)
	}
	if digests[0] != digests[1] {
		t.Errorf("two builds: digests %s and %s", digests[0], digests[1])
	}
	if !bytes.Equal(tarballs[0], tarballs[1]) {
		t.Error("two builds: tarballs differ")
	}
	later, err := Image(spec(func(s *Spec) { s.Created = epoch.Add(time.Second) }))
	if err != nil {
		t.Fatal(err)
	}
	if d, err := later.Digest(); err != nil || d == digests[0] {
		t.Errorf("another SOURCE_DATE_EPOCH: digest %s (%v), want one other than %s", d, err, digests[0])
	}
}

// What a loader (docker load, ctr import, crane push) reads from the
// tarball is the image that was built: same digest, the name given.
func TestTarballRoundTrip(t *testing.T) {
	img, err := Image(spec())
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Reference("registry.example/verdict", "webhook", "v1.2.3")
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "verdict-webhook.tar")
	if err := writeTarball(file, ref, img); err != nil {
		t.Fatal(err)
	}
	loaded, err := tarball.ImageFromPath(file, &ref)
	if err != nil {
		t.Fatal(err)
	}
	want, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	if got, err := loaded.Digest(); err != nil || got != want {
		t.Errorf("digest read back %s (%v), want %s", got, err, want)
	}
	checkImage(t, loaded, "webhook", "amd64", "v1.2.3", epoch, map[string]int64{"webhook": 0o755})
	if _, err := tarball.ImageFromPath(file, nil); err != nil {
		t.Errorf("tarball has more than one image or no name: %v", err)
	}
}

func TestReference(t *testing.T) {
	tests := map[string]struct {
		registry, service, tag string
		want                   string
		wantErr                bool
	}{
		"registry with a path": {registry: "ghcr.io/verdict-dev", service: "webhook", tag: "v0.1.0", want: "ghcr.io/verdict-dev/verdict-webhook:v0.1.0"},
		"trailing slash":       {registry: "localhost:5001/", service: "cleaner", tag: "dev", want: "localhost:5001/verdict-cleaner:dev"},
		"no registry":          {registry: "", service: "reporter", tag: "dev", want: "index.docker.io/library/verdict-reporter:dev"},
		"git describe tag":     {registry: "kind.local", service: "generator", tag: "v0.1.0-3-gabc1234-dirty", want: "kind.local/verdict-generator:v0.1.0-3-gabc1234-dirty"},
		"bad tag":              {registry: "kind.local", service: "webhook", tag: "a/b", wantErr: true},
		"upper-case registry":  {registry: "Registry.Example/Verdict", service: "webhook", tag: "dev", wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Reference(tc.registry, tc.service, tc.tag)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err == nil && got.Name() != tc.want {
				t.Errorf("%s, want %s", got.Name(), tc.want)
			}
		})
	}
}

func TestSpecValidate(t *testing.T) {
	tests := map[string]struct {
		spec    Spec
		wantErr bool
	}{
		"valid":        {spec: spec()},
		"no service":   {spec: spec(func(s *Spec) { s.Service = "" }), wantErr: true},
		"path service": {spec: spec(func(s *Spec) { s.Service = "../webhook" }), wantErr: true},
		"no binary":    {spec: spec(func(s *Spec) { s.Binary = nil }), wantErr: true},
		"no arch":      {spec: spec(func(s *Spec) { s.Arch = "" }), wantErr: true},
		"no version":   {spec: spec(func(s *Spec) { s.Version = "" }), wantErr: true},
		"bad version":  {spec: spec(func(s *Spec) { s.Version = "v1 2" }), wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.spec.Validate()
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrInvalidSpec) {
				t.Errorf("%v does not wrap ErrInvalidSpec", err)
			}
			if _, err := Image(tc.spec); (err != nil) != tc.wantErr {
				t.Errorf("Image: error %v, want error %v", err, tc.wantErr)
			}
		})
	}
}
