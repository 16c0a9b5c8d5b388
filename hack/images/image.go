package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// What every image has in common.
const (
	// User is the numeric user and group the services run as: not root,
	// and numeric so that the kubelet can check runAsNonRoot without an
	// /etc/passwd in the image.
	User = "65532:65532"
	// CABundlePath is where a CA bundle goes when one is asked for; Go's
	// crypto/x509 reads it there on Linux.
	CABundlePath = "/etc/ssl/certs/ca-certificates.crt"
	// Source is the repository the images are built from.
	Source = "https://github.com/verdict-dev/verdict"
	// namePrefix starts every image's repository name: verdict-<service>.
	namePrefix = "verdict-"
)

// The OCI annotation keys the images carry as labels.
const (
	labelSource   = "org.opencontainers.image.source"
	labelTitle    = "org.opencontainers.image.title"
	labelVersion  = "org.opencontainers.image.version"
	labelRevision = "org.opencontainers.image.revision"
	labelCreated  = "org.opencontainers.image.created"
	labelDesc     = "org.opencontainers.image.description"
)

// ErrInvalidSpec wraps every problem Spec.Validate finds.
var ErrInvalidSpec = errors.New("invalid image spec")

// serviceName is what a service's name may be: it becomes a file name,
// an entrypoint and part of a repository name.
var serviceName = regexp.MustCompile(`^[a-z][a-z0-9-]*$`)

// Spec is one service's image.
type Spec struct {
	// Service names the binary (/<service> in the image) and the
	// repository (verdict-<service>).
	Service string
	// Binary is the static executable.
	Binary []byte
	// Arch is the GOARCH the binary was built for; the OS is linux.
	Arch string
	// Version is the image's tag and its version label.
	Version string
	// Revision is the source commit (label; may be empty).
	Revision string
	// Created is the time stamped on the image and on every file in it:
	// SOURCE_DATE_EPOCH, so that the same inputs give the same digest.
	Created time.Time
	// CABundle, when not empty, is added at CABundlePath.
	CABundle []byte
}

// Validate returns every problem, each wrapping ErrInvalidSpec.
func (s Spec) Validate() error {
	var errs []error
	if !serviceName.MatchString(s.Service) {
		errs = append(errs, fmt.Errorf("%w: service %q: want lower-case letters, digits and dashes", ErrInvalidSpec, s.Service))
	}
	if len(s.Binary) == 0 {
		errs = append(errs, fmt.Errorf("%w: service %q: empty binary", ErrInvalidSpec, s.Service))
	}
	if s.Arch == "" {
		errs = append(errs, fmt.Errorf("%w: service %q: no architecture", ErrInvalidSpec, s.Service))
	}
	if _, err := name.NewTag("verdict.invalid/x:" + s.Version); err != nil || s.Version == "" {
		errs = append(errs, fmt.Errorf("%w: version %q is not a valid image tag", ErrInvalidSpec, s.Version))
	}
	return errors.Join(errs...)
}

// Entrypoint is the path of the service's binary in its image.
func Entrypoint(service string) string { return "/" + service }

// Reference is the convention every image name follows, and the chart's
// values with it: <registry>/verdict-<service>:<tag>.
func Reference(registry, service, tag string) (name.Tag, error) {
	ref := namePrefix + service + ":" + tag
	if registry != "" {
		ref = strings.TrimSuffix(registry, "/") + "/" + ref
	}
	t, err := name.NewTag(ref)
	if err != nil {
		return name.Tag{}, fmt.Errorf("image name %q: %w", ref, err)
	}
	return t, nil
}

// Image assembles s on an empty base: one layer with the binary (and the
// CA bundle if asked), owned by root and not writable by the user the
// image runs as; the binary is the entrypoint; no shell, no package
// manager, nothing else.
func Image(s Spec) (v1.Image, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	created := s.Created.UTC().Truncate(time.Second)
	files := []file{{path: Entrypoint(s.Service), mode: 0o755, data: s.Binary}}
	if len(s.CABundle) > 0 {
		files = append(files, file{path: CABundlePath, mode: 0o644, data: s.CABundle})
	}
	layerTar, err := tarFiles(files, created)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithCompressedCaching)
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", s.Service, err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{
		Layer: layer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "hack/images: " + s.Service + " binary",
			Comment:   "static binary on an empty base",
		},
	})
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", s.Service, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, fmt.Errorf("config of %s: %w", s.Service, err)
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = s.Arch
	cf.Created = v1.Time{Time: created}
	cf.Config = v1.Config{
		User:       User,
		Entrypoint: []string{Entrypoint(s.Service)},
		WorkingDir: "/",
		Labels:     labels(s, created),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, fmt.Errorf("config of %s: %w", s.Service, err)
	}
	return img, nil
}

// labels are the OCI labels of s's image.
func labels(s Spec, created time.Time) map[string]string {
	l := map[string]string{
		labelSource:  Source,
		labelTitle:   namePrefix + s.Service,
		labelVersion: s.Version,
		labelCreated: created.Format(time.RFC3339),
		labelDesc:    "Verdict " + s.Service + " (Kubernetes admission policies in the Kyverno language)",
	}
	if s.Revision != "" {
		l[labelRevision] = s.Revision
	}
	return l
}

// file is one regular file of a layer.
type file struct {
	path string
	mode int64
	data []byte
}

// tarFiles writes files, and the directories above them, as a tar
// stream whose bytes depend only on its arguments: every entry owned by
// root (0:0, no names), stamped with modTime, in a fixed order.
func tarFiles(files []file, modTime time.Time) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, f := range files {
		rel := strings.TrimPrefix(path.Clean(f.path), "/")
		if rel == "" || rel == "." {
			return nil, fmt.Errorf("file path %q: not a file", f.path)
		}
		// Parents first, each once, so that the directories exist with
		// known modes whatever unpacks the layer.
		var parents []string
		for d := path.Dir(rel); d != "."; d = path.Dir(d) {
			parents = append([]string{d}, parents...)
		}
		for _, d := range parents {
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{
				Typeflag: tar.TypeDir, Name: d + "/", Mode: 0o755, ModTime: modTime, Format: tar.FormatPAX,
			}); err != nil {
				return nil, fmt.Errorf("layer: %w", err)
			}
		}
		if err := tw.WriteHeader(&tar.Header{
			Typeflag: tar.TypeReg, Name: rel, Mode: f.mode, Size: int64(len(f.data)), ModTime: modTime, Format: tar.FormatPAX,
		}); err != nil {
			return nil, fmt.Errorf("layer: %w", err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("layer: %w", err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer: %w", err)
	}
	return buf.Bytes(), nil
}

// writeTarball writes img as a `docker save`-style tarball tagged ref to
// file, replacing it only once the whole tarball is written.
func writeTarball(file string, ref name.Tag, img v1.Image) error {
	tmp, err := os.CreateTemp(filepath.Dir(file), "."+filepath.Base(file)+".*")
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	defer os.Remove(tmp.Name()) //nolint:errcheck // gone after the rename
	if err := tarball.Write(ref, img, tmp); err != nil {
		tmp.Close() //nolint:errcheck,gosec // the write error is the one to report
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := os.Rename(tmp.Name(), file); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}
