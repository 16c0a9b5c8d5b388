package helm_test

import (
	"maps"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/verdict-dev/verdict/deploy/crds"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
)

// reportCRDs returns the report CRDs' UIDs and whether each is owned by
// the release (helm's ownership annotations) and kept on uninstall.
func reportCRDs(t *testing.T, dyn dynamic.Interface) map[string]crdState {
	t.Helper()
	got := map[string]crdState{}
	for _, file := range crds.ReportNames() {
		name := strings.TrimSuffix(file, ".yaml") + ".wgpolicyk8s.io"
		u, err := dyn.Resource(apiextensionsCRDs).Get(t.Context(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		a := u.GetAnnotations()
		got[name] = crdState{
			uid:   u.GetUID(),
			owned: a["meta.helm.sh/release-name"] == release && a["meta.helm.sh/release-namespace"] == namespace,
			kept:  a["helm.sh/resource-policy"] == "keep",
		}
	}
	return got
}

type crdState struct {
	uid   types.UID
	owned bool
	kept  bool
}

// TestE2EReportCRDs: the report CRDs are templates of the CRD mode, so
// their life follows the release with helm on a real API server, and
// nothing a user relies on is lost. Installed on a cluster without them,
// the release owns them; an upgrade keeps the same CRDs (deleting one
// would delete every report); uninstall leaves them, as crds/ are left;
// a new install adopts them. Switching to the serving mode while they
// exist fails before anything changes, saying what to delete. (CRDs the
// release does not own, installed before it, are left alone:
// TestE2ELifecycle installs over them.)
func TestE2EReportCRDs(t *testing.T) {
	helmPath(t)
	cp := controlplane.StartForTest(t, controlplane.WithoutCRDs())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	kc := "--kubeconfig=" + cp.KubeconfigPath()
	run := func(args ...string) {
		t.Helper()
		if r := helm(t, controlPlaneArgs(append(args, kc))...); r.Err != nil {
			t.Fatalf("helm %s: %v\n%s%s", strings.Join(args, " "), r.Err, r.Stdout, r.Stderr)
		}
	}
	want := len(crds.ReportNames())

	run("install", release, chartDir, "--namespace", namespace, "--create-namespace")
	installed := reportCRDs(t, dyn)
	if len(installed) != want {
		t.Fatalf("after install: report CRDs %v, want %d", installed, want)
	}
	for name, s := range installed {
		if !s.owned || !s.kept {
			t.Errorf("%s after install: owned by the release %v, kept on uninstall %v; want both", name, s.owned, s.kept)
		}
	}

	run("upgrade", release, chartDir, "--namespace", namespace, "--set", "reporter.replicas=2")
	if got := reportCRDs(t, dyn); !maps.Equal(got, installed) {
		t.Fatalf("an upgrade replaced the report CRDs: %v, was %v", got, installed)
	}

	r := helm(t, controlPlaneArgs([]string{"upgrade", release, chartDir, "--namespace", namespace, "--set", "reporter.mode=serve", kc})...)
	if r.Err == nil {
		t.Fatal("upgrade to reporter.mode=serve with the report CRDs in place succeeded, want a refusal")
	}
	names := slices.Sorted(maps.Keys(installed))
	if msg := string(r.Stdout) + string(r.Stderr); !strings.Contains(msg, "kubectl delete customresourcedefinition "+strings.Join(names, " ")) {
		t.Errorf("the refusal does not say to delete %v:\n%s", names, msg)
	}
	if got := reportCRDs(t, dyn); !maps.Equal(got, installed) {
		t.Fatalf("the refused upgrade changed the report CRDs: %v", got)
	}

	run("uninstall", release, "--namespace", namespace)
	if got := reportCRDs(t, dyn); !maps.Equal(got, installed) {
		t.Fatalf("uninstall removed or replaced the report CRDs: %v, was %v", got, installed)
	}
	run("install", release, chartDir, "--namespace", namespace)
	if got := reportCRDs(t, dyn); !maps.Equal(got, installed) {
		t.Fatalf("a new install did not adopt the kept report CRDs: %v, was %v", got, installed)
	}
}
