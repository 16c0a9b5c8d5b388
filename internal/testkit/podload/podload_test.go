package podload_test

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/podload"
)

func TestValidate(t *testing.T) {
	ok := podload.Config{REST: &rest.Config{}, Namespace: "testns", Clients: 1, Iterations: 1}
	tests := map[string]struct {
		mod  func(*podload.Config)
		fail bool
	}{
		"valid":          {mod: func(*podload.Config) {}},
		"no REST config": {mod: func(c *podload.Config) { c.REST = nil }, fail: true},
		"no namespace":   {mod: func(c *podload.Config) { c.Namespace = "" }, fail: true},
		"no clients":     {mod: func(c *podload.Config) { c.Clients = 0 }, fail: true},
		"no iterations":  {mod: func(c *podload.Config) { c.Iterations = 0 }, fail: true},
		"unknown mode":   {mod: func(c *podload.Config) { c.Mode = "ws" }, fail: true},
		"fresh":          {mod: func(c *podload.Config) { c.Mode = podload.ModeFresh }},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := ok
			tc.mod(&c)
			err := c.Validate()
			if (err != nil) != tc.fail {
				t.Fatalf("Validate() = %v, want failure %v", err, tc.fail)
			}
			if err != nil && !errors.Is(err, podload.ErrInvalidConfig) {
				t.Fatalf("%v does not wrap ErrInvalidConfig", err)
			}
		})
	}
}

// TestRunCreatesPods: every mode creates its iterations' Pods through a
// real API server, each measured, none failed.
func TestRunCreatesPods(t *testing.T) {
	cp := controlplane.StartForTest(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	if err := podload.EnsureNamespace(ctx, kube, "testns"); err != nil {
		t.Fatal(err)
	}
	if err := podload.EnsureNamespace(ctx, kube, "testns"); err != nil {
		t.Fatalf("a second time: %v", err)
	}
	const iterations = 12
	for i, mode := range podload.Modes {
		res, err := podload.Run(ctx, podload.Config{REST: cp.RESTConfig(), Namespace: "testns", Clients: 3, Iterations: iterations, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		if res.Errors > 0 || len(res.Iterations) != iterations || len(res.Creates) != iterations || res.Rate() <= 0 {
			t.Fatalf("%s: %d errors (first %v), %d iterations and %d creates measured, %.0f/s", mode, res.Errors, res.FirstErr, len(res.Iterations), len(res.Creates), res.Rate())
		}
		pods, err := kube.CoreV1().Pods("testns").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, want := len(pods.Items), (i+1)*iterations; got != want {
			t.Fatalf("%s: %d Pods, want %d", mode, got, want)
		}
	}
}
