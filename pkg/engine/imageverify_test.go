package engine

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

const testDigest = "sha256:dead07b4d8ed7e29e98de0f4504d87e8880d4347859d839686a31da35a3b532f"

func decodeObject(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// imageRow is an Image as a test compares it: field, name, normalised
// reference, pointer.
type imageRow struct{ field, name, ref, pointer string }

func rows(images []Image) []imageRow {
	out := make([]imageRow, 0, len(images))
	for _, img := range images {
		out = append(out, imageRow{img.Field, img.Name, img.Ref.String(), img.Pointer})
	}
	return out
}

func TestResourceImages(t *testing.T) {
	podSpec := `{"initContainers":[{"name":"init","image":"busybox"}],` +
		`"containers":[{"name":"a","image":"nginx:1.25"},{"name":"b","image":"ghcr.io/org/app@` + testDigest + `"},{"name":"c","image":" "}],` +
		`"ephemeralContainers":[{"name":"debug","image":"localhost:5000/tools/debug:v1"}]}`
	want := func(prefix string) []imageRow {
		return []imageRow{
			{"initContainers", "init", "docker.io/busybox:latest", prefix + "/initContainers/0/image"},
			{"containers", "a", "docker.io/nginx:1.25", prefix + "/containers/0/image"},
			{"containers", "b", "ghcr.io/org/app@" + testDigest, prefix + "/containers/1/image"},
			{"ephemeralContainers", "debug", "localhost:5000/tools/debug:v1", prefix + "/ephemeralContainers/0/image"},
		}
	}
	tests := map[string]struct {
		obj        string
		extractors map[string][]any
		want       []imageRow
		err        string
	}{
		"pod":                    {obj: `{"kind":"Pod","spec":` + podSpec + `}`, want: want("/spec")},
		"deployment":             {obj: `{"kind":"Deployment","spec":{"template":{"spec":` + podSpec + `}}}`, want: want("/spec/template/spec")},
		"statefulset":            {obj: `{"kind":"StatefulSet","spec":{"template":{"spec":` + podSpec + `}}}`, want: want("/spec/template/spec")},
		"daemonset":              {obj: `{"kind":"DaemonSet","spec":{"template":{"spec":` + podSpec + `}}}`, want: want("/spec/template/spec")},
		"job":                    {obj: `{"kind":"Job","spec":{"template":{"spec":` + podSpec + `}}}`, want: want("/spec/template/spec")},
		"replicaset":             {obj: `{"kind":"ReplicaSet","spec":{"template":{"spec":` + podSpec + `}}}`, want: want("/spec/template/spec")},
		"replicationcontroller":  {obj: `{"kind":"ReplicationController","spec":{"template":{"spec":` + podSpec + `}}}`, want: want("/spec/template/spec")},
		"cronjob":                {obj: `{"kind":"CronJob","spec":{"jobTemplate":{"spec":{"template":{"spec":` + podSpec + `}}}}}`, want: want("/spec/jobTemplate/spec/template/spec")},
		"other kind has none":    {obj: `{"kind":"ConfigMap","data":{"image":"nginx"}}`},
		"pod without containers": {obj: `{"kind":"Pod","spec":{}}`},
		"custom extractor": {
			obj:        `{"kind":"Task","spec":{"steps":[{"name":"build","image":"golang:1.22"},{"name":"push","image":"ghcr.io/org/push:v2"}]}}`,
			extractors: map[string][]any{"Task": {map[string]any{"path": "/spec/steps/*", "value": "image", "key": "name", "name": "steps"}}},
			want: []imageRow{
				{"steps", "build", "docker.io/golang:1.22", "/spec/steps/0/image"},
				{"steps", "push", "ghcr.io/org/push:v2", "/spec/steps/1/image"},
			}},
		"custom extractor, value from path, no key, no name": {
			obj:        `{"kind":"Task","spec":{"image":"nginx"}}`,
			extractors: map[string][]any{"Task": {map[string]any{"path": "/spec/image"}}},
			want:       []imageRow{{"custom", "/spec/image", "docker.io/nginx:latest", "/spec/image"}}},
		"custom extractor over a map": {
			obj:        `{"kind":"Task","spec":{"images":{"z":{"ref":"z:1"},"a":{"ref":"a:1"}}}}`,
			extractors: map[string][]any{"Task": {map[string]any{"path": "/spec/images/*/ref"}}},
			want: []imageRow{
				{"custom", "/spec/images/a/ref", "docker.io/a:1", "/spec/images/a/ref"},
				{"custom", "/spec/images/z/ref", "docker.io/z:1", "/spec/images/z/ref"},
			}},
		"custom extractors replace the built-in ones": {
			obj:        `{"kind":"Pod","spec":{"containers":[{"name":"a","image":"nginx"}],"sidecar":"redis"}}`,
			extractors: map[string][]any{"Pod": {map[string]any{"path": "/spec/sidecar"}}},
			want:       []imageRow{{"custom", "/spec/sidecar", "docker.io/redis:latest", "/spec/sidecar"}}},
		"extractors of another kind are ignored": {
			obj:        `{"kind":"Pod","spec":{"containers":[{"name":"a","image":"nginx"}]}}`,
			extractors: map[string][]any{"Task": {map[string]any{"path": "/spec/image"}}},
			want:       []imageRow{{"containers", "a", "docker.io/nginx:latest", "/spec/containers/0/image"}}},
		"jmesPath": {
			obj:        `{"kind":"Task","spec":{"image":"ignored|nginx:2"}}`,
			extractors: map[string][]any{"Task": {map[string]any{"path": "/spec/image", "jmesPath": "split(@, '|')[1]"}}},
			want:       []imageRow{{"custom", "/spec/image", "docker.io/nginx:2", "/spec/image"}}},
		"pointer escaping": {
			obj:        `{"kind":"Task","spec":{"images":{"a/b~c":{"ref":"nginx"}}}}`,
			extractors: map[string][]any{"Task": {map[string]any{"path": "/spec/images/*/ref"}}},
			want:       []imageRow{{"custom", "/spec/images/a~1b~0c/ref", "docker.io/nginx:latest", "/spec/images/a~1b~0c/ref"}}},
		"empty custom list": {
			obj:        `{"kind":"Task"}`,
			extractors: map[string][]any{"Task": {}},
			err:        "no extractors found for Task"},
		"invalid image": {obj: `{"kind":"Pod","spec":{"containers":[{"name":"a","image":"NGINX:x y"}]}}`, err: "invalid image 'NGINX:x y'"},
		"star on a scalar": {
			obj:        `{"kind":"Task","spec":{"images":"nginx"}}`,
			extractors: map[string][]any{"Task": {map[string]any{"path": "/spec/images/*/ref"}}},
			err:        "invalid type"},
		"step into a scalar": {
			obj:        `{"kind":"Task","spec":"nginx"}`,
			extractors: map[string][]any{"Task": {map[string]any{"path": "/spec/image"}}},
			err:        "invalid image config"},
		"key not a string": {obj: `{"kind":"Pod","spec":{"containers":[{"image":"nginx"}]}}`, err: "invalid key"},
		"jmesPath not a string": {
			obj:        `{"kind":"Task","spec":{"image":"nginx"}}`,
			extractors: map[string][]any{"Task": {map[string]any{"path": "/spec/image", "jmesPath": "length(@)"}}},
			err:        "must produce a string"},
	}
	e, err := New()
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			exs, err := ParseImageExtractors(tc.extractors)
			if err != nil {
				t.Fatal(err)
			}
			images, err := ResourceImages(decodeObject(t, tc.obj), exs, e.jp.Search)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrImageExtraction) {
					t.Fatalf("error %v, want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := rows(images); !reflect.DeepEqual(got, tc.want) && len(got)+len(tc.want) > 0 {
				t.Errorf("images:\n got %v\nwant %v", got, tc.want)
			}
		})
	}
}

func TestResourceImagesPullSecrets(t *testing.T) {
	obj := decodeObject(t, `{"kind":"Deployment","spec":{"template":{"spec":{"imagePullSecrets":[{"name":"one"},{"name":"two"}],"containers":[{"name":"a","image":"nginx"}]}}}}`)
	images, err := ResourceImages(obj, nil, nil)
	if err != nil || len(images) != 1 {
		t.Fatalf("%v, %v", images, err)
	}
	if !reflect.DeepEqual(images[0].PullSecrets, []string{"one", "two"}) || images[0].Image != "nginx" {
		t.Errorf("image %+v", images[0])
	}
}

func TestParseImageExtractorsErrors(t *testing.T) {
	for name, raw := range map[string]map[string][]any{
		"not an object": {"Task": {"x"}},
		"not a string":  {"Task": {map[string]any{"path": 1}}},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := ParseImageExtractors(raw); !errors.Is(err, ErrImageExtraction) {
				t.Errorf("error %v", err)
			}
		})
	}
}

// TestMatchImageReferences holds the matching to Kyverno's: a pattern is
// compared, as written, with the image's normalised reference.
func TestMatchImageReferences(t *testing.T) {
	tests := map[string]struct {
		patterns []string
		image    string
		want     bool
	}{
		"exact normalised":             {[]string{"docker.io/nginx:latest"}, "nginx", true},
		"short name does not match":    {[]string{"nginx"}, "nginx", false},
		"short name with tag wildcard": {[]string{"nginx:*"}, "nginx:1.25", false},
		"registry wildcard":            {[]string{"*/nginx:*"}, "nginx:1.25", true},
		"no library prefix":            {[]string{"docker.io/library/nginx*"}, "nginx", false},
		"library as written":           {[]string{"docker.io/library/nginx*"}, "library/nginx", true},
		"star matches all":             {[]string{"*"}, "ghcr.io/a/b:c", true},
		"org prefix":                   {[]string{"ghcr.io/org/*"}, "ghcr.io/org/app:v1", true},
		"other org":                    {[]string{"ghcr.io/org/*"}, "ghcr.io/other/app:v1", false},
		"question mark":                {[]string{"ghcr.io/org/app:v?"}, "ghcr.io/org/app:v1", true},
		"digest drops the tag":         {[]string{"ghcr.io/org/app:*"}, "ghcr.io/org/app:v1@" + testDigest, false},
		"digest wildcard":              {[]string{"ghcr.io/org/app@*"}, "ghcr.io/org/app:v1@" + testDigest, true},
		"any of several":               {[]string{"quay.io/*", "docker.io/*"}, "busybox", true},
		"none":                         {nil, "busybox", false},
		"localhost registry":           {[]string{"localhost:5000/*"}, "localhost:5000/app", true},
		"uppercase first element":      {[]string{"Org/*"}, "Org/app", true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			images, err := ResourceImages(map[string]any{"kind": "Pod", "spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": tc.image}}}}, nil, nil)
			if err != nil || len(images) != 1 {
				t.Fatalf("%v, %v", images, err)
			}
			if got := MatchImageReferences(tc.patterns, images[0].Ref.String()); got != tc.want {
				t.Errorf("MatchImageReferences(%q, %q) = %v, want %v", tc.patterns, images[0].Ref.String(), got, tc.want)
			}
		})
	}
}

func TestSelectImages(t *testing.T) {
	obj := decodeObject(t, `{"kind":"Pod","spec":{"containers":[{"name":"a","image":"ghcr.io/org/app:v1"},{"name":"b","image":"ghcr.io/org/tools/x:v1"},{"name":"c","image":"nginx"}]}}`)
	images, err := ResourceImages(obj, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	names := func(images []Image) (out []string) {
		for _, img := range images {
			out = append(out, img.Name)
		}
		return out
	}
	tests := map[string]struct {
		iv          policy.ImageVerification
		check, skip []string
	}{
		"references and skips": {iv: policy.ImageVerification{ImageReferences: []string{"ghcr.io/org/*"}, SkipImageReferences: []string{"ghcr.io/org/tools/*"}},
			check: []string{"a"}, skip: []string{"b"}},
		"deprecated image": {iv: policy.ImageVerification{Image: "docker.io/*"}, check: []string{"c"}},
		"skip of an image not referenced": {iv: policy.ImageVerification{ImageReferences: []string{"docker.io/*"}, SkipImageReferences: []string{"ghcr.io/*"}},
			check: []string{"c"}},
		"nothing": {iv: policy.ImageVerification{ImageReferences: []string{"quay.io/*"}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			check, skip := SelectImages(&tc.iv, images)
			if !reflect.DeepEqual(names(check), tc.check) || !reflect.DeepEqual(names(skip), tc.skip) {
				t.Errorf("checked %v skipped %v, want %v %v", names(check), names(skip), tc.check, tc.skip)
			}
		})
	}
	if got := ImageSkipMessage("ghcr.io/org/tools/x:v1", "p", "r"); got != "skipping image reference image ghcr.io/org/tools/x:v1, policy p ruleName r" {
		t.Errorf("ImageSkipMessage %q", got)
	}
}

func TestDigestPatch(t *testing.T) {
	obj := decodeObject(t, `{"kind":"Deployment","spec":{"template":{"spec":{"containers":[{"name":"a","image":"nginx"},{"name":"b","image":"ghcr.io/org/app:v1@`+testDigest+`"}]}}}}`)
	images, err := ResourceImages(obj, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	op, ok := DigestPatch(images[0], testDigest)
	want := map[string]any{"op": "replace", "path": "/spec/template/spec/containers/0/image", "value": "docker.io/nginx:latest@" + testDigest}
	if !ok || !reflect.DeepEqual(op, want) {
		t.Errorf("DigestPatch = %v, %v; want %v", op, ok, want)
	}
	if op, ok := DigestPatch(images[1], testDigest); ok {
		t.Errorf("DigestPatch of an image with a digest = %v", op)
	}
}

// TestWithImageVerifier: a nil verifier is refused. The evaluation through
// a verifier is tested with the real one and a registry in
// pkg/imageverify (engine_test.go).
func TestWithImageVerifier(t *testing.T) {
	if _, err := New(WithImageVerifier(nil)); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("nil verifier: %v", err)
	}
}

// TestImageVerifyRequestCacheable: a verifier may keep an outcome only
// when it depends on the image and the entry alone.
func TestImageVerifyRequestCacheable(t *testing.T) {
	for _, tc := range []struct {
		name, entry string
		want        bool
	}{
		{"attestors", `{"attestors":[{"entries":[{"keys":{"publicKeys":"k"}}]}]}`, true},
		{"useCache false", `{"useCache":false,"attestors":[{"entries":[{"keys":{"publicKeys":"k"}}]}]}`, false},
		{"attestations without conditions", `{"attestations":[{"type":"t"}]}`, true},
		{"attestation conditions", `{"attestations":[{"type":"t","conditions":[{"all":[{"key":"a","operator":"Equals","value":"a"}]}]}]}`, false},
		{"validate.deny", `{"attestations":[{"type":"t"}],"validate":{"deny":{}}}`, false},
		{"validate.message alone", `{"attestations":[{"type":"t"}],"validate":{"message":"m"}}`, true},
	} {
		var iv policy.ImageVerification
		if err := json.Unmarshal([]byte(tc.entry), &iv); err != nil {
			t.Fatal(err)
		}
		req := ImageVerifyRequest{Verification: &iv}
		if got := req.Cacheable(); got != tc.want {
			t.Errorf("%s: Cacheable() = %v, want %v", tc.name, got, tc.want)
		}
	}
	if (&ImageVerifyRequest{}).Cacheable() {
		t.Error("a request without an entry is cacheable")
	}
}
