package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/golden"
)

// TestCluster runs apply --cluster and compare against a real
// kube-apiserver (etcd and kube-apiserver from internal/testkit, with
// Verdict's CRDs, the report CRDs among them, and a minimal
// openreports.io API): the objects of testdata/cluster/objects.yaml for
// apply, the reports of testdata/compare/reports.yaml for compare.
func TestCluster(t *testing.T) {
	cp := controlplane.StartForTest(t)
	ctx := t.Context()
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	crds, err := os.ReadFile("testdata/compare/openreports-crds.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := controlplane.ApplyCRDs(ctx, dyn, bytes.Split(crds, []byte("\n---\n"))); err != nil {
		t.Fatal(err)
	}
	createAll(ctx, t, dyn, "testdata/cluster/objects.yaml")
	createAll(ctx, t, dyn, "testdata/compare/reports.yaml")
	kubeconfig := cp.KubeconfigPath()

	t.Run("apply", func(t *testing.T) { testApplyCluster(t, kubeconfig) })
	t.Run("kubeconfig", func(t *testing.T) { testKubeconfig(t, kubeconfig) })
	t.Run("compare", func(t *testing.T) { testCompare(t, kubeconfig) })
	t.Run("whatif", func(t *testing.T) { testWhatIfCluster(t, kubeconfig) })
	// The documentation's lines with --cluster, as they are written: the
	// kubeconfig is $KUBECONFIG's.
	t.Run("kyverno docs", func(t *testing.T) {
		t.Setenv("KUBECONFIG", kubeconfig)
		runKyvernoLines(t, "testdata/kyvernodocs", kyvernoClusterDocs, "kyverno-docs-cluster.txt")
	})
}

// kyvernoClusterDocs are the lines of the Kyverno CLI's documentation
// (see kyvernoDocs) that read a cluster: that of TestCluster, which holds
// the documentation's objects (testdata/cluster/objects.yaml) beside
// this test's.
var kyvernoClusterDocs = []kyvernoLine{
	{dir: "apply/reference", line: "kyverno apply /path/to/policy.yaml /path/to/folderOfPolicies --cluster", code: 1},
	{dir: "apply/usage", line: "kyverno apply /path/to/policy.yaml --cluster", code: 0},
	{dir: "apply/usage", line: "kubectl get clusterpolicies -o yaml | kyverno apply - --cluster", stdin: "clusterpolicies.yaml", code: 1},
	// With --cluster, -r names resources: none is named so.
	{dir: "apply/usage", line: "kyverno apply /path/to/policy1.yaml /path/to/folderFullOfPolicies --resource /path/to/resource1.yaml --resource /path/to/resource2.yaml --cluster", code: 1},
	{dir: "apply/report", line: "kyverno apply policy.yaml --cluster --policy-report", code: 1},
	{dir: "apply/report", line: "kyverno apply policy.yaml -r nginx1 -r nginx2 --cluster --policy-report", code: 1},
	{dir: "apply/report", line: "kyverno apply policy.yaml -r nginx1 -r nginx2 --cluster --policy-report -n default", code: 1},
	{dir: "apply/report", line: "kyverno apply policy.yaml --cluster --policy-report -n default", code: 1},
	{dir: "apply/vap/binding", line: "kyverno apply /path/to/check-deployment-replicas.yaml --cluster --policy-report", code: 1},
}

// testApplyCluster: the resources of the kinds the policies select, in
// the scope given; the namespace selector, configMap and apiCall entries
// answered by the cluster.
func testApplyCluster(t *testing.T, kubeconfig string) {
	policies := "testdata/cluster/policies"
	for name, tc := range map[string]struct {
		args    []string
		kyverno bool
		code    int
		golden  string
	}{
		// team/web passes everything but the count of Pods in team;
		// team/db lacks a team and pulls from elsewhere; the sandbox's
		// Pod is not selected by prod-registry (env=dev).
		"every namespace": {
			args: []string{"apply", policies, "--cluster", "--kubeconfig", kubeconfig, "--detailed-results"},
			code: ExitFailed, golden: "cluster-apply.txt",
		},
		// The sandbox's one Pod, exempted from require-team.
		"one namespace": {
			args: []string{"apply", policies, "-c", "--kubeconfig", kubeconfig, "-n", "sandbox", "-e", "testdata/cluster/exception.yaml", "--detailed-results"},
			code: ExitOK, golden: "cluster-apply-sandbox.txt",
		},
		"resources by name, as a report": {
			args: []string{"apply", policies, "--cluster", "--kubeconfig", kubeconfig, "-r", "web", "--policy-report"},
			code: ExitFailed, golden: "cluster-apply-web.yaml",
		},
		"cluster-scoped resources only": {
			args: []string{"apply", policies, "--cluster", "--kubeconfig", kubeconfig, "--cluster-wide-resources", "--detailed-results"},
			code: ExitOK, golden: "cluster-apply-cluster-wide.txt",
		},
		// Kyverno's own CLI suite (test/conformance/chainsaw/cli/apply,
		// apply-exception-with-ns-selector) runs this line and checks
		// its output.
		"kyverno: an exception in one namespace": {
			args:    []string{"apply", policies + "/require-team.yaml", "--exception", "testdata/cluster/exception.yaml", "--cluster", "--namespace", "sandbox", "--kubeconfig", kubeconfig},
			kyverno: true, code: ExitOK, golden: "cluster-kyverno-exception.txt",
		},
		// apply-vps-in-cluster-mode-with-context checks for this line.
		"kyverno: a failure in the text output": {
			args:    []string{"apply", policies + "/prod-registry.yaml", "--cluster", "--kubeconfig", kubeconfig},
			kyverno: true, code: ExitFailed, golden: "cluster-kyverno-fail.txt",
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := DialectVerdict
			if tc.kyverno {
				d = DialectKyverno
			}
			code, out, errOut := runDialect(t, d, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstderr: %s", code, tc.code, errOut)
			}
			golden.Assert(t, "testdata/golden/"+tc.golden, []byte(out))
		})
	}
	t.Run("a name not in the cluster", func(t *testing.T) {
		code, out, errOut := run(t, "apply", policies, "--cluster", "--kubeconfig", kubeconfig, "-r", "web", "-r", "nope", "-n", "team")
		if code != ExitUsage || out != "" || !strings.Contains(errOut, "resources: nope: not found in the cluster (with --cluster, -r names resources: none of a kind the policies select has that name in namespace team)") {
			t.Fatalf("exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	})
}

// testKubeconfig: --context picks the context; without --kubeconfig,
// $KUBECONFIG names the file.
func testKubeconfig(t *testing.T, kubeconfig string) {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	good := cfg.CurrentContext
	cfg.Clusters["nowhere"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	cfg.Contexts["nowhere"] = &clientcmdapi.Context{Cluster: "nowhere", AuthInfo: cfg.Contexts[good].AuthInfo}
	cfg.CurrentContext = "nowhere"
	elsewhere := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, elsewhere); err != nil {
		t.Fatal(err)
	}
	args := []string{"apply", "testdata/cluster/policies/require-team.yaml", "--cluster", "-n", "team", "-r", "web"}
	if code, _, errOut := run(t, append(args, "--kubeconfig", elsewhere)...); code != ExitUsage || !strings.Contains(errOut, "127.0.0.1:1") {
		t.Errorf("the current context, which points nowhere: exit %d, stderr %q", code, errOut)
	}
	if code, out, errOut := run(t, append(args, "--kubeconfig", elsewhere, "--context", good)...); code != ExitOK || !strings.Contains(out, "pass: 1,") {
		t.Errorf("--context %s: exit %d, stdout %q, stderr %q", good, code, out, errOut)
	}
	t.Setenv("KUBECONFIG", kubeconfig)
	if code, out, errOut := run(t, args...); code != ExitOK || !strings.Contains(out, "pass: 1,") {
		t.Errorf("$KUBECONFIG: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// testCompare: the reports of testdata/compare/reports.yaml agree on
// require-team (in either report group), on a ValidatingPolicy (whose
// rule Kyverno leaves unnamed) and on a ValidatingAdmissionPolicy; they
// disagree on disallow-latest-tag and namespace-labels; team/limit-pods
// and require-team's autogen rule are only in Kyverno's reports,
// require-probes only in Verdict's. The report of another tool, and a
// result of another source in Kyverno's report, are not read.
func testCompare(t *testing.T, kubeconfig string) {
	base := []string{"compare", "--kubeconfig", kubeconfig}
	for name, tc := range map[string]struct {
		args   []string
		code   int
		golden string
	}{
		"everything":          {args: base, code: ExitFailed, golden: "compare.txt"},
		"agreements too":      {args: append(base[:3:3], "--all"), code: ExitFailed, golden: "compare-all.txt"},
		"json":                {args: append(base[:3:3], "-o", "json"), code: ExitFailed, golden: "compare.json"},
		"one namespace":       {args: append(base[:3:3], "-n", "sandbox"), code: ExitOK, golden: "compare-sandbox.txt"},
		"policies that agree": {args: append(base[:3:3], "--policy", "require-t*", "--policy", "max-replicas", "-n", "team"), code: ExitFailed, golden: "compare-policies.txt"},
	} {
		t.Run(name, func(t *testing.T) {
			code, out, errOut := run(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d\nstderr: %s", code, tc.code, errOut)
			}
			golden.Assert(t, "testdata/golden/"+tc.golden, []byte(out))
		})
	}
	t.Run("json is the table's", func(t *testing.T) {
		_, out, _ := run(t, append(base[:3:3], "-o", "json")...)
		var c Comparison
		if err := json.Unmarshal([]byte(out), &c); err != nil {
			t.Fatal(err)
		}
		want := CompareCounts{Agree: 4, Disagree: 2, KyvernoOnly: 2, VerdictOnly: 1}
		if c.Summary != want || c.Reports[byKyverno] != 4 || c.Reports[byVerdict] != 4 {
			t.Fatalf("summary %+v, reports %v; want %+v, kyverno 4, verdict 4", c.Summary, c.Reports, want)
		}
	})
}

func runDialect(t *testing.T, d Dialect, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := MainDialect(context.Background(), d, args, strings.NewReader(""), &out, &errOut)
	return code, out.String(), errOut.String()
}

// testKinds are the resources of the kinds the cluster tests create.
var testKinds = map[string]schema.GroupVersionResource{
	"Namespace":           {Version: "v1", Resource: "namespaces"},
	"ServiceAccount":      {Version: "v1", Resource: "serviceaccounts"},
	"ConfigMap":           {Version: "v1", Resource: "configmaps"},
	"Pod":                 {Version: "v1", Resource: "pods"},
	"Deployment":          {Group: "apps", Version: "v1", Resource: "deployments"},
	"PolicyReport":        {Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"},
	"ClusterPolicyReport": {Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "clusterpolicyreports"},
	"Report":              {Group: "openreports.io", Version: "v1alpha1", Resource: "reports"},
	"ClusterReport":       {Group: "openreports.io", Version: "v1alpha1", Resource: "clusterreports"},
}

// createAll creates the objects of a multi-document YAML file, in order.
func createAll(ctx context.Context, t *testing.T, dyn dynamic.Interface, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i, doc := range bytes.Split(data, []byte("\n---\n")) {
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			t.Fatalf("%s: document %d: %v", path, i+1, err)
		}
		var obj map[string]any
		if err := json.Unmarshal(j, &obj); err != nil || obj == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		gvr, ok := testKinds[u.GetKind()]
		if !ok {
			t.Fatalf("%s: document %d: no resource for kind %s", path, i+1, u.GetKind())
		}
		ri := dyn.Resource(gvr).Namespace(u.GetNamespace())
		if u.GetNamespace() == "" {
			ri = dyn.Resource(gvr)
		}
		if _, err := ri.Create(ctx, u, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatalf("%s: create %s %s/%s: %v", path, u.GetKind(), u.GetNamespace(), u.GetName(), err)
		}
	}
}
