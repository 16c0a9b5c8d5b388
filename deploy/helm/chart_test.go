package helm_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/verdict-dev/verdict/deploy/crds"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit/golden"
	"github.com/verdict-dev/verdict/internal/testkit/helmbin"
)

const (
	chartDir  = "verdict"
	haValues  = "verdict/ci/ha-values.yaml"
	release   = "verdict"
	namespace = "verdict"
)

// helmPath is the helm v4 binary.
func helmPath(t *testing.T) string {
	t.Helper()
	return helmOf(t, helmbin.V4)
}

// helmOf is the helm binary of major version m. Under -short it is used
// only when already built (make helm), never built: a cold build takes
// minutes.
func helmOf(t *testing.T, m helmbin.Major) string {
	t.Helper()
	if testing.Short() {
		p, ok := helmbin.Cached(m)
		if !ok {
			t.Skipf("helm v%d is not built (make helm builds it); skipped under -short", m)
		}
		return p
	}
	p, err := helmbin.Path(t.Context(), m)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// helm runs helm with args in an empty helm home.
func helm(t *testing.T, args ...string) helmbin.Result {
	t.Helper()
	return helmbin.Run(t.Context(), helmPath(t), t.TempDir(), args...)
}

// natsAuth is the one value an install must give beyond the defaults:
// how the services authenticate to NATS (the chart refuses to render
// without one, see TestNATSAuthRequired).
var natsAuth = []string{"--set", "nats.credentials.secretName=verdict-nats-credentials"}

// withAuth is args after natsAuth (a later --set wins).
func withAuth(args ...string) []string { return append(slices.Clone(natsAuth), args...) }

// controlPlaneArgs adds to a helm install or upgrade against the test's
// control plane (no NATS namespace, no pods running) natsAuth and no NATS
// NetworkPolicy; other commands are left as they are.
func controlPlaneArgs(args []string) []string {
	if len(args) == 0 || (args[0] != "install" && args[0] != "upgrade") {
		return args
	}
	return append(args, withAuth("--set", "nats.networkPolicy.enabled=false")...)
}

// render is `helm template` of the chart as release verdict in namespace
// verdict, with natsAuth and extra arguments (-f, --set); it fails the
// test on error.
func render(t *testing.T, args ...string) []byte {
	t.Helper()
	r := helm(t, append([]string{"template", release, chartDir, "--namespace", namespace}, withAuth(args...)...)...)
	if r.Err != nil {
		t.Fatalf("helm template %s: %v\n%s", strings.Join(args, " "), r.Err, r.Stderr)
	}
	return r.Stdout
}

// decode splits a multi-document manifest into objects (empty documents
// skipped).
func decode(t *testing.T, manifest []byte) []*unstructured.Unstructured {
	t.Helper()
	rd := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	var out []*unstructured.Unstructured
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%v\n%s", err, doc)
		}
		if len(m) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
}

// renders are the value sets every test renders: the defaults (with
// natsAuth, which has none), the HA values of ci/ha-values.yaml, and the
// reporter's serving mode.
var renders = map[string][]string{
	"default": natsAuth,
	"ha":      {"-f", haValues},
	"serve":   withAuth("--set", "reporter.mode=serve"),
	// Beside a running Kyverno: no generator or cleaner, the webhook's
	// --shadow, reports named apart, read-only RBAC on Kyverno's groups.
	"kyverno-shadow": withAuth("--set", "kyverno.mode=shadow"),
}

// TestCRDsAreDeployCRDs: the chart's crds/ and report-crds/ are exactly
// deploy/crds, the one source of truth (make chart-crds copies it); the
// report CRDs are in report-crds/, which the CRD mode's template
// installs.
func TestCRDsAreDeployCRDs(t *testing.T) {
	var inChart []string
	for _, dir := range []string{"crds", "report-crds"} {
		entries, err := os.ReadDir(filepath.Join(chartDir, dir))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range entries {
			if want := slices.Contains(crds.ReportNames(), e.Name()); want != (dir == "report-crds") {
				t.Errorf("%s is in %s/: run make chart-crds", e.Name(), dir)
			}
			inChart = append(inChart, e.Name())
		}
	}
	slices.Sort(inChart)
	if want := crds.Names(); !slices.Equal(inChart, want) {
		t.Fatalf("the chart holds %v, deploy/crds %v: run make chart-crds", inChart, want)
	}
	for _, name := range crds.Names() {
		want, err := crds.FS.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		dir := "crds"
		if slices.Contains(crds.ReportNames(), name) {
			dir = "report-crds"
		}
		got, err := os.ReadFile(filepath.Join(chartDir, dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from deploy/crds/%s: run make chart-crds", filepath.Join(chartDir, dir, name), name)
		}
	}
}

// TestLint: helm lint --strict is clean with the default and the HA values.
func TestLint(t *testing.T) {
	for name, args := range renders {
		t.Run(name, func(t *testing.T) {
			r := helm(t, append([]string{"lint", chartDir, "--strict", "--namespace", namespace}, args...)...)
			out := string(r.Stdout) + string(r.Stderr)
			if r.Err != nil {
				t.Fatalf("helm lint: %v\n%s", r.Err, out)
			}
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Errorf("helm lint output:\n%s", out)
			}
			if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
				t.Errorf("helm lint is not clean:\n%s", out)
			}
		})
	}
}

// TestRenderGolden pins the rendered manifests of the default and the HA
// values (VERDICT_UPDATE_GOLDEN=1 rewrites them; review with git diff).
func TestRenderGolden(t *testing.T) {
	for name, args := range renders {
		t.Run(name, func(t *testing.T) {
			out := render(t, args...)
			if len(decode(t, out)) == 0 {
				t.Fatal("nothing rendered")
			}
			golden.Assert(t, filepath.Join("testdata", name+".yaml"), out)
		})
	}
}

// TestSchemaRefuses: values that make no sense are refused before anything
// renders, by values.schema.json (the path of the bad value and what it
// should be) or by the chart's own checks.
func TestSchemaRefuses(t *testing.T) {
	tests := map[string]struct {
		args []string
		want []string // every one is in helm's error output
		// chart is a refusal of the chart's own templates (fail), which
		// helm lint does not run; the others are the schema's.
		chart bool
	}{
		"webhook replicas 0": {
			args: []string{"--set", "webhook.replicas=0"},
			want: []string{"/webhook/replicas", "minimum", "want 1"},
		},
		"worker replicas negative": {
			args: []string{"--set", "generator.replicas=-1"},
			want: []string{"/generator/replicas", "minimum"},
		},
		"policy HTTP allowlist not http(s)": {
			args: []string{"--set", "policyHTTP.allowlist[0]=ftp://files.example.com"},
			want: []string{"/policyHTTP/allowlist/0", "does not match pattern"},
		},
		"policy HTTP misspelt": {
			args: []string{"--set", "policyHTTP.enable=true"},
			want: []string{"policyHTTP", "additional properties 'enable' not allowed"},
		},
		"unknown log level": {
			args: []string{"--set", "log.level=verbose"},
			want: []string{"/log/level", "must be one of", "'trace', 'debug', 'info', 'warn', 'error'"},
		},
		"unknown log level of one service": {
			args: []string{"--set", "reporter.log.level=loud"},
			want: []string{"/reporter/log/level", "must be one of"},
		},
		"negative result buffer": {
			args: []string{"--set", "webhook.resultBuffer=-5"},
			want: []string{"/webhook/resultBuffer", "minimum"},
		},
		"work budget 0": {
			args: []string{"--set", "evaluationLimits.workBudget=0"},
			want: []string{"/evaluationLimits/workBudget", "minimum"},
		},
		"memory budget 0Mi": {
			args: []string{"--set", "evaluationLimits.memoryBudget=0Mi"},
			want: []string{"/evaluationLimits/memoryBudget"},
		},
		"memory budget not a quantity": {
			args: []string{"--set", "evaluationLimits.memoryBudget=64MB"},
			want: []string{"/evaluationLimits/memoryBudget"},
		},
		"evaluation limit misspelt": {
			args: []string{"--set", "evaluationLimits.maxForeachElements=5"},
			want: []string{"evaluationLimits", "additional properties 'maxForeachElements' not allowed"},
		},
		"stream replicas 2": {
			args: []string{"--set", "nats.streamReplicas=2"},
			want: []string{"/nats/streamReplicas", "must be one of 1, 3, 5"},
		},
		"no NATS URL": {
			args: []string{"--set", "nats.urls=null"},
			want: []string{"/nats", "missing property 'urls'"},
		},
		"NATS URL without a scheme": {
			args: []string{"--set", "nats.urls[0]=nats.nats.svc:4222"},
			want: []string{"/nats/urls/0", "does not match pattern"},
		},
		"a typo in a key": {
			args: []string{"--set", "webhook.replica=3"},
			want: []string{"/webhook", "replica"},
		},
		"pending bytes not a quantity": {
			args: []string{"--set", "reporter.pending.bytes=lots"},
			want: []string{"/reporter/pending/bytes", "does not match pattern"},
		},
		"pending results past the consumer's": {
			args: []string{"--set", "reporter.pending.results=5000"},
			want: []string{"/reporter/pending/results", "maximum"},
		},
		"scan interval not a duration": {
			args: []string{"--set", "reporter.scanInterval=hourly"},
			want: []string{"/reporter/scanInterval", "does not match pattern"},
		},
		"stream size not a quantity": {
			args: []string{"--set", "nats.streams.workMaxBytes=lots"},
			want: []string{"/nats/streams/workMaxBytes"},
		},
		"work publish failure mode": {
			args: []string{"--set", "webhook.onWorkPublishFailure=retry"},
			want: []string{"/webhook/onWorkPublishFailure", "must be one of 'deny', 'allow'"},
		},
		"request timeout over the API server's 30s": {
			args: []string{"--set", "webhook.requestTimeoutSeconds=45"},
			want: []string{"/webhook/requestTimeoutSeconds", "maximum"},
		},
		"PDB that blocks every drain": {
			args: []string{"--set", "webhook.pdb.maxUnavailable=0"},
			want: []string{"/webhook/pdb/maxUnavailable"},
		},
		"credentials and NKey both": {
			args: []string{"--set", "nats.credentials.secretName=a", "--set", "nats.nkey.secretName=b"},
			want: []string{"/nats"},
		},
		"grace period shorter than the webhook's shutdown": {
			args:  []string{"--set", "webhook.terminationGracePeriodSeconds=20"},
			want:  []string{"terminationGracePeriodSeconds 20 must be longer than webhook.shutdownBudgetSeconds (25)"},
			chart: true,
		},
		"grace period shorter than a worker's shutdown": {
			args:  []string{"--set", "cleaner.shutdownTimeoutSeconds=60"},
			want:  []string{"terminationGracePeriodSeconds 45 must be longer than cleaner.shutdownTimeoutSeconds (60)"},
			chart: true,
		},
		"NetworkPolicy without the API server's addresses": {
			args:  []string{"--set", "networkPolicy.enabled=true"},
			want:  []string{"networkPolicy.enabled needs networkPolicy.apiServerCIDRs"},
			chart: true,
		},
		"shadow with reports served": {
			args:  []string{"--set", "kyverno.mode=shadow", "--set", "reporter.mode=serve"},
			want:  []string{"kyverno.mode=shadow needs reporter.mode=crd"},
			chart: true,
		},
		"unknown kyverno mode": {
			args: []string{"--set", "kyverno.mode=takeover"},
			want: []string{"/kyverno/mode"},
		},
		"client CA without a CA": {
			args:  []string{"--set", "webhook.clientCA.enabled=true"},
			want:  []string{"webhook.clientCA.enabled needs"},
			chart: true,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := helm(t, append([]string{"template", release, chartDir, "--namespace", namespace}, withAuth(tc.args...)...)...)
			var exit *exec.ExitError
			if !errors.As(r.Err, &exit) {
				t.Fatalf("helm template %v: want a non-zero exit, got %v\n%s", tc.args, r.Err, r.Stdout)
			}
			msg := string(r.Stderr)
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error does not say %q:\n%s", w, msg)
				}
			}
			if tc.chart {
				return
			}
			// lint refuses the same values.
			l := helm(t, append([]string{"lint", chartDir, "--namespace", namespace}, withAuth(tc.args...)...)...)
			if l.Err == nil {
				t.Errorf("helm lint %v passed", tc.args)
			}
		})
	}
}

// TestNotes: NOTES.txt says how to check the install, and warns below
// three webhook replicas.
func TestNotes(t *testing.T) {
	tests := map[string]struct {
		args     []string
		warn     bool
		contains []string
	}{
		"default":              {contains: []string{"rollout status deploy/verdict-webhook", "kubectl get validatingwebhookconfiguration verdict-validating", "kubectl get policyreport -A", "kube-node-lease, verdict, nats."}},
		"two webhook replicas": {args: []string{"--set", "webhook.replicas=2"}, warn: true},
		"one webhook replica":  {args: []string{"--set", "webhook.replicas=1"}, warn: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			r := helm(t, append([]string{"install", release, chartDir, "--namespace", namespace, "--dry-run=client"}, withAuth(tc.args...)...)...)
			if r.Err != nil {
				t.Fatalf("helm install --dry-run=client: %v\n%s", r.Err, r.Stderr)
			}
			_, notes, ok := strings.Cut(string(r.Stdout), "NOTES:")
			if !ok {
				t.Fatalf("no NOTES in:\n%s", r.Stdout)
			}
			if got := strings.Contains(notes, "WARNING: webhook.replicas"); got != tc.warn {
				t.Errorf("warning shown %v, want %v:\n%s", got, tc.warn, notes)
			}
			for _, c := range tc.contains {
				if !strings.Contains(notes, c) {
					t.Errorf("NOTES do not say %q:\n%s", c, notes)
				}
			}
		})
	}
}

// TestOptionalObjects: what is off by default renders when turned on.
func TestOptionalObjects(t *testing.T) {
	objs := decode(t, render(t, "--set", "serviceMonitor.enabled=true", "--set", "networkPolicy.enabled=true",
		"--set", "networkPolicy.apiServerCIDRs[0]=10.0.0.1/32", "--set", "webhook.clientCA.enabled=true",
		"--set", "webhook.clientCA.bundle=-----BEGIN CERTIFICATE-----"))
	count := map[string]int{}
	for _, u := range objs {
		count[u.GetKind()]++
	}
	for kind, n := range map[string]int{"ServiceMonitor": 4, "NetworkPolicy": 2, "ConfigMap": 1, "Service": 4} {
		if count[kind] != n {
			t.Errorf("%d %s, want %d", count[kind], kind, n)
		}
	}
}

// TestHelmV3: the chart lints clean and renders the same objects under
// helm v3 (the golden files, but for the blank line helm v4 leaves after a
// document). helm v3 is built from its module as v4 is (hack/helm.sh 3).
func TestHelmV3(t *testing.T) {
	helm3 := helmOf(t, helmbin.V3)
	if v := helmbin.Run(t.Context(), helm3, t.TempDir(), "version", "--short"); v.Err != nil || !strings.HasPrefix(string(v.Stdout), "v3.") {
		t.Fatalf("%s is not helm v3: %s %v", helm3, v.Stdout, v.Err)
	}
	blank := func(b []byte) string {
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			if strings.TrimSpace(l) != "" {
				lines = append(lines, l)
			}
		}
		return strings.Join(lines, "\n")
	}
	for name, args := range renders {
		t.Run(name, func(t *testing.T) {
			l := helmbin.Run(t.Context(), helm3, t.TempDir(), append([]string{"lint", chartDir, "--strict", "--namespace", namespace}, args...)...)
			if l.Err != nil || strings.Contains(string(l.Stdout), "[WARNING]") {
				t.Errorf("helm v3 lint: %v\n%s%s", l.Err, l.Stdout, l.Stderr)
			}
			r := helmbin.Run(t.Context(), helm3, t.TempDir(), append([]string{"template", release, chartDir, "--namespace", namespace}, args...)...)
			if r.Err != nil {
				t.Fatalf("helm v3 template: %v\n%s", r.Err, r.Stderr)
			}
			want, err := os.ReadFile(filepath.Join("testdata", name+".yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if blank(r.Stdout) != blank(want) {
				t.Errorf("helm v3 renders differently from testdata/%s.yaml:\n%s", name, golden.Diff(blank(want), blank(r.Stdout)))
			}
		})
	}
}

// TestKyvernoAdopt: owning Kyverno's kinds, the chart installs their
// CRDs (every kind the services read, at the versions policycache's
// KyvernoAPI reads and Kyverno serves, kept on uninstall), and every
// service reads Kyverno's groups with the RBAC to do it; the webhook may
// write the policies' status.
func TestKyvernoAdopt(t *testing.T) {
	objs := decode(t, render(t, "--set", "kyverno.mode=adopt"))
	crds := map[string]*unstructured.Unstructured{}
	for _, o := range objs {
		if o.GetKind() == "CustomResourceDefinition" {
			crds[o.GetName()] = o
			if o.GetAnnotations()["helm.sh/resource-policy"] != "keep" {
				t.Errorf("CRD %s is not kept on uninstall", o.GetName())
			}
		}
	}
	api := policycache.KyvernoAPI
	var want []schema.GroupVersionResource
	for kind := range policycache.KindResources() {
		gvr, _ := api.Resource(kind)
		want = append(want, gvr)
	}
	want = append(want, api.Exceptions()...)
	for _, gvr := range want {
		crd, ok := crds[gvr.Resource+"."+gvr.Group]
		if !ok {
			t.Errorf("no CRD for %s", gvr)
			continue
		}
		stored := ""
		versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
		for _, v := range versions {
			v := v.(map[string]any)
			if v["storage"] == true {
				stored = v["name"].(string)
			}
		}
		if stored != gvr.Version {
			t.Errorf("%s stored at %q, want %s", gvr.GroupResource(), stored, gvr.Version)
		}
	}
	for _, o := range objs {
		switch o.GetKind() {
		case "Deployment":
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			args := fmt.Sprint(containers[0].(map[string]any)["args"])
			if !strings.Contains(args, "--policy-api=kyverno") || strings.Contains(args, "--shadow") {
				t.Errorf("%s args %s", o.GetName(), args)
			}
		case "ClusterRole":
			if rules := fmt.Sprint(o.Object["rules"]); strings.Contains(rules, "verdict.dev") {
				t.Errorf("ClusterRole %s still names verdict.dev: %s", o.GetName(), rules)
			}
		}
	}
}
