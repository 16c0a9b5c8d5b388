package imageref

import (
	"errors"
	"testing"
)

// TestParse holds Parse to Kyverno's GetImageInfo (its test cases, with
// the default registry docker.io, kept).
func TestParse(t *testing.T) {
	const digest = "sha256:dead07b4d8ed7e29e98de0f4504d87e8880d4347859d839686a31da35a3b532f"
	tests := map[string]struct {
		image, registry, path, name, tag, digest, str string
	}{
		"short":          {"nginx", "docker.io", "nginx", "nginx", "latest", "", "docker.io/nginx:latest"},
		"tag":            {"nginx:v10.3", "docker.io", "nginx", "nginx", "v10.3", "", "docker.io/nginx:v10.3"},
		"registry":       {"docker.io/test/nginx:v10.3", "docker.io", "test/nginx", "nginx", "v10.3", "", "docker.io/test/nginx:v10.3"},
		"org":            {"test/nginx", "docker.io", "test/nginx", "nginx", "latest", "", "docker.io/test/nginx:latest"},
		"localhost port": {"localhost:4443/test/nginx", "localhost:4443", "test/nginx", "nginx", "latest", "", "localhost:4443/test/nginx:latest"},
		"digest":         {"docker.io/test/centos@" + digest, "docker.io", "test/centos", "centos", "", digest, "docker.io/test/centos@" + digest},
		"tag and digest": {"ghcr.io/a/b:v1@" + digest, "ghcr.io", "a/b", "b", "v1", digest, "ghcr.io/a/b@" + digest},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r, err := Parse(tc.image, DefaultRegistry, true)
			if err != nil {
				t.Fatal(err)
			}
			if r.Registry != tc.registry || r.Path != tc.path || r.Name() != tc.name || r.Tag != tc.tag || r.Digest != tc.digest || r.String() != tc.str {
				t.Errorf("Parse(%q) = %+v (%s, name %s)", tc.image, r, r, r.Name())
			}
		})
	}
	if r, err := Parse("test/nginx", DefaultRegistry, false); err != nil || r.String() != "test/nginx:latest" {
		t.Errorf("without the default registry: %v, %v", r, err)
	}
	if _, err := Parse("NGINX", DefaultRegistry, true); !errors.Is(err, ErrBadImage) {
		t.Errorf("uppercase: %v", err)
	}
}
