package reportserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reportindex"
	"github.com/verdict-dev/verdict/internal/reports/reportserver"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/pkg/engine"
)

var (
	policyReports        = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}
	clusterPolicyReports = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "clusterpolicyreports"}
	apiServices          = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}
	openReports          = schema.GroupVersionResource{Group: "openreports.io", Version: "v1alpha1", Resource: "reports"}
	openClusterReports   = schema.GroupVersionResource{Group: "openreports.io", Version: "v1alpha1", Resource: "clusterreports"}
)

// evaluation is one policy's result on an object.
func evaluation(seq uint64, ref bus.ResourceRef, policy string, statuses ...engine.Status) model.Result {
	ev := bus.ResultEvent{Resource: ref, Policy: bus.PolicyRef{Key: policy, UID: "p-" + policy, ResourceVersion: fmt.Sprint(seq)},
		Category: "Best Practices", Severity: "medium", Scored: true, Admission: true, Timestamp: time.Now().UTC().Truncate(time.Second)}
	for i, s := range statuses {
		ev.Rules = append(ev.Rules, bus.RuleResult{Name: fmt.Sprintf("rule-%d", i), Type: engine.TypeValidation, Status: s, Message: "rule " + string(s)})
	}
	return model.Result{Sequence: seq, Event: ev, Stored: time.Now()}
}

func ref(apiVersion, kind string, o metav1.Object) bus.ResourceRef {
	return bus.ResourceRef{APIVersion: apiVersion, Kind: kind, Namespace: o.GetNamespace(), Name: o.GetName(), UID: string(o.GetUID()), ResourceVersion: o.GetResourceVersion()}
}

// TestE2EServeReports: through the real kube-apiserver's aggregation
// layer, the reports the index holds are served as PolicyReports and
// ClusterPolicyReports, field for field what the CRD mode writes; list
// pages with continue tokens; a watch sees a new report; the table has
// the CRD mode's columns; a user without RBAC on the group is refused.
func TestE2EServeReports(t *testing.T) {
	cp := controlplane.StartForTest(t, controlplane.WithoutCRDs())
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())

	x := reportindex.New()
	serveThroughAggregator(t, cp, reportserver.Config{}, x, reportserver.GroupVersion, reportserver.OpenReports)

	ns, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var seq uint64
	var cms []*corev1.ConfigMap
	for i := range 5 {
		cm, err := kube.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		cms = append(cms, cm)
		seq++
		x.Apply(evaluation(seq, ref("v1", "ConfigMap", cm), "require-labels", engine.StatusPass, engine.StatusFail))
	}
	seq++
	x.Apply(evaluation(seq, ref("v1", "Namespace", ns), "require-owner", engine.StatusWarn))

	// Served once the aggregator finds the server available.
	polr := dyn.Resource(policyReports).Namespace("team")
	var list *unstructured.UnstructuredList
	deadline := time.Now().Add(60 * time.Second)
	for {
		list, err = polr.List(ctx, metav1.ListOptions{})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the reports are not served: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
	if len(list.Items) != 5 || list.GetResourceVersion() == "" {
		t.Fatalf("%d reports at %q", len(list.Items), list.GetResourceVersion())
	}
	// Field for field what the CRD mode writes (the fold), plus the
	// server's resourceVersion and creationTimestamp.
	for _, cm := range cms {
		got, err := polr.Get(ctx, string(cm.UID), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := x.Report(string(cm.UID))
		if !model.SameReport(got, want.Object) || got.GetName() != string(cm.UID) || got.GetNamespace() != "team" {
			a, _ := json.Marshal(got.Object)
			b, _ := json.Marshal(want.Object.Object)
			t.Fatalf("served %s\nfold   %s", a, b)
		}
	}
	cpolr, err := dyn.Resource(clusterPolicyReports).Get(ctx, string(ns.UID), metav1.GetOptions{})
	if err != nil || cpolr.GetKind() != "ClusterPolicyReport" {
		t.Fatalf("the namespace's ClusterPolicyReport: %v %v", cpolr, err)
	}
	// The same reports as openreports.io Reports and ClusterReports: the
	// same documents, with the report-level source.
	for _, c := range []struct {
		wgpolicy, open schema.GroupVersionResource
		ns, kind       string
	}{{policyReports, openReports, "team", "Report"}, {clusterPolicyReports, openClusterReports, "", "ClusterReport"}} {
		var want, got *unstructured.UnstructuredList
		for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(300 * time.Millisecond) {
			if got, err = dyn.Resource(c.open).Namespace(c.ns).List(ctx, metav1.ListOptions{}); err == nil || time.Now().After(deadline) {
				break
			}
		}
		if err != nil {
			t.Fatalf("openreports.io %s: %v", c.open.Resource, err)
		}
		if want, err = dyn.Resource(c.wgpolicy).Namespace(c.ns).List(ctx, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		if len(got.Items) != len(want.Items) || len(got.Items) == 0 {
			t.Fatalf("%d %s, %d %s", len(got.Items), c.open.Resource, len(want.Items), c.wgpolicy.Resource)
		}
		for i := range got.Items {
			g, w := got.Items[i].DeepCopy(), want.Items[i].DeepCopy()
			if g.GetAPIVersion() != "openreports.io/v1alpha1" || g.GetKind() != c.kind || g.Object["source"] != model.Source {
				t.Fatalf("an openreports.io item: %s %s source %v", g.GetAPIVersion(), g.GetKind(), g.Object["source"])
			}
			for _, f := range []string{"apiVersion", "kind", "source"} {
				delete(g.Object, f)
				delete(w.Object, f)
			}
			if !equality.Semantic.DeepEqual(g.Object, w.Object) {
				a, _ := json.Marshal(g.Object)
				b, _ := json.Marshal(w.Object)
				t.Fatalf("openreports.io %s\nwgpolicyk8s.io %s", a, b)
			}
		}
	}
	if _, err := polr.Get(ctx, "no-such-report", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("a report that does not exist: %v", err)
	}

	// Pages.
	var names []string
	opts := metav1.ListOptions{Limit: 2}
	for {
		page, err := polr.List(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		for _, it := range page.Items {
			names = append(names, it.GetName())
		}
		if opts.Continue = page.GetContinue(); opts.Continue == "" {
			break
		}
	}
	if len(names) != 5 {
		t.Fatalf("paged: %v", names)
	}

	// A watch from the list's version sees a new report.
	w, err := dyn.Resource(policyReports).Namespace(metav1.NamespaceAll).Watch(ctx, metav1.ListOptions{ResourceVersion: list.GetResourceVersion()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cm, err := kube.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	seq++
	x.Apply(evaluation(seq, ref("v1", "ConfigMap", cm), "require-labels", engine.StatusFail))
	select {
	case ev := <-w.ResultChan():
		if ev.Type != watch.Added || ev.Object.(*unstructured.Unstructured).GetName() != string(cm.UID) {
			t.Fatalf("watch event %s %v", ev.Type, ev.Object)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the watch saw no new report")
	}

	// Watches that start with the state: without a resourceVersion every
	// report comes first as Added; with sendInitialEvents (client-go's
	// streaming lists) a bookmark annotated k8s.io/initial-events-end
	// follows them.
	all, err := polr.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	for _, opts := range []metav1.ListOptions{
		{},
		{SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true},
		{SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan, AllowWatchBookmarks: true, ResourceVersion: all.GetResourceVersion()},
	} {
		w, err := polr.Watch(ctx, opts)
		if err != nil {
			t.Fatalf("watch %+v: %v", opts, err)
		}
		added := map[string]bool{}
		for len(added) < len(all.Items) {
			select {
			case ev := <-w.ResultChan():
				if ev.Type != watch.Added {
					t.Fatalf("watch %+v: %s before the initial reports were all given (%d of %d)", opts, ev.Type, len(added), len(all.Items))
				}
				added[ev.Object.(*unstructured.Unstructured).GetName()] = true
			case <-time.After(20 * time.Second):
				t.Fatalf("watch %+v: %d of %d initial reports", opts, len(added), len(all.Items))
			}
		}
		for _, it := range all.Items {
			if !added[it.GetName()] {
				t.Errorf("watch %+v: no initial event for %s", opts, it.GetName())
			}
		}
		if opts.SendInitialEvents != nil {
			select {
			case ev := <-w.ResultChan():
				u, _ := ev.Object.(*unstructured.Unstructured)
				if ev.Type != watch.Bookmark || u == nil || u.GetAnnotations()[metav1.InitialEventsAnnotationKey] != "true" || u.GetResourceVersion() == "" {
					t.Fatalf("watch %+v: after the initial reports %s %v, want the initial-events-end bookmark", opts, ev.Type, ev.Object)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("watch %+v: no bookmark after the initial reports", opts)
			}
		}
		w.Stop()
	}

	// A list from a version: not older than it (this replica has it),
	// and never exactly a past one (no history is kept).
	if _, err := polr.List(ctx, metav1.ListOptions{ResourceVersion: all.GetResourceVersion()}); err != nil {
		t.Fatalf("list not older than %s: %v", all.GetResourceVersion(), err)
	}
	if _, err := polr.List(ctx, metav1.ListOptions{ResourceVersion: all.GetResourceVersion(), ResourceVersionMatch: metav1.ResourceVersionMatchExact}); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
		t.Fatalf("list exactly at %s: %v, want expired", all.GetResourceVersion(), err)
	}

	// The table: the CRD mode's columns.
	raw, err := kube.CoreV1().RESTClient().Get().AbsPath("/apis/wgpolicyk8s.io/v1alpha2/namespaces/team/policyreports").
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var table metav1.Table
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatal(err)
	}
	var cols []string
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	if strings.Join(cols, ",") != "Name,Kind,Name,Pass,Fail,Warn,Error,Skip,Age" || len(table.Rows) != 6 {
		t.Fatalf("table columns %v, %d rows", cols, len(table.Rows))
	}

	// A user without RBAC on the group is refused; granted, allowed.
	if _, err := kube.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "reader"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kc, err := cp.ServiceAccountKubeconfig(ctx, "team", "reader", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		t.Fatal(err)
	}
	reader := dynamic.NewForConfigOrDie(rc).Resource(policyReports).Namespace("team")
	if _, err := reader.List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a user without RBAC: %v", err)
	}
	if _, err := kube.RbacV1().Roles("team").Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "reports"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"wgpolicyk8s.io"}, Resources: []string{"policyreports"}, Verbs: []string{"get", "list"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().RoleBindings("team").Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "reports"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "reports"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "reader", Namespace: "team"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(30 * time.Second)
	for {
		l, err := reader.List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) == 6 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a granted user: %v", err)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// serveThroughAggregator runs the server (cfg with a self-signed
// certificate, delegating to cp) on x, caught up from the start, and
// registers it as the APIService of each of gvs, reached through an
// ExternalName Service naming localhost in the namespace verdict (no
// kube-proxy here); it stops at the end of the test.
func serveThroughAggregator(t *testing.T, cp *controlplane.ControlPlane, cfg reportserver.Config, x *reportindex.Index, gvs ...schema.GroupVersion) {
	t.Helper()
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	ready := make(chan struct{})
	close(ready)
	cfg.CertDir, cfg.Kubeconfig = t.TempDir(), cp.KubeconfigPath()
	srv, err := reportserver.New(cfg, x, ready)
	if err != nil {
		t.Fatal(err)
	}
	sctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- srv.Run(sctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("the server: %v", err)
		}
	})
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "verdict"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Services("verdict").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "verdict-reports"},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeExternalName, ExternalName: "localhost", Ports: []corev1.ServicePort{{Port: int32(srv.Port())}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, gv := range gvs {
		apiService := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": gv.Version + "." + gv.Group},
			"spec": map[string]any{
				"group": gv.Group, "version": gv.Version, "groupPriorityMinimum": int64(1000), "versionPriority": int64(15),
				"insecureSkipTLSVerify": true,
				"service":               map[string]any{"namespace": "verdict", "name": "verdict-reports", "port": int64(srv.Port())},
			},
		}}
		if _, err := dyn.Resource(apiServices).Create(ctx, apiService, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}
