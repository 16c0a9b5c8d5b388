// Package imageref parses container image references as Kyverno does
// (its pkg/utils/image GetImageInfo, on the distribution reference
// grammar): the default registry added to a reference that names none,
// "latest" for a reference with neither tag nor digest, and Kyverno's
// normal form, registry/path:tag or registry/path@digest. The JMESPath
// image functions and verifyImages share it.
package imageref

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// DefaultRegistry is the registry added to references that name none
// (Kyverno's defaultRegistry setting, docker.io unless configured).
const DefaultRegistry = "docker.io"

// Image references follow the grammar of the OCI distribution reference
// format: [domain/]path[:tag][@digest].
const (
	reAlnum           = `[a-z0-9]+`
	reSeparator       = `(?:[._]|__|[-]+)`
	rePathComponent   = reAlnum + `(?:` + reSeparator + reAlnum + `)*`
	reImagePath       = rePathComponent + `(?:/` + rePathComponent + `)*`
	reDomainComponent = `(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])`
	reDomainName      = reDomainComponent + `(?:\.` + reDomainComponent + `)*`
	reIPv6            = `\[[a-fA-F0-9:]+\]`
	reDomain          = `(?:` + reDomainName + `|` + reIPv6 + `)(?::[0-9]+)?`
	reTag             = `[\w][\w.-]{0,127}`
	reDigest          = `[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9a-fA-F]{32,}`
	reImageName       = `(?:` + reDomain + `/)?` + reImagePath
)

var (
	imageReferenceRE = regexp.MustCompile(`^(` + reImageName + `)(?::(` + reTag + `))?(?:@(` + reDigest + `))?$`)
	imageNameRE      = regexp.MustCompile(`^(?:(` + reDomain + `)/)?(` + reImagePath + `)$`)
	imageDomainRE    = regexp.MustCompile(`^` + reDomain + `$`)
)

const maxImageNameLength = 255

// digestHexLength is the hex length of each supported digest algorithm.
var digestHexLength = map[string]int{"sha256": 64, "sha384": 96, "sha512": 128}

// ErrBadImage is wrapped by the errors of Parse.
var ErrBadImage = errors.New("invalid image reference")

// Ref is a parsed image reference.
type Ref struct {
	// Registry is the registry's host (and port): docker.io, ghcr.io,
	// localhost:5000; empty only when Parse was told not to keep the
	// default registry it added.
	Registry string
	// Path is the repository path: library/nginx, nginx, org/app.
	Path string
	// Tag is the tag; "latest" when the image names neither a tag nor a
	// digest.
	Tag string
	// Digest is the digest (sha256:...), if the image names one.
	Digest string
}

// String is the reference in Kyverno's normal form: registry/path, then
// @digest when there is a digest (the tag is dropped), :tag otherwise.
// It is what Kyverno's image_normalize returns and what verifyImages
// matches imageReferences against.
func (r Ref) String() string {
	image := r.Path
	if r.Registry != "" {
		image = r.Registry + "/" + r.Path
	}
	if r.Digest != "" {
		return image + "@" + r.Digest
	}
	return image + ":" + r.Tag
}

// Name is the last element of the path.
func (r Ref) Name() string { return r.Path[strings.LastIndexByte(r.Path, '/')+1:] }

// ValidRegistry reports whether registry is a registry host, with an
// optional port.
func ValidRegistry(registry string) bool {
	return imageDomainRE.MatchString(registry)
}

// Parse splits image into its parts as Kyverno does: the default
// registry is added when the first path element does not look like a
// registry, and the tag defaults to "latest" when there is neither tag nor
// digest.
func Parse(image, defaultRegistry string, keepDefaultRegistry bool) (Ref, error) {
	full := image
	if i := strings.IndexByte(image, '/'); i == -1 || (!strings.ContainsAny(image[:i], ".:") &&
		image[:i] != "localhost" && strings.ToLower(image[:i]) == image[:i]) {
		full = defaultRegistry + "/" + image
	}
	m := imageReferenceRE.FindStringSubmatch(full)
	if m == nil {
		if image == "" {
			return Ref{}, fmt.Errorf("%w: empty name", ErrBadImage)
		}
		if imageReferenceRE.MatchString(strings.ToLower(full)) {
			return Ref{}, fmt.Errorf("%w: %q: repository name must be lowercase", ErrBadImage, image)
		}
		return Ref{}, fmt.Errorf("%w: %q", ErrBadImage, image)
	}
	if len(m[1]) > maxImageNameLength {
		return Ref{}, fmt.Errorf("%w: %q: name longer than %d characters", ErrBadImage, image, maxImageNameLength)
	}
	info := Ref{Tag: m[2], Digest: m[3]}
	if n := imageNameRE.FindStringSubmatch(m[1]); n != nil {
		info.Registry, info.Path = n[1], n[2]
	} else {
		info.Path = m[1]
	}
	if info.Digest != "" {
		alg, hex, _ := strings.Cut(info.Digest, ":")
		want, ok := digestHexLength[alg]
		if !ok {
			return Ref{}, fmt.Errorf("%w: %q: unsupported digest algorithm %q", ErrBadImage, image, alg)
		}
		if len(hex) != want || strings.ToLower(hex) != hex {
			return Ref{}, fmt.Errorf("%w: %q: invalid %s digest", ErrBadImage, image, alg)
		}
	}
	if info.Tag == "" && info.Digest == "" {
		info.Tag = "latest"
	}
	if full != image && !keepDefaultRegistry {
		info.Registry = ""
	}
	return info, nil
}
