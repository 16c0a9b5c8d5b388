package controlplane

import (
	"context"
	"fmt"
	"time"

	"github.com/verdict-dev/verdict/deploy/crds"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/yaml"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

const fieldManager = "verdict-controlplane"

// createGrace is how long after a CRD becomes Established the apiserver
// delays each create of its objects by two seconds (so that, in HA, every
// apiserver has seen the CRD before a follow-up request; see
// apiextensions-apiserver customresource_handler.go).
const createGrace = 2 * time.Second

// installCRDs server-side applies deploy/crds, waits until each CRD is
// Established (its API is served), and returns when creates of custom
// objects stop being delayed.
func (cp *ControlPlane) installCRDs(ctx context.Context) (time.Time, error) {
	client, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		return time.Time{}, fmt.Errorf("controlplane: client: %w", err)
	}
	return installCRDs(ctx, client)
}

// InstallCRDs server-side applies Verdict's CRDs (deploy/crds) with client,
// waits until each is Established, then until the apiserver stops delaying
// the first creates of their objects (two seconds), or until ctx ends.
func InstallCRDs(ctx context.Context, client dynamic.Interface) error {
	fast, err := installCRDs(ctx, client)
	if err != nil {
		return err
	}
	return sleepUntil(ctx, fast)
}

func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return nil
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// ApplyCRDs server-side applies the CRDs (YAML documents, one CRD each)
// with client, as InstallCRDs does Verdict's: other projects' CRDs, such
// as Kyverno's (internal/testkit/kyvernocrds).
func ApplyCRDs(ctx context.Context, client dynamic.Interface, docs [][]byte) error {
	names := make([]string, len(docs))
	for i := range docs {
		names[i] = fmt.Sprintf("document %d", i)
	}
	fast, err := applyCRDs(ctx, client, docs, names)
	if err != nil {
		return err
	}
	return sleepUntil(ctx, fast)
}

func installCRDs(ctx context.Context, client dynamic.Interface) (time.Time, error) {
	return applyCRDs(ctx, client, crds.All(), crds.Names())
}

func applyCRDs(ctx context.Context, client dynamic.Interface, docs [][]byte, docNames []string) (time.Time, error) {
	var names []string
	for i, raw := range docs {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(raw, &obj.Object); err != nil {
			return time.Time{}, fmt.Errorf("controlplane: CRD %s: %w", docNames[i], err)
		}
		if _, err := client.Resource(crdGVR).Apply(ctx, obj.GetName(), obj,
			metav1.ApplyOptions{FieldManager: fieldManager, Force: true}); err != nil {
			return time.Time{}, fmt.Errorf("controlplane: apply CRD %s: %w", obj.GetName(), err)
		}
		names = append(names, obj.GetName())
	}
	var fast time.Time
	for _, name := range names {
		established, err := waitEstablished(ctx, client, name)
		if err != nil {
			return time.Time{}, err
		}
		// The apiserver compares with the transition time as stored, in
		// whole seconds, as it is here.
		if t := established.Add(createGrace + 50*time.Millisecond); t.After(fast) {
			fast = t
		}
	}
	return fast, nil
}

// waitEstablished returns when the CRD became Established.
func waitEstablished(ctx context.Context, client dynamic.Interface, name string) (time.Time, error) {
	for {
		obj, err := client.Resource(crdGVR).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return time.Time{}, fmt.Errorf("controlplane: CRD %s: %w", name, err)
		}
		conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
		for _, c := range conds {
			m, ok := c.(map[string]any)
			if !ok {
				continue
			}
			if m["type"] == "NamesAccepted" && m["status"] == "False" {
				return time.Time{}, fmt.Errorf("controlplane: CRD %s: names not accepted: %v", name, m["message"])
			}
			if m["type"] == "Established" && m["status"] == "True" {
				at, err := time.Parse(time.RFC3339, fmt.Sprint(m["lastTransitionTime"]))
				if err != nil {
					at = time.Now() // wait the whole grace from now
				}
				return at, nil
			}
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("controlplane: CRD %s not Established: %w", name, ctx.Err())
		case <-time.After(pollInterval):
		}
	}
}
