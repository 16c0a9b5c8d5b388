package ocitest

import (
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Image is an image or an index pushed to the registry.
type Image struct {
	// Tag is "<host>/<repo>:<tag>"; empty for an index's child.
	Tag string
	// Ref is "<host>/<repo>@sha256:<hex>", the reference by digest.
	Ref string
	// Digest is "sha256:<hex>".
	Digest string
	// Repo is the repository without the host.
	Repo string
}

// Index is an index (a multi-arch image) pushed to the registry.
type Index struct {
	Image
	// Children are the index's images, one per platform of PushIndex.
	Children []Image
}

// The platforms of an index PushIndex pushes, in order.
var indexPlatforms = []v1.Platform{
	{OS: "linux", Architecture: "amd64"},
	{OS: "linux", Architecture: "arm64"},
}

// PushImage pushes a random image (one layer of 1 KiB) as repo:tag. It
// fails t on error.
func (r *Registry) PushImage(t testing.TB, repo, tag string) Image {
	t.Helper()
	img, err := random.Image(1024, 1)
	if err != nil {
		t.Fatalf("ocitest: random image: %v", err)
	}
	return r.Push(t, repo, tag, img)
}

// Push pushes img as repo:tag. It fails t on error.
func (r *Registry) Push(t testing.TB, repo, tag string, img v1.Image) Image {
	t.Helper()
	ref := r.tag(t, repo, tag)
	if err := remote.Write(ref, img, r.RemoteOptions()...); err != nil {
		t.Fatalf("ocitest: push %s: %v", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatalf("ocitest: digest of %s: %v", ref, err)
	}
	return r.image(repo, tag, d)
}

// PushIndex pushes an index of two random images, for linux/amd64 and
// linux/arm64, as repo:tag; the children are pushed by digest. It fails
// t on error.
func (r *Registry) PushIndex(t testing.TB, repo, tag string) Index {
	t.Helper()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var children []Image
	for _, p := range indexPlatforms {
		img, err := random.Image(1024, 1)
		if err != nil {
			t.Fatalf("ocitest: random image: %v", err)
		}
		d, err := img.Digest()
		if err != nil {
			t.Fatalf("ocitest: digest: %v", err)
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{Platform: &p},
		})
		children = append(children, r.image(repo, "", d))
	}
	ref := r.tag(t, repo, tag)
	if err := remote.WriteIndex(ref, idx, r.RemoteOptions()...); err != nil {
		t.Fatalf("ocitest: push index %s: %v", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		t.Fatalf("ocitest: digest of %s: %v", ref, err)
	}
	return Index{Image: r.image(repo, tag, d), Children: children}
}

// Retag points repo:tag at the image ref already in the registry (a
// digest or another tag), as a registry's tag moves to a new build. It
// fails t on error.
func (r *Registry) Retag(t testing.TB, ref, repo, tag string) {
	t.Helper()
	desc, err := remote.Get(r.ref(t, ref), r.RemoteOptions()...)
	if err != nil {
		t.Fatalf("ocitest: get %s: %v", ref, err)
	}
	if err := remote.Tag(r.tag(t, repo, tag), desc, r.RemoteOptions()...); err != nil {
		t.Fatalf("ocitest: tag %s as %s:%s: %v", ref, repo, tag, err)
	}
}

func (r *Registry) tag(t testing.TB, repo, tag string) name.Tag {
	t.Helper()
	ref, err := name.NewTag(r.Repo(repo) + ":" + tag)
	if err != nil {
		t.Fatalf("ocitest: tag %s:%s: %v", repo, tag, err)
	}
	return ref
}

func (r *Registry) image(repo, tag string, d v1.Hash) Image {
	img := Image{Ref: r.Repo(repo) + "@" + d.String(), Digest: d.String(), Repo: repo}
	if tag != "" {
		img.Tag = r.Repo(repo) + ":" + tag
	}
	return img
}

// PushReferrer pushes an OCI 1.1 artifact about the image subject (a tag
// or a digest reference into this registry), as `oras attach` or
// `notation`'s SBOM workflows do: payload (JSON) its one layer,
// artifactType its config's media type, which the referrers API reports
// as its artifactType (and the referrers tag schema lists, WithoutReferrers).
// It returns the artifact's reference by digest, for SignNotary; it fails
// t on error.
func (r *Registry) PushReferrer(t testing.TB, subject, artifactType string, payload []byte) string {
	t.Helper()
	ref := r.ref(t, subject)
	desc, err := remote.Head(ref, r.RemoteOptions()...)
	if err != nil {
		t.Fatalf("ocitest: subject %s: %v", subject, err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: static.NewLayer(payload, types.MediaType("application/json"))})
	if err != nil {
		t.Fatalf("ocitest: artifact: %v", err)
	}
	img = mutate.MediaType(img, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.MediaType(artifactType))
	img = mutate.Subject(img, v1.Descriptor{MediaType: desc.MediaType, Digest: desc.Digest, Size: desc.Size}).(v1.Image)
	d, err := img.Digest()
	if err != nil {
		t.Fatalf("ocitest: artifact digest: %v", err)
	}
	out := ref.Context().Digest(d.String())
	if err := remote.Write(out, img, r.RemoteOptions()...); err != nil {
		t.Fatalf("ocitest: push the artifact about %s: %v", subject, err)
	}
	return out.String()
}
