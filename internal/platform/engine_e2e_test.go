package platform_test

import (
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/verdict-dev/verdict/internal/platform"
	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
)

// TestE2EEngineReadsKeepVerdictsSecrets: the reads of resources the one
// engine set-up gives every service (policies' context reads; the
// generator's clone sources too) refuse the Secrets of Verdict's
// namespace on a real API server, and read those of other namespaces.
func TestE2EEngineReadsKeepVerdictsSecrets(t *testing.T) {
	cp := controlplane.StartForTest(t)
	kc, err := platform.KubeConfig{Kubeconfig: cp.KubeconfigPath(), QPS: 50, Burst: 100}.Clients("verdict-test")
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for _, ns := range []string{"verdict", "team-a"} {
		if _, err := kc.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: ns}, StringData: map[string]string{"k": "v"}}
		if _, err := kc.Kube.CoreV1().Secrets(ns).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eng, err := platform.NewEngine(kc, platform.EngineConfig{Namespace: "verdict", Limits: platform.DefaultEvaluationLimits()}, platform.WithClusterLister())
	if err != nil {
		t.Fatal(err)
	}
	for name, l := range map[string]*kubeutil.Lister{"context reads": eng.Resources, "clone sources": eng.Lister} {
		if _, err := l.GetResource(ctx, "v1", "Secret", "verdict", "s"); !errors.Is(err, kubeutil.ErrProtected) {
			t.Errorf("%s: Verdict's Secret read: %v, want ErrProtected", name, err)
		}
		if _, err := l.ListResources(ctx, "v1", "Secret", "verdict", nil); !errors.Is(err, kubeutil.ErrProtected) {
			t.Errorf("%s: Verdict's Secrets listed: %v, want ErrProtected", name, err)
		}
		all, err := l.ListResources(ctx, "v1", "Secret", "", nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		for _, s := range all {
			if md, _ := s["metadata"].(map[string]any); md["namespace"] == "verdict" {
				t.Errorf("%s: a cluster-wide list holds Verdict's Secret %v", name, md["name"])
			}
		}
		if _, err := l.GetResource(ctx, "v1", "Secret", "team-a", "s"); err != nil {
			t.Errorf("%s: a tenant's Secret: %v", name, err)
		}
	}
	// Without WithClusterLister, generate's sources are not the cluster's.
	plain, err := platform.NewEngine(kc, platform.EngineConfig{Namespace: "verdict", Limits: platform.DefaultEvaluationLimits()})
	if err != nil {
		t.Fatal(err)
	}
	if plain.Lister != nil {
		t.Fatal("a cluster lister without WithClusterLister")
	}
}
