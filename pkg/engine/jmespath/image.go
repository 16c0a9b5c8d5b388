package jmespath

import (
	"github.com/jmespath-community/go-jmespath/pkg/functions"

	"github.com/verdict-dev/verdict/pkg/engine/imageref"
)

// image_normalize(image string) string: the canonical reference, e.g.
// "nginx" -> "docker.io/nginx:latest". A digest wins over a tag.
func jpImageNormalize(o *options) functions.JpFunction {
	return func(a []any) (any, error) {
		const name = "image_normalize"
		image, err := stringArg(name, a, 0)
		if err != nil {
			return nil, err
		}
		info, err := imageref.Parse(image, o.defaultRegistry, o.defaultRegistryMutation)
		if err != nil {
			return nil, fnWrap(name, err)
		}
		return info.String(), nil
	}
}
