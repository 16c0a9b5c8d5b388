package jmespath

import (
	"strings"
	"testing"
)

func TestImageNormalize(t *testing.T) {
	digest := "sha256:" + strings.Repeat("ab", 32)
	i := newTestInterpreter(t)
	runSearchCases(t, i, map[string]searchCase{
		"bare name":              {expr: "image_normalize('nginx')", want: "docker.io/nginx:latest"},
		"tag":                    {expr: "image_normalize('nginx:1.25')", want: "docker.io/nginx:1.25"},
		"library path":           {expr: "image_normalize('library/nginx')", want: "docker.io/library/nginx:latest"},
		"registry":               {expr: "image_normalize('ghcr.io/kyverno/kyverno:v1.10.0')", want: "ghcr.io/kyverno/kyverno:v1.10.0"},
		"localhost":              {expr: "image_normalize('localhost/app')", want: "localhost/app:latest"},
		"registry port":          {expr: "image_normalize('localhost:5000/app:dev')", want: "localhost:5000/app:dev"},
		"ipv6 registry":          {expr: "image_normalize('[::1]:5000/app')", want: "[::1]:5000/app:latest"},
		"digest":                 {expr: "image_normalize('registry.corp:443/team/app@" + digest + "')", want: "registry.corp:443/team/app@" + digest},
		"digest wins over tag":   {expr: "image_normalize('nginx:1.25@" + digest + "')", want: "docker.io/nginx@" + digest},
		"uppercase registry":     {expr: "image_normalize('MyRegistry/app')", want: "MyRegistry/app:latest"},
		"separators":             {expr: "image_normalize('quay.io/a__b/c-d.e_f:1.0-rc_1')", want: "quay.io/a__b/c-d.e_f:1.0-rc_1"},
		"uppercase repository":   {expr: "image_normalize('NGINX')", wantErr: ErrFunction},
		"empty tag":              {expr: "image_normalize('nginx:')", wantErr: ErrFunction},
		"empty":                  {expr: "image_normalize('')", wantErr: ErrFunction},
		"short digest":           {expr: "image_normalize('nginx@sha256:abc')", wantErr: ErrFunction},
		"unknown digest":         {expr: "image_normalize('nginx@md5:" + strings.Repeat("a", 32) + "')", wantErr: ErrFunction},
		"uppercase digest":       {expr: "image_normalize('nginx@sha256:" + strings.Repeat("AB", 32) + "')", wantErr: ErrFunction},
		"too long":               {expr: "image_normalize('" + strings.Repeat("a", 300) + "')", wantErr: ErrFunction},
		"not a string":           {expr: "image_normalize(`1`)", wantErr: ErrFunction},
		"replace default domain": {expr: "regex_replace_all('^docker.io/(.*)$', image_normalize('nginx'), 'harbor.corp.org/$1')", want: "harbor.corp.org/nginx:latest"},
	})
}

func TestImageNormalizeOptions(t *testing.T) {
	tests := map[string]struct {
		opts  []Option
		image string
		want  string
	}{
		"custom default registry": {
			opts:  []Option{WithDefaultRegistry("harbor.corp.org")},
			image: "nginx", want: "harbor.corp.org/nginx:latest",
		},
		"custom registry keeps explicit": {
			opts:  []Option{WithDefaultRegistry("harbor.corp.org")},
			image: "ghcr.io/a/b:1", want: "ghcr.io/a/b:1",
		},
		"mutation disabled": {
			opts:  []Option{WithDefaultRegistryMutation(false)},
			image: "nginx", want: "nginx:latest",
		},
		"mutation disabled keeps explicit": {
			opts:  []Option{WithDefaultRegistryMutation(false)},
			image: "docker.io/nginx", want: "docker.io/nginx:latest",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			i := newTestInterpreter(t, tc.opts...)
			got, err := i.Search("image_normalize(@)", tc.image)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("image_normalize(%q) = %#v, want %q", tc.image, got, tc.want)
			}
		})
	}
}
