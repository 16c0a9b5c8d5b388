package cli

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// decodeInto reads YAML the way test files are read.
func decodeInto(t *testing.T, yml string, out any) {
	t.Helper()
	dir := writeFiles(t, map[string]string{"f.yaml": yml})
	if err := decodeFileInto(dir+"/f.yaml", out); err != nil {
		t.Fatal(err)
	}
}

func TestAPICallMockValidation(t *testing.T) {
	tests := map[string]struct {
		yml string
		// err is a substring of the error; "" for none.
		err string
	}{
		"url":                   {yml: `[{url: "https://x.example.com/check", response: {body: {a: 1}}}]`},
		"urlPath with a method": {yml: `[{urlPath: /api/v1/namespaces, method: get, response: {statusCode: 404, body: {}}}]`},
		"same target, other methods": {yml: `[{urlPath: /a, method: GET, response: {body: {}}}, {urlPath: /a, method: POST, response: {body: {}}},
		  {urlPath: /a, response: {body: {}}}]`},
		"neither url nor urlPath": {yml: `[{response: {body: {}}}]`, err: "apiCallResponses[0]: one of url or urlPath is required"},
		"both":                    {yml: `[{url: "https://x.example.com", urlPath: /a, response: {body: {}}}]`, err: "apiCallResponses[0]: url and urlPath are mutually exclusive"},
		"relative url":            {yml: `[{url: x.example.com/check, response: {body: {}}}]`, err: `url "x.example.com/check" must be an absolute http or https URL`},
		"url without host":        {yml: `[{url: "https:///check", response: {body: {}}}]`, err: "has no host"},
		"relative urlPath":        {yml: `[{urlPath: api/v1, response: {body: {}}}]`, err: `urlPath "api/v1" must be an absolute path`},
		"method":                  {yml: `[{urlPath: /a, method: PUT, response: {body: {}}}]`, err: `method "PUT" must be GET or POST`},
		"no body":                 {yml: `[{urlPath: /a, response: {statusCode: 200}}]`, err: "response.body is required"},
		"body not an object":      {yml: `[{urlPath: /a, response: {body: [1]}}]`, err: "response.body must be an object"},
		"status out of range":     {yml: `[{urlPath: /a, response: {statusCode: 600, body: {}}}]`, err: "response.statusCode 600 must be between 100 and 599"},
		"duplicate":               {yml: `[{urlPath: /a, response: {body: {}}}, {urlPath: /b, response: {body: {}}}, {urlPath: " /a", response: {body: {}}}]`, err: `apiCallResponses[2]: a second entry for "/a"`},
		"duplicate method":        {yml: `[{urlPath: /a, method: post, response: {body: {}}}, {urlPath: /a, method: POST, response: {body: {}}}]`, err: `a second entry for "POST:/a"`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var mocks []apiCallMock
			decodeInto(t, tc.yml, &mocks)
			_, err := indexAPICallMocks(mocks)
			if tc.err == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) || !errors.Is(err, ErrInvalidMock) {
				t.Fatalf("error %v, want one wrapping ErrInvalidMock and mentioning %q", err, tc.err)
			}
		})
	}
}

func TestAPICallMockAnswers(t *testing.T) {
	var mocks []apiCallMock
	decodeInto(t, `
- url: https://checks.example.com/allowed
  response: {body: {allowed: true}}
- url: https://checks.example.com/post-only
  method: POST
  response: {body: {posted: true}}
- urlPath: /api/v1/namespaces/default/pods
  method: GET
  response: {body: {get: true}}
- urlPath: /api/v1/namespaces/default/pods
  response: {body: {any: true}}
- urlPath: /apis/x/v1/broken
  response: {statusCode: 503, body: {}}
`, &mocks)
	index, err := indexAPICallMocks(mocks)
	if err != nil {
		t.Fatal(err)
	}
	loader := &fileLoader{mocks: index, objects: []map[string]any{
		{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "namespace": "default"}},
	}}
	service := func(url, method string) *policy.APICall {
		return &policy.APICall{Method: method, Service: &policy.ServiceCall{URL: url}}
	}
	tests := map[string]struct {
		call    *policy.APICall
		want    string // JSON of the answer
		wantErr error
	}{
		"service url, any method":         {call: service("https://checks.example.com/allowed", "POST"), want: `{"allowed":true}`},
		"service url, its method":         {call: service("https://checks.example.com/post-only", "POST"), want: `{"posted":true}`},
		"service url, another method":     {call: service("https://checks.example.com/post-only", ""), wantErr: engine.ErrNotAvailable},
		"service url not mocked":          {call: service("https://checks.example.com/other", ""), wantErr: engine.ErrNotAvailable},
		"urlPath, GET by default":         {call: &policy.APICall{URLPath: "/api/v1/namespaces/default/pods"}, want: `{"get":true}`},
		"urlPath, the entry without one":  {call: &policy.APICall{URLPath: "/api/v1/namespaces/default/pods", Method: "POST"}, want: `{"any":true}`},
		"urlPath is not a service url":    {call: service("/api/v1/namespaces/default/pods", "GET"), want: `{"get":true}`},
		"non-2xx fails the entry":         {call: &policy.APICall{URLPath: "/apis/x/v1/broken"}, wantErr: ErrMockStatus},
		"not mocked, served from objects": {call: &policy.APICall{URLPath: "/api/v1/namespaces/default/configmaps/c"}, want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default"}}`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := loader.APICall(context.Background(), tc.call)
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("error %v, want %v", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if s := string(mustJSON(t, got)); s != tc.want {
				t.Fatalf("got %s, want %s", s, tc.want)
			}
		})
	}
}

func TestGlobalContextEntries(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"deploy.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: a}\n---\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: b}\n",
	})
	tests := map[string]struct {
		yml string
		// ref is the globalReference name read; want the JSON of its value.
		ref, want string
		err       string
	}{
		"data":                      {yml: `[{name: e, data: {a: [1, 2]}}]`, ref: "e", want: `{"a":[1,2]}`},
		"data and fieldPath":        {yml: `[{name: e, data: {a: [1, 2]}, fieldPath: a}]`, ref: "e", want: `[1,2]`},
		"projection":                {yml: `[{name: e, data: {a: [1, 2]}, projections: [{name: n, path: "length(a)"}]}]`, ref: "e", want: `{"n":2}`},
		"projection by name":        {yml: `[{name: e, data: {a: [1, 2]}, projections: [{name: n, path: "length(a)"}]}]`, ref: "e.n", want: `2`},
		"projection, more dots":     {yml: `[{name: e, data: {a: 1}, projections: [{name: n, path: a}]}]`, ref: "e.n.x", want: `1`},
		"inline resources":          {yml: `[{name: e, resources: [{kind: Pod}, {kind: Pod}], projections: [{name: n, path: "length(@)"}]}]`, ref: "e.n", want: `2`},
		"empty resources":           {yml: `[{name: e, resources: []}]`, ref: "e", want: `[]`},
		"resource files":            {yml: `[{name: e, resourceFiles: [deploy.yaml], fieldPath: "[].metadata.name"}]`, ref: "e", want: `["a","b"]`},
		"unknown projection":        {yml: `[{name: e, data: {a: 1}, projections: [{name: n, path: a}]}]`, ref: "e.m", err: `global context entry "e": no projection "m"`},
		"projection of a list":      {yml: `[{name: e, resources: []}]`, ref: "e.n", err: "the entry is not an object"},
		"unknown entry":             {yml: `[{name: e, data: {}}]`, ref: "f", err: `no global context entry "f" among the test's globalContextEntries`},
		"no name":                   {yml: `[{data: {}}]`, err: "globalContextEntries[0]: name is required"},
		"duplicate":                 {yml: `[{name: e, data: {}}, {name: " e", data: {}}]`, err: `globalContextEntries[1]: a second entry named "e"`},
		"no source":                 {yml: `[{name: e}]`, err: `globalContextEntries[0] "e": one of data, resources or resourceFiles is required`},
		"two sources":               {yml: `[{name: e, data: {}, resources: []}]`, err: "data, resources and resourceFiles are mutually exclusive"},
		"data not an object":        {yml: `[{name: e, data: [1]}]`, err: "data must be an object"},
		"resource not an object":    {yml: `[{name: e, resources: [1]}]`, err: "resources[0] must be an object"},
		"projection without a name": {yml: `[{name: e, data: {}, projections: [{path: a}]}]`, err: "projections[0]: name is required"},
		"projection without a path": {yml: `[{name: e, data: {}, projections: [{name: n}]}]`, err: `projections[0] "n": path is required`},
		"absolute resource file":    {yml: `[{name: e, resourceFiles: [/etc/passwd]}]`, err: `resourceFiles[0] "/etc/passwd": the path must be relative`},
		"escaping resource file":    {yml: `[{name: e, resourceFiles: [a/../../x.yaml]}]`, err: "the path must not leave the test file's folder"},
		"empty resource file":       {yml: `[{name: e, resourceFiles: [""]}]`, err: "resourceFiles[0]: the path is empty"},
		"missing resource file":     {yml: `[{name: e, resourceFiles: [nope.yaml]}]`, err: `globalContextEntries[0] "e": resourceFiles "nope.yaml"`},
		"bad fieldPath":             {yml: `[{name: e, data: {}, fieldPath: "a["}]`, err: `fieldPath "a["`},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var entries []globalContextEntry
			decodeInto(t, tc.yml, &entries)
			values, err := resolveGlobalContextEntries(entries, &testFile{dir: dir})
			if err == nil {
				loader := &fileLoader{gctx: values}
				var got any
				got, err = loader.GlobalReference(context.Background(), tc.ref)
				if err == nil && tc.err == "" {
					if s := string(mustJSON(t, got)); s != tc.want {
						t.Fatalf("got %s, want %s", s, tc.want)
					}
					return
				}
			}
			if tc.err == "" || err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.err)
			}
		})
	}
}

// TestGlobalReferenceWithoutEntries: without globalContextEntries, a
// globalReference is not available (the entry is left out), unless the
// values file's globalReferences has it.
func TestGlobalReferenceWithoutEntries(t *testing.T) {
	loader := &fileLoader{globals: map[string]any{"g": "v"}}
	if v, err := loader.GlobalReference(context.Background(), "g"); err != nil || v != "v" {
		t.Fatalf("got %v, %v", v, err)
	}
	if _, err := loader.GlobalReference(context.Background(), "h"); !errors.Is(err, engine.ErrNotAvailable) {
		t.Fatalf("error %v, want ErrNotAvailable", err)
	}
}

// mustJSON is the document in JSON.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
