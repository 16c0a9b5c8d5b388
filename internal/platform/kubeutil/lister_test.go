package kubeutil_test

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// TestContextReads: against a real API server, the Lister policies read
// through reads by kind, tells kinds from resource names and their
// scope, and refuses a list above its item bound instead of holding it.
func TestContextReads(t *testing.T) {
	cp := controlplane.StartForTest(t)
	ctx := t.Context()
	kc := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	for _, ns := range []string{"a", "b"} {
		if _, err := kc.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 6 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i), Namespace: "a", Labels: map[string]string{"even": fmt.Sprint(i%2 == 0)}}}
		if _, err := kc.CoreV1().ConfigMaps("a").Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	disc := discovery.NewDiscoveryClientForConfigOrDie(cp.RESTConfig())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())

	l := kubeutil.NewLister(dyn, mapper, kubeutil.WithMaxItems(4))
	if _, err := l.ListResources(ctx, "v1", "ConfigMap", "a", nil); !errors.Is(err, kubeutil.ErrTooManyItems) {
		t.Fatalf("6 ConfigMaps under a bound of 4: %v", err)
	}
	// The bound counts what is read, not what the selector keeps.
	if _, err := l.ListResources(ctx, "v1", "ConfigMap", "a", &policy.LabelSelector{MatchLabels: map[string]string{"even": "true"}}); !errors.Is(err, kubeutil.ErrTooManyItems) {
		t.Fatalf("6 ConfigMaps, 3 selected, under a bound of 4: %v", err)
	}
	l = kubeutil.NewContextLister(dyn, mapper)
	got, err := l.ListResources(ctx, "v1", "ConfigMap", "a", nil)
	if err != nil || len(got) != 6 {
		t.Fatalf("list: %d, %v", len(got), err)
	}
	if _, err := l.GetResource(ctx, "v1", "ConfigMap", "b", "cm-0"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("a ConfigMap of another namespace: %v", err)
	}
	if kind, err := l.KindFor(ctx, "v1", "configmaps"); err != nil || kind != "ConfigMap" {
		t.Fatalf("KindFor configmaps: %q, %v", kind, err)
	}
	if _, err := l.KindFor(ctx, "v1", "nothings"); !errors.Is(err, engine.ErrNotFound) {
		t.Fatalf("KindFor an unserved resource: %v", err)
	}
	for kind, want := range map[string]bool{"ConfigMap": true, "Namespace": false} {
		if got, err := l.Namespaced(ctx, "v1", kind); err != nil || got != want {
			t.Errorf("Namespaced(%s) = %v, %v; want %v", kind, got, err, want)
		}
	}

	// Namespace b stands for Verdict's: its Secrets are out of reach,
	// alone or among every namespace's, whatever the client may read.
	if _, err := kc.CoreV1().Secrets("b").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ca"}, StringData: map[string]string{"key": "private"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	l = kubeutil.NewContextLister(dyn, mapper, kubeutil.WithProtectedNamespace("b"))
	if _, err := l.GetResource(ctx, "v1", "Secret", "b", "ca"); !errors.Is(err, kubeutil.ErrProtected) {
		t.Fatalf("Verdict's Secret: %v", err)
	}
	if _, err := kc.CoreV1().Secrets("a").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "regcred"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	all, err := l.ListResources(ctx, "v1", "Secret", "", nil)
	if err != nil || len(all) != 1 || all[0]["metadata"].(map[string]any)["name"] != "regcred" {
		t.Fatalf("every namespace's Secrets: %d, %v; want only a's", len(all), err)
	}
	if _, err := l.GetResource(ctx, "v1", "ConfigMap", "a", "cm-0"); err != nil {
		t.Fatalf("a ConfigMap: %v", err)
	}
}
