package celeval

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

// fakeContext serves the Kyverno functions from maps, and records the
// HTTP calls.
type fakeContext struct {
	http      map[string]any // "METHOD url" → response
	calls     []string
	globals   map[string]any
	resources map[string][]map[string]any // "apiVersion resource" → objects
	images    map[string]any
}

func (f *fakeContext) HTTP(_ context.Context, method, url string, body any, headers map[string]string) (any, error) {
	f.calls = append(f.calls, fmt.Sprintf("%s %s %v %v", method, url, body, headers))
	if v, ok := f.http[method+" "+url]; ok {
		return v, nil
	}
	return nil, errors.New("no such mock")
}

func (f *fakeContext) GlobalReference(_ context.Context, name, projection string) (any, error) {
	if projection != "" {
		name += "." + projection
	}
	if v, ok := f.globals[name]; ok {
		return v, nil
	}
	return nil, fmt.Errorf("no global context entry %q", name)
}

func (f *fakeContext) GetResource(_ context.Context, apiVersion, resource, namespace, name string) (map[string]any, error) {
	for _, o := range f.resources[apiVersion+" "+resource] {
		meta := o["metadata"].(map[string]any)
		if meta["name"] == name && (meta["namespace"] == namespace || namespace == "") {
			return o, nil
		}
	}
	return nil, ErrNotFound
}

func (f *fakeContext) ListResources(_ context.Context, apiVersion, resource, namespace string, labels map[string]string) ([]map[string]any, error) {
	var out []map[string]any
	for _, o := range f.resources[apiVersion+" "+resource] {
		meta := o["metadata"].(map[string]any)
		if namespace != "" && meta["namespace"] != namespace {
			continue
		}
		l, _ := meta["labels"].(map[string]any)
		ok := true
		for k, v := range labels {
			if l[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, o)
		}
	}
	return out, nil
}

func (f *fakeContext) PostResource(_ context.Context, apiVersion, resource, namespace string, data map[string]any) (map[string]any, error) {
	f.calls = append(f.calls, fmt.Sprintf("POST %s %s %s %v", apiVersion, resource, namespace, data))
	out := map[string]any{"status": map[string]any{"allowed": data["spec"] != nil}}
	return out, nil
}

func (f *fakeContext) Now() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

func (f *fakeContext) ImageData(_ context.Context, reference string) (any, error) {
	if v, ok := f.images[reference]; ok {
		return v, nil
	}
	return nil, errors.New("no image data")
}

func TestKyvernoFunctions(t *testing.T) {
	hpa := map[string]any{"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
		"metadata": map[string]any{"name": "web", "namespace": "prod", "labels": map[string]any{"app": "web"}},
		"spec":     map[string]any{"scaleTargetRef": map[string]any{"name": "web"}}}
	fc := &fakeContext{
		http:    map[string]any{"GET https://example.com/config": map[string]any{"allowed": true}, "POST https://example.com/check": map[string]any{"ok": 1.0}},
		globals: map[string]any{"deployments": []any{map[string]any{"replicas": 2.0}}, "deployments.count": 1.0},
		resources: map[string][]map[string]any{"autoscaling/v2 horizontalpodautoscalers": {hpa},
			"networking.k8s.io/v1 networkpolicies": {{"metadata": map[string]any{"name": "deny", "namespace": "prod"}}}},
		images: map[string]any{"nginx:1.25": map[string]any{"config": map[string]any{"created": "2024-01-01T00:00:00Z"}}},
	}
	in := Input{Context: fc}
	for _, expr := range []string{
		`http.Get("https://example.com/config").allowed == true`,
		`http.get("https://example.com/config", {"Authorization": "x"}).allowed`,
		`http.Post("https://example.com/check", {"a": "b"}).ok == 1`,
		`globalContext.Get("deployments")[0].replicas == 2`,
		`globalContext.Get("deployments", "count") == 1`,
		`resource.Get("autoscaling/v2", "horizontalpodautoscalers", "prod", "web").spec.scaleTargetRef.name == "web"`,
		`dyn(resource.Get("autoscaling/v2", "horizontalpodautoscalers", "prod", "missing")) == null`,
		`resource.List("autoscaling/v2", "horizontalpodautoscalers", "prod").items.size() == 1`,
		`resource.list("autoscaling/v2", "horizontalpodautoscalers", "", {"app": "db"}).items.size() == 0`,
		`resource.List("v1", "pods", "prod").items.size() == 0`,
		`timestamp(image.GetMetadata("nginx:1.25").config.created) < timestamp("2025-01-01T00:00:00Z")`,
		`image("ghcr.io/acme/app:1.2@sha256:` + strings.Repeat("a", 64) + `").tag() == "1.2"`,
		`image("nginx").registry() == "index.docker.io" && image("nginx").repository() == "library/nginx" && image("nginx").identifier() == "latest"`,
		`parseImageReference("registry.example.com:5000/team/app@sha256:` + strings.Repeat("b", 64) + `").containsDigest()`,
		`isImage("nginx:1") && !isImage("UPPER CASE")`,
		`time.now() == timestamp("2026-01-02T03:04:05Z")`,
		// GVRs, and the namespaced policies' forms (namespace '': the
		// Context's confinement decides whose it is).
		`resource.Get(resource.ToGVR("autoscaling/v2", "HorizontalPodAutoscaler"), "prod", "web").metadata.name == "web"`,
		`resource.List(resource.toGVR("autoscaling/v2", "HorizontalPodAutoscaler"), "prod", {"app": "web"}).items.size() == 1`,
		`resource.List(resource.ToGVR("autoscaling/v2", "HorizontalPodAutoscaler")).items.size() == 1`,
		`resource.Get("autoscaling/v2", "horizontalpodautoscalers", "web").metadata.namespace == "prod"`,
		`dyn(resource.get(resource.ToGVR("autoscaling/v2", "HorizontalPodAutoscaler"), "web")) != null`,
		`resource.List("autoscaling/v2", "horizontalpodautoscalers", {"app": "web"}).items.size() == 1`,
		`resource.List(resource.ToGVR("networking.k8s.io/v1", "NetworkPolicy"), "prod").items.size() == 1`,
	} {
		ok, err := NewEvaluation(context.Background(), in, nil, 0).Bool(mustCompile(t, expr, Bool))
		if err != nil || !ok {
			t.Errorf("%s: %v, %v", expr, ok, err)
		}
	}
	if len(fc.calls) != 3 || fc.calls[1] != "GET https://example.com/config <nil> map[Authorization:x]" || fc.calls[2] != "POST https://example.com/check map[a:b] map[]" {
		t.Errorf("http calls %q", fc.calls)
	}
	// Without a Context, the functions end in an error that says so.
	_, err := NewEvaluation(context.Background(), Input{}, nil, 0).Bool(mustCompile(t, `http.Get("https://example.com/config").allowed`, Bool))
	if err == nil || !strings.Contains(err.Error(), "not available here") {
		t.Fatalf("no context: %v", err)
	}
	// A source's error is the expression's.
	_, err = NewEvaluation(context.Background(), in, nil, 0).Bool(mustCompile(t, `http.Get("https://example.com/other").allowed`, Bool))
	if err == nil || !strings.Contains(err.Error(), "http GET https://example.com/other: no such mock") {
		t.Fatalf("mock missing: %v", err)
	}
}
