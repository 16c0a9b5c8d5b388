package helm_test

import (
	"errors"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/verdict-dev/verdict/internal/platform/admissionfilter"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/webhook/registrar"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// noPolicies is a registrar.PolicySource without policies: the registrar
// still writes the policy-validation webhook.
type noPolicies struct{}

func (noPolicies) Policies() []*engine.Policy { return nil }
func (noPolicies) Changed() <-chan struct{}   { return nil }

// TestE2ELifecycle installs the release into a real kube-apiserver with
// helm, runs the webhook's registrar as the webhook's ServiceAccount (with
// the chart's RBAC), and checks the uninstall design end to end: the
// registrar fills in the release's configurations; an upgrade leaves its
// webhooks alone; a configuration deleted by hand is not recreated by the
// registrar (it may not create one) but by the next upgrade; and uninstall
// deletes both configurations. The control plane has no kubelet: the
// Deployments' pods never run, the registrar runs here instead.
func TestE2ELifecycle(t *testing.T) {
	helmPath(t)
	cp := controlplane.StartForTest(t)
	admin := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	ctx := t.Context()
	kc := "--kubeconfig=" + cp.KubeconfigPath()
	run := func(args ...string) {
		t.Helper()
		r := helm(t, controlPlaneArgs(append(args, kc))...)
		if r.Err != nil {
			t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), r.Err, r.Stdout, r.Stderr)
		}
	}

	run("install", release, chartDir, "--namespace", namespace, "--create-namespace")
	// The control plane installed the report CRDs before the release:
	// the release leaves them alone rather than failing to own them.
	for name, s := range reportCRDs(t, dynamic.NewForConfigOrDie(cp.RESTConfig())) {
		if s.owned {
			t.Errorf("the release took over %s, installed before it", name)
		}
	}

	// The leader's registrar, as the webhook's ServiceAccount.
	sa := rest.CopyConfig(cp.RESTConfig())
	sa.Impersonate = rest.ImpersonationConfig{
		UserName: "system:serviceaccount:" + namespace + ":verdict-webhook",
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	port := int32(443)
	reg := registrar.New(kubernetes.NewForConfigOrDie(sa), registrar.StaticResolver{}, noPolicies{}, registrar.Options{
		Service:  &admissionregistrationv1.ServiceReference{Namespace: namespace, Name: "verdict-webhook", Port: &port},
		CABundle: []byte("-----BEGIN CERTIFICATE-----\n"),
		Filter:   admissionfilter.New([]string{namespace, "nats"}, nil),
	})
	webhooks := func() int {
		t.Helper()
		v, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, registrar.DefaultValidatingName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return len(v.Webhooks)
	}

	if n := webhooks(); n != 0 {
		t.Fatalf("installed with %d webhooks, want the chart's empty configuration", n)
	}
	if _, err := reg.Reconcile(ctx); err != nil {
		t.Fatalf("registrar with the chart's RBAC: %v", err)
	}
	filled := webhooks()
	if filled == 0 {
		t.Fatal("the registrar wrote no webhook")
	}

	// An upgrade leaves the registrar's webhooks alone.
	run("upgrade", release, chartDir, "--namespace", namespace, "--set", "reporter.replicas=3")
	if n := webhooks(); n != filled {
		t.Fatalf("after helm upgrade: %d webhooks, want %d", n, filled)
	}
	if res, err := reg.Reconcile(ctx); err != nil || res.ValidatingChanged || res.MutatingChanged {
		t.Fatalf("after helm upgrade the registrar had to change %+v (%v)", res, err)
	}

	// Deleted by hand (the break-glass switch): the registrar may not
	// bring it back; the next upgrade does, and the registrar fills it in.
	if err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Delete(ctx, registrar.DefaultValidatingName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := reg.Reconcile(ctx); !apierrors.IsForbidden(errors.Unwrap(err)) && !apierrors.IsForbidden(err) {
		t.Fatalf("registrar recreating a deleted configuration: %v, want forbidden", err)
	}
	run("upgrade", release, chartDir, "--namespace", namespace, "--set", "reporter.replicas=3")
	if _, err := reg.Reconcile(ctx); err != nil {
		t.Fatal(err)
	}
	if n := webhooks(); n != filled {
		t.Fatalf("after the upgrade restored it: %d webhooks, want %d", n, filled)
	}

	// Uninstall leaves no configuration behind, and the registrar cannot
	// write one.
	run("uninstall", release, "--namespace", namespace)
	if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, registrar.DefaultValidatingName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("validating configuration after uninstall: %v", err)
	}
	if _, err := admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, registrar.DefaultMutatingName, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("mutating configuration after uninstall: %v", err)
	}
	if _, err := reg.Reconcile(ctx); err == nil {
		t.Error("the registrar wrote a configuration after uninstall")
	}
	for _, name := range []string{registrar.DefaultValidatingName, registrar.DefaultMutatingName} {
		if _, err := admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Errorf("%s exists after uninstall: %v", name, err)
		}
	}
}
