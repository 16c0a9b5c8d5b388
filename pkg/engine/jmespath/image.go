package jmespath

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/jmespath-community/go-jmespath/pkg/functions"
)

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

var errBadImage = errors.New("invalid image reference")

type imageInfo struct {
	registry, path, tag, digest string
}

func (i imageInfo) String() string {
	image := i.path
	if i.registry != "" {
		image = i.registry + "/" + i.path
	}
	if i.digest != "" {
		return image + "@" + i.digest
	}
	return image + ":" + i.tag
}

func isValidRegistry(registry string) bool {
	return imageDomainRE.MatchString(registry)
}

// parseImage splits image into its parts as Kyverno does: the default
// registry is added when the first path element does not look like a
// registry, and the tag defaults to "latest" when there is neither tag nor
// digest.
func parseImage(image, defaultRegistry string, keepDefaultRegistry bool) (imageInfo, error) {
	full := image
	if i := strings.IndexByte(image, '/'); i == -1 || (!strings.ContainsAny(image[:i], ".:") &&
		image[:i] != "localhost" && strings.ToLower(image[:i]) == image[:i]) {
		full = defaultRegistry + "/" + image
	}
	m := imageReferenceRE.FindStringSubmatch(full)
	if m == nil {
		if image == "" {
			return imageInfo{}, fmt.Errorf("%w: empty name", errBadImage)
		}
		if imageReferenceRE.MatchString(strings.ToLower(full)) {
			return imageInfo{}, fmt.Errorf("%w: %q: repository name must be lowercase", errBadImage, image)
		}
		return imageInfo{}, fmt.Errorf("%w: %q", errBadImage, image)
	}
	if len(m[1]) > maxImageNameLength {
		return imageInfo{}, fmt.Errorf("%w: %q: name longer than %d characters", errBadImage, image, maxImageNameLength)
	}
	info := imageInfo{tag: m[2], digest: m[3]}
	if n := imageNameRE.FindStringSubmatch(m[1]); n != nil {
		info.registry, info.path = n[1], n[2]
	} else {
		info.path = m[1]
	}
	if info.digest != "" {
		alg, hex, _ := strings.Cut(info.digest, ":")
		want, ok := digestHexLength[alg]
		if !ok {
			return imageInfo{}, fmt.Errorf("%w: %q: unsupported digest algorithm %q", errBadImage, image, alg)
		}
		if len(hex) != want || strings.ToLower(hex) != hex {
			return imageInfo{}, fmt.Errorf("%w: %q: invalid %s digest", errBadImage, image, alg)
		}
	}
	if info.tag == "" && info.digest == "" {
		info.tag = "latest"
	}
	if full != image && !keepDefaultRegistry {
		info.registry = ""
	}
	return info, nil
}

// image_normalize(image string) string: the canonical reference, e.g.
// "nginx" -> "docker.io/nginx:latest". A digest wins over a tag.
func jpImageNormalize(o *options) functions.JpFunction {
	return func(a []any) (any, error) {
		const name = "image_normalize"
		image, err := stringArg(name, a, 0)
		if err != nil {
			return nil, err
		}
		info, err := parseImage(image, o.defaultRegistry, o.defaultRegistryMutation)
		if err != nil {
			return nil, fnWrap(name, err)
		}
		return info.String(), nil
	}
}
