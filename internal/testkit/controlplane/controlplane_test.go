package controlplane

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/verdict-dev/verdict/internal/testkit"
)

// shared is one control plane, with the controller manager, for the tests
// of this package; nil under -short.
var shared *ControlPlane

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() || os.Getenv(envHelper) != "" {
		os.Exit(m.Run())
	}
	// Find or build the binaries before m.Run starts the test deadline.
	ctx := context.Background()
	if _, err := EnsureBinaries(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	begin := time.Now()
	cp, err := Start(ctx, WithControllerManager())
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Fprintf(os.Stderr, "control plane with controller manager ready in %v at %s\n", time.Since(begin).Round(time.Millisecond), cp.URL())
	shared = cp
	code := m.Run()
	begin = time.Now()
	if err := cp.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	fmt.Fprintf(os.Stderr, "control plane stopped in %v\n", time.Since(begin).Round(time.Millisecond))
	os.Exit(code)
}

func sharedPlane(t *testing.T) *ControlPlane {
	t.Helper()
	if shared == nil {
		t.Skip("needs a real control plane; skipped under -short")
	}
	return shared
}

type clients struct {
	kube    kubernetes.Interface
	dynamic dynamic.Interface
}

func newClients(t *testing.T, cfg *rest.Config) clients {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return clients{kube: kube, dynamic: dyn}
}

func createNamespace(t *testing.T, c clients) string {
	t.Helper()
	ns, err := c.kube.CoreV1().Namespaces().Create(t.Context(), &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "verdict-test-"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace: %v", err)
	}
	return ns.Name
}

var (
	clusterPolicies = schema.GroupVersionResource{Group: "verdict.dev", Version: "v1", Resource: "clusterpolicies"}
	policyReports   = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}
)

func TestAdminAccess(t *testing.T) {
	cp := sharedPlane(t)
	if !strings.HasPrefix(cp.URL(), "https://127.0.0.1:") {
		t.Errorf("URL %q is not https on 127.0.0.1", cp.URL())
	}
	// The kubeconfig on disk works on its own, as kubectl or a child
	// process would use it.
	cfg, err := clientcmd.BuildConfigFromFlags("", cp.KubeconfigPath())
	if err != nil {
		t.Fatalf("kubeconfig: %v", err)
	}
	c := newClients(t, cfg)
	review, err := c.kube.AuthenticationV1().SelfSubjectReviews().Create(t.Context(), &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("self subject review: %v", err)
	}
	if got := review.Status.UserInfo.Groups; !contains(got, "system:masters") {
		t.Errorf("admin groups %v, want system:masters", got)
	}
	// The CA verifies the serving certificate (no insecure transport
	// anywhere), and an anonymous client gets no further than RBAC lets it.
	anon := &rest.Config{Host: cp.URL(), TLSClientConfig: rest.TLSClientConfig{CAData: cp.CACertPEM()}}
	ac := newClients(t, anon)
	if _, err := ac.kube.CoreV1().Namespaces().List(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("anonymous list namespaces: %v, want forbidden", err)
	}
}

func ptrTo[T any](v T) *T { return &v }

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

func TestCRDsServed(t *testing.T) {
	cp := sharedPlane(t)
	c := newClients(t, cp.RESTConfig())
	resources := map[string][]string{
		"verdict.dev/v1":          {"clusterpolicies", "policies", "policyexceptions", "clustercleanuppolicies", "cleanuppolicies"},
		"wgpolicyk8s.io/v1alpha2": {"policyreports", "clusterpolicyreports"},
	}
	for gv, want := range resources {
		list, err := c.kube.Discovery().ServerResourcesForGroupVersion(gv)
		if err != nil {
			t.Fatalf("discovery %s: %v", gv, err)
		}
		served := map[string]bool{}
		for _, r := range list.APIResources {
			served[r.Name] = true
		}
		for _, r := range want {
			if !served[r] {
				t.Errorf("%s/%s not served", gv, r)
			}
		}
	}
}

func TestClusterPolicyRoundTrip(t *testing.T) {
	cp := sharedPlane(t)
	c := newClients(t, cp.RESTConfig())
	ctx := t.Context()
	policy := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "verdict.dev/v1",
		"kind":       "ClusterPolicy",
		"metadata":   map[string]any{"name": "require-team-label"},
		"spec": map[string]any{
			"background": true,
			"rules": []any{map[string]any{
				"name":  "check-team",
				"match": map[string]any{"any": []any{map[string]any{"resources": map[string]any{"kinds": []any{"Pod"}}}}},
				"validate": map[string]any{
					"failureAction": "Enforce",
					"message":       "label team is required",
					"pattern":       map[string]any{"metadata": map[string]any{"labels": map[string]any{"team": "?*"}}},
				},
			}},
		},
	}}
	created, err := c.dynamic.Resource(clusterPolicies).Create(ctx, policy, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create ClusterPolicy: %v", err)
	}
	t.Cleanup(func() {
		_ = c.dynamic.Resource(clusterPolicies).Delete(context.Background(), created.GetName(), metav1.DeleteOptions{})
	})
	got, err := c.dynamic.Resource(clusterPolicies).Get(ctx, "require-team-label", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get ClusterPolicy: %v", err)
	}
	if got.GetNamespace() != "" {
		t.Errorf("ClusterPolicy has namespace %q; it is cluster-scoped", got.GetNamespace())
	}
	// The spec is kept whole: the CRD's schema types the fields Verdict
	// knows and preserves the others; the webhook validates policies.
	rules, _, _ := unstructured.NestedSlice(got.Object, "spec", "rules")
	if len(rules) != 1 {
		t.Fatalf("rules %v", rules)
	}
	msg, _, _ := unstructured.NestedString(rules[0].(map[string]any), "validate", "message")
	if msg != "label team is required" {
		t.Errorf("rule message %q after the round trip", msg)
	}

	// status is a subresource: an update of the object ignores it, an
	// update of /status sets it.
	withStatus := got.DeepCopy()
	cond := map[string]any{"type": "Ready", "status": "True", "reason": "Succeeded", "message": "Ready"}
	if err := unstructured.SetNestedSlice(withStatus.Object, []any{cond}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	updated, err := c.dynamic.Resource(clusterPolicies).Update(ctx, withStatus, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update ClusterPolicy: %v", err)
	}
	if _, found, _ := unstructured.NestedSlice(updated.Object, "status", "conditions"); found {
		t.Errorf("status written through the main resource; want a status subresource")
	}
	if err := unstructured.SetNestedSlice(updated.Object, []any{cond}, "status", "conditions"); err != nil {
		t.Fatal(err)
	}
	updated, err = c.dynamic.Resource(clusterPolicies).UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	if err != nil {
		t.Fatalf("update ClusterPolicy status: %v", err)
	}
	if conds, _, _ := unstructured.NestedSlice(updated.Object, "status", "conditions"); len(conds) != 1 {
		t.Errorf("status conditions %v after UpdateStatus", conds)
	}

	// A spec is required.
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "verdict.dev/v1", "kind": "ClusterPolicy", "metadata": map[string]any{"name": "no-spec"},
	}}
	if _, err := c.dynamic.Resource(clusterPolicies).Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("ClusterPolicy without spec: %v, want invalid", err)
	}
}

func TestPolicyReport(t *testing.T) {
	cp := sharedPlane(t)
	cfg := cp.RESTConfig()
	cfg.WarningHandler = rest.NoWarnings{} // the pruned field below is expected
	c := newClients(t, cfg)
	ctx := t.Context()
	ns := createNamespace(t, c)
	report := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "wgpolicyk8s.io/v1alpha2",
		"kind":       "PolicyReport",
		"metadata":   map[string]any{"name": "pod-web", "namespace": ns},
		"scope":      map[string]any{"apiVersion": "v1", "kind": "Pod", "name": "web", "namespace": ns, "uid": "0a1b"},
		"summary":    map[string]any{"pass": int64(1), "fail": int64(2), "warn": int64(0), "error": int64(0), "skip": int64(3)},
		"results": []any{map[string]any{
			"policy":       "require-team-label",
			"rule":         "check-team",
			"result":       "fail",
			"source":       "verdict",
			"message":      "label team is required",
			"scored":       true,
			"timestamp":    map[string]any{"seconds": int64(1700000000), "nanos": int64(0)},
			"verdictExtra": map[string]any{"kept": "yes"}, // results preserve unknown fields
		}},
		"notInSchema": "pruned",
	}}
	if _, err := c.dynamic.Resource(policyReports).Namespace(ns).Create(ctx, report, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create PolicyReport: %v", err)
	}
	got, err := c.dynamic.Resource(policyReports).Namespace(ns).Get(ctx, "pod-web", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get PolicyReport: %v", err)
	}
	if fail, _, _ := unstructured.NestedInt64(got.Object, "summary", "fail"); fail != 2 {
		t.Errorf("summary.fail %d, want 2", fail)
	}
	if kind, _, _ := unstructured.NestedString(got.Object, "scope", "kind"); kind != "Pod" {
		t.Errorf("scope.kind %q", kind)
	}
	results, _, _ := unstructured.NestedSlice(got.Object, "results")
	if len(results) != 1 {
		t.Fatalf("results %v", results)
	}
	if kept, _, _ := unstructured.NestedString(results[0].(map[string]any), "verdictExtra", "kept"); kept != "yes" {
		t.Errorf("unknown result field not preserved: %v", results[0])
	}
	if _, found := got.Object["notInSchema"]; found {
		t.Errorf("unknown top-level field kept; want the structural schema to prune it")
	}

	// The schema types the summary.
	bad := report.DeepCopy()
	bad.SetName("bad-summary")
	if err := unstructured.SetNestedField(bad.Object, "many", "summary", "pass"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.dynamic.Resource(policyReports).Namespace(ns).Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Errorf("summary.pass as a string: %v, want invalid", err)
	}

	// `kubectl get policyreport -o wide` columns, as the apiserver serves
	// them in a Table.
	table := getTable(t, cp, "/apis/wgpolicyk8s.io/v1alpha2/namespaces/"+ns+"/policyreports")
	var names []string
	for _, col := range table.ColumnDefinitions {
		names = append(names, col.Name)
	}
	want := []string{"Name", "Kind", "Name", "Pass", "Fail", "Warn", "Error", "Skip", "Age"}
	if strings.Join(names, ",") != strings.Join(want, ",") {
		t.Errorf("table columns %v, want %v", names, want)
	}
	if len(table.Rows) != 1 {
		t.Fatalf("table rows %v", table.Rows)
	}
	cells := fmt.Sprint(table.Rows[0].Cells)
	if cells[:len("[pod-web Pod web 1 2 0 0 3")] != "[pod-web Pod web 1 2 0 0 3" {
		t.Errorf("row %s, want pod-web Pod web 1 2 0 0 3 ...", cells)
	}
}

func getTable(t *testing.T, cp *ControlPlane, path string) *metav1.Table {
	t.Helper()
	client, err := rest.HTTPClientFor(cp.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, cp.URL()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %s: %s", path, resp.Status, body)
	}
	var table metav1.Table
	if err := json.Unmarshal(body, &table); err != nil {
		t.Fatalf("table: %v", err)
	}
	return &table
}

// TestControllerManager: the controllers turn a Deployment into a
// ReplicaSet and Pods (Pods need the namespace's default service account,
// which the controllers create too), and the garbage collector deletes the
// ReplicaSet with its owner.
func TestControllerManager(t *testing.T) {
	cp := sharedPlane(t)
	c := newClients(t, cp.RESTConfig())
	ctx := t.Context()
	ns := createNamespace(t, c)
	labels := map[string]string{"app": "web"}
	dep, err := c.kube.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptrTo[int32](2),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create Deployment: %v", err)
	}

	var rsName string
	testkit.Eventually(t, time.Minute, "ReplicaSet owned by the Deployment", func() error {
		list, err := c.kube.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, rs := range list.Items {
			if ref := metav1.GetControllerOf(&rs); ref != nil && ref.UID == dep.UID {
				rsName = rs.Name
				return nil
			}
		}
		return fmt.Errorf("%d ReplicaSets, none owned by the Deployment", len(list.Items))
	})
	testkit.Eventually(t, time.Minute, "two Pods owned by the ReplicaSet", func() error {
		list, err := c.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		n := 0
		for _, p := range list.Items {
			if ref := metav1.GetControllerOf(&p); ref != nil && ref.Name == rsName {
				n++
			}
		}
		if n != 2 {
			return fmt.Errorf("%d Pods owned by %s", n, rsName)
		}
		return nil
	})

	if err := c.kube.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{
		PropagationPolicy: ptrTo(metav1.DeletePropagationBackground),
	}); err != nil {
		t.Fatalf("delete Deployment: %v", err)
	}
	testkit.Eventually(t, time.Minute, "garbage collection of the ReplicaSet", func() error {
		_, err := c.kube.AppsV1().ReplicaSets(ns).Get(ctx, rsName, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		return errors.New("still there")
	})
}

// TestStartStop starts a second, smaller control plane and checks that Stop
// reaps every child and removes the temporary directory.
func TestStartStop(t *testing.T) {
	begin := time.Now()
	cp := StartForTest(t, WithoutCRDs())
	t.Logf("started etcd and kube-apiserver in %v", time.Since(begin).Round(time.Millisecond))
	pids := map[string]int{}
	for _, p := range cp.processes() {
		pids[p.name] = p.pid()
	}
	if len(pids) != 2 {
		t.Fatalf("processes %v, want etcd and kube-apiserver", pids)
	}
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); err != nil {
			t.Fatalf("%s (pid %d) not running: %v", name, pid, err)
		}
	}
	c := newClients(t, cp.RESTConfig())
	if _, err := c.kube.CoreV1().Namespaces().Get(t.Context(), "default", metav1.GetOptions{}); err != nil {
		t.Fatalf("get namespace default: %v", err)
	}

	begin = time.Now()
	if err := cp.Stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	t.Logf("stopped in %v", time.Since(begin).Round(time.Millisecond))
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("%s (pid %d) after Stop: kill -0 gives %v, want no such process", name, pid, err)
		}
		if err := syscall.Kill(-pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process group of %s (%d) after Stop: kill -0 gives %v, want none left", name, pid, err)
		}
	}
	if _, err := os.Stat(cp.Dir()); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("temporary directory %s after Stop: %v", cp.Dir(), err)
	}
	if err := cp.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

// TestStartFailure: a component that cannot start makes Start fail with the
// end of its log, and leaves nothing running.
func TestStartFailure(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control-plane binaries; skipped under -short")
	}
	t.Setenv(envKeep, "")
	root := t.TempDir()
	_, err := Start(t.Context(), WithAPIServerArgs("--no-such-flag=1"), WithRootDir(root))
	if err == nil {
		t.Fatal("Start with a bad apiserver flag succeeded")
	}
	t.Logf("start error:\n%v", err)
	if !errors.Is(err, ErrNotReady) {
		t.Errorf("error %v, want ErrNotReady", err)
	}
	if !strings.Contains(err.Error(), "unknown flag: --no-such-flag") {
		t.Errorf("error does not carry the apiserver's log:\n%v", err)
	}
	entries, _ := os.ReadDir(root)
	if len(entries) != 0 {
		t.Errorf("temporary directories left after a failed start: %v", entries)
	}
	// etcd was started first; nothing of ours may survive the failure.
	// Children are reaped before Start returns, so none is left as ours.
	if out := childrenOf(t, os.Getpid()); len(out) != 0 {
		t.Errorf("child processes left after a failed start: %v", out)
	}
}

// childrenOf lists the live child processes of pid other than the shared
// control plane's.
func childrenOf(t *testing.T, pid int) []string {
	t.Helper()
	ours := map[string]bool{}
	if shared != nil {
		for _, p := range shared.processes() {
			ours[fmt.Sprint(p.pid())] = true
		}
	}
	// Each thread has its own list of the children it forked.
	var out []string
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	for _, task := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, task.Name()))
		if err != nil {
			continue
		}
		for _, child := range strings.Fields(string(b)) {
			if !ours[child] {
				out = append(out, child)
			}
		}
	}
	return out
}

func TestOptions(t *testing.T) {
	tests := map[string]Option{
		"empty bin dir":      WithBinDir(""),
		"zero start timeout": WithStartTimeout(0),
		"negative stop":      WithStopTimeout(-time.Second),
		"empty root dir":     WithRootDir(""),
		"not a flag":         WithAPIServerArgs("v=4"),
	}
	for name, opt := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := Start(t.Context(), opt)
			if !errors.Is(err, ErrInvalidOption) {
				t.Errorf("Start: %v, want ErrInvalidOption", err)
			}
		})
	}
}

func TestEnsureBinariesFromEnv(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(envBin, dir)
	if _, err := EnsureBinaries(t.Context()); !errors.Is(err, ErrBinariesNotFound) {
		t.Errorf("EnsureBinaries with an empty %s: %v, want ErrBinariesNotFound", envBin, err)
	}
}

func TestLastLines(t *testing.T) {
	tests := map[string]struct {
		in   string
		n    int
		want string
	}{
		"fewer lines":  {"a\nb\n", 5, "a\nb"},
		"exact":        {"a\nb\nc", 3, "a\nb\nc"},
		"more lines":   {"a\nb\nc\nd\n", 2, "c\nd"},
		"empty":        {"", 3, ""},
		"one no break": {"only", 1, "only"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := lastLines([]byte(tc.in), tc.n); got != tc.want {
				t.Errorf("lastLines(%q, %d) = %q, want %q", tc.in, tc.n, got, tc.want)
			}
		})
	}
}
