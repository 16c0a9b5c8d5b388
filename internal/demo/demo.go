// Package demo is `make demo`: a local control plane (etcd,
// kube-apiserver, kube-controller-manager), an embedded JetStream, the
// webhook and the reporter in this process, sample policies, Pods that
// pass and fail them, and the PolicyReports that result.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/rs/zerolog"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/deploy/samples"
	"github.com/verdict-dev/verdict/internal/cleaner"
	cleanerapp "github.com/verdict-dev/verdict/internal/cleaner/app"
	"github.com/verdict-dev/verdict/internal/generator"
	generatorapp "github.com/verdict-dev/verdict/internal/generator/app"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	reporterapp "github.com/verdict-dev/verdict/internal/reports/app"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"
)

// Options configure a demo run.
type Options struct {
	// Out receives the demo's story.
	Out io.Writer
	// Once runs the demo through once and returns; otherwise it keeps
	// everything running until ctx ends.
	Once bool
	// Log receives the services' logs (discarded by default).
	Log zerolog.Logger
	// ReportTimeout bounds the wait for the reports.
	ReportTimeout time.Duration
}

// projector runs the reporter service in process.
func projector(ctx context.Context, natsURL, kubeconfig string, log zerolog.Logger) error {
	cfg := reporterapp.DefaultConfig()
	cfg.Kube.Kubeconfig = kubeconfig
	cfg.NATS.URLs = []string{natsURL}
	cfg.ProbeAddress = ""
	return reporterapp.Run(ctx, cfg, log)
}

// Namespace is where the demo's Pods go.
const Namespace = "demo"

var policyReports = schema.GroupVersionResource{Group: "wgpolicyk8s.io", Version: "v1alpha2", Resource: "policyreports"}

// Run runs the demo.
func Run(ctx context.Context, opts Options) error {
	out := opts.Out
	if out == nil {
		out = os.Stdout
	}
	if opts.ReportTimeout == 0 {
		opts.ReportTimeout = 90 * time.Second
	}
	say := func(format string, args ...any) { fmt.Fprintf(out, format+"\n", args...) }

	say("==> starting the local control plane (etcd, kube-apiserver, kube-controller-manager)")
	start := time.Now()
	cp, err := controlplane.Start(ctx, controlplane.WithControllerManager())
	if err != nil {
		return fmt.Errorf("control plane: %w", err)
	}
	defer func() {
		say("==> stopping everything")
		_ = cp.Stop()
	}()
	say("    kube-apiserver at %s (%.1fs); kubeconfig %s", cp.URL(), time.Since(start).Seconds(), cp.KubeconfigPath())
	kube, err := kubernetes.NewForConfig(cp.RESTConfig())
	if err != nil {
		return err
	}
	dyn, err := dynamic.NewForConfig(cp.RESTConfig())
	if err != nil {
		return err
	}

	say("==> starting JetStream (embedded nats-server)")
	natsDir, err := os.MkdirTemp("", "verdict-demo-nats-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(natsDir) }()
	nats, err := embedded.Run(ctx, embedded.Config{StoreDir: natsDir, Port: 0})
	if err != nil {
		return fmt.Errorf("nats: %w", err)
	}
	defer nats.Shutdown()

	for _, ns := range []string{"verdict", Namespace} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}

	svcCtx, stopServices := context.WithCancel(ctx)
	defer stopServices()
	port, err := controlplane.FreePort()
	if err != nil {
		return err
	}
	say("==> starting the webhook on https://127.0.0.1:%d (it registers itself, issues its certificate and takes reviews only from the API server: mutual TLS)", port)
	cfg := webhookapp.DefaultConfig()
	cfg.Kube.Kubeconfig = cp.KubeconfigPath()
	cfg.Identity = "demo"
	cfg.WebhookURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	cfg.CertIPs = []net.IP{net.ParseIP("127.0.0.1")}
	cfg.Webhook.Address = fmt.Sprintf("127.0.0.1:%d", port)
	cfg.Webhook.ShutdownDelay = 0
	cfg.Webhook.ClientCAFile = cp.WebhookClientCAFile()
	cfg.NATS.URLs = []string{nats.ClientURL()}
	cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	webhookDone := make(chan error, 1)
	go func() { webhookDone <- webhookapp.Run(svcCtx, cfg, opts.Log) }()
	say("==> starting the reporter")
	go func() {
		if err := projector(svcCtx, nats.ClientURL(), cp.KubeconfigPath(), opts.Log); err != nil && !errors.Is(err, context.Canceled) {
			say("    reporter stopped: %v", err)
		}
	}()
	say("==> starting the generator")
	go func() {
		gcfg := generatorapp.DefaultConfig()
		gcfg.Kube.Kubeconfig = cp.KubeconfigPath()
		gcfg.NATS.URLs = []string{nats.ClientURL()}
		gcfg.ProbeAddress = ""
		if err := generatorapp.Run(svcCtx, gcfg, opts.Log); err != nil && !errors.Is(err, context.Canceled) {
			say("    generator stopped: %v", err)
		}
	}()

	say("==> starting the cleaner")
	go func() {
		ccfg := cleanerapp.DefaultConfig()
		ccfg.Kube.Kubeconfig = cp.KubeconfigPath()
		ccfg.NATS.URLs = []string{nats.ClientURL()}
		ccfg.ProbeAddress = ""
		ccfg.TTLInterval = 5 * time.Second
		if err := cleanerapp.Run(svcCtx, ccfg, opts.Log); err != nil && !errors.Is(err, context.Canceled) {
			say("    cleaner stopped: %v", err)
		}
	}()

	say("==> installing the sample policies")
	if err := installSamples(ctx, dyn, say); err != nil {
		return err
	}
	if err := waitEnforced(ctx, kube); err != nil {
		return err
	}

	say("==> creating Pods")
	create := func(p *corev1.Pod, note string) {
		_, err := kube.CoreV1().Pods(Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			say("    %-16s DENIED   (%s)\n%s", p.Name, note, indent(denial(err)))
			return
		}
		say("    %-16s admitted (%s)", p.Name, note)
	}
	create(pod("web", true, "nginx:1.27", nil), "follows every policy")
	create(pod("cache", false, "redis:latest", nil), "audit: no app label, latest tag, no limits")
	priv := true
	create(pod("root-shell", true, "busybox:1.36", &corev1.SecurityContext{Privileged: &priv}), "enforce: privileged")
	hostNet := pod("sniffer", true, "busybox:1.36", nil)
	hostNet.Spec.HostNetwork = true
	create(hostNet, "enforce: host network")

	say("==> creating a Deployment (its ReplicaSet's Pods are admitted by the webhook too)")
	replicas := int32(2)
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "api"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "api"}},
				Spec:       podSpec("ghcr.io/acme/api:2.1", nil),
			},
		},
	}
	if _, err := kube.AppsV1().Deployments(Namespace).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		say("    api DENIED\n%s", indent(denial(err)))
	} else {
		say("    api admitted (audit: no app.kubernetes.io/name label on its Pods)")
	}

	say("==> creating Namespace %s (a generate policy gives every team Namespace a default-deny NetworkPolicy)", TeamNamespace)
	if err := showGenerated(ctx, kube, say); err != nil {
		return err
	}

	say("==> cleaning up (a ClusterCleanupPolicy ticking every 10s; the cleanup.kyverno.io/ttl label)")
	if err := showCleanup(ctx, kube, say); err != nil {
		return err
	}

	say("==> waiting for the PolicyReports")
	reports, err := waitReports(ctx, dyn, kube, opts.ReportTimeout)
	if err != nil {
		return err
	}
	say("")
	say("$ kubectl get policyreport -A -o wide")
	printReports(out, reports)

	if opts.Once {
		return nil
	}
	say("")
	say("Everything keeps running: KUBECONFIG=%s kubectl get policyreport -A -o wide", cp.KubeconfigPath())
	say("Press Ctrl-C to stop.")
	select {
	case <-ctx.Done():
	case err := <-webhookDone:
		if err != nil && !errors.Is(err, context.Canceled) {
			return fmt.Errorf("webhook: %w", err)
		}
	}
	return nil
}

// TeamNamespace is the Namespace the demo creates to show a generate
// rule at work.
const TeamNamespace = "team-payments"

// showGenerated creates the team Namespace and waits for the generator
// to write its NetworkPolicy.
func showGenerated(ctx context.Context, kube kubernetes.Interface, say func(string, ...any)) error {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TeamNamespace}}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("namespace %s: %w", TeamNamespace, err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		np, err := kube.NetworkingV1().NetworkPolicies(TeamNamespace).Get(ctx, "default-deny", metav1.GetOptions{})
		if err == nil {
			say("    generated NetworkPolicy %s/%s (policy %s, rule %s, field manager %s)", np.Namespace, np.Name,
				np.Labels[generator.LabelPolicyName], np.Labels[generator.LabelRuleName], np.ManagedFields[0].Manager)
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no NetworkPolicy generated in %s: %w", TeamNamespace, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// showCleanup creates two finished one-off Pods, one still running, and a
// ConfigMap labelled cleanup.kyverno.io/ttl=5s, and waits for the cleaner
// to delete exactly the finished Pods and, when due, the ConfigMap.
func showCleanup(ctx context.Context, kube kubernetes.Interface, say func(string, ...any)) error {
	start := time.Now()
	for _, p := range []struct {
		name     string
		finished bool
	}{{"report-1", true}, {"report-2", true}, {"report-3", false}} {
		pd := pod(p.name, true, "busybox:1.36", nil)
		pd.Labels["lifecycle"] = "one-off"
		if p.finished {
			pd.Annotations = map[string]string{"demo.verdict.dev/finished": "true"}
		}
		if _, err := kube.CoreV1().Pods(Namespace).Create(ctx, pd, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("pod %s: %w", p.name, err)
		}
	}
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "scratch", Namespace: Namespace, Labels: map[string]string{cleaner.LabelTTL: "5s"}}}
	if _, err := kube.CoreV1().ConfigMaps(Namespace).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("configmap scratch: %w", err)
	}
	say("    created Pods report-1, report-2 (finished), report-3 (running), all lifecycle=one-off; ConfigMap scratch with %s=5s", cleaner.LabelTTL)
	gone := map[string]bool{}
	deadline := time.Now().Add(90 * time.Second)
	for len(gone) < 3 {
		for _, name := range []string{"report-1", "report-2"} {
			if _, err := kube.CoreV1().Pods(Namespace).Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) && !gone[name] {
				gone[name] = true
				say("    Pod %s deleted by the cleanup policy after %.0fs", name, time.Since(start).Seconds())
			}
		}
		if _, err := kube.CoreV1().ConfigMaps(Namespace).Get(ctx, "scratch", metav1.GetOptions{}); apierrors.IsNotFound(err) && !gone["scratch"] {
			gone["scratch"] = true
			say("    ConfigMap scratch deleted when its TTL was due, after %.0fs", time.Since(start).Seconds())
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the cleaner did not delete %v within 90s", missing(gone, "report-1", "report-2", "scratch"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(250 * time.Millisecond):
		}
	}
	if _, err := kube.CoreV1().Pods(Namespace).Get(ctx, "report-3", metav1.GetOptions{}); err != nil {
		return fmt.Errorf("the running Pod report-3 should stay: %w", err)
	}
	say("    Pod report-3 (not finished) stays")
	return nil
}

func missing(gone map[string]bool, names ...string) []string {
	var out []string
	for _, n := range names {
		if !gone[n] {
			out = append(out, n)
		}
	}
	return out
}

func installSamples(ctx context.Context, dyn dynamic.Interface, say func(string, ...any)) error {
	entries, err := fs.ReadDir(samples.FS, ".")
	if err != nil {
		return err
	}
	for _, e := range entries {
		data, err := samples.FS.ReadFile(e.Name())
		if err != nil {
			return err
		}
		docs, err := document.DecodeAll(data)
		if err != nil {
			return fmt.Errorf("%s: %w", e.Name(), err)
		}
		for _, d := range docs {
			u := &unstructured.Unstructured{Object: d.Object}
			gvr := policycache.ClusterPolicies
			if u.GetKind() == policy.KindClusterCleanupPolicy {
				gvr = cleaner.ClusterCleanupPolicies
			}
			if _, err := dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
				return fmt.Errorf("policy %s: %w", u.GetName(), err)
			}
			say("    %-26s %s", u.GetName(), policyAction(u))
		}
	}
	return nil
}

// policyAction says what a sample policy does: its failure action for a
// validate policy, else the kinds of its rules.
func policyAction(u *unstructured.Unstructured) string {
	if u.GetKind() == policy.KindClusterCleanupPolicy {
		sched, _, _ := unstructured.NestedString(u.Object, "spec", "schedule")
		return "cleanup, " + sched
	}
	if a, _, _ := unstructured.NestedString(u.Object, "spec", "validationFailureAction"); a != "" {
		return a
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	var kinds []string
	for _, r := range rules {
		rule, _ := r.(map[string]any)
		for _, k := range []string{"validate", "mutate", "generate", "verifyImages"} {
			if _, ok := rule[k]; ok && !slices.Contains(kinds, k) {
				kinds = append(kinds, k)
			}
		}
	}
	return strings.Join(kinds, ", ")
}

// waitEnforced waits until the webhook is registered and answering.
func waitEnforced(ctx context.Context, kube kubernetes.Interface) error {
	priv := true
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		p := pod("probe", true, "busybox:1.36", &corev1.SecurityContext{Privileged: &priv})
		p.GenerateName, p.Name = "probe-", ""
		_, err := kube.CoreV1().Pods(Namespace).Create(ctx, p, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "disallow-privileged") {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
	return errors.New("the webhook did not start enforcing within 60s")
}

func podSpec(image string, sc *corev1.SecurityContext) corev1.PodSpec {
	return corev1.PodSpec{Containers: []corev1.Container{{
		Name:            "main",
		Image:           image,
		SecurityContext: sc,
		Resources: corev1.ResourceRequirements{Limits: corev1.ResourceList{
			corev1.ResourceMemory: resource.MustParse("128Mi"),
		}},
	}}}
}

func pod(name string, good bool, image string, sc *corev1.SecurityContext) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: Namespace}, Spec: podSpec(image, sc)}
	if good {
		p.Labels = map[string]string{"app.kubernetes.io/name": name}
	} else {
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	}
	return p
}

func denial(err error) string {
	msg := err.Error()
	if i := strings.Index(msg, "denied the request:"); i >= 0 {
		msg = msg[i+len("denied the request:"):]
	}
	return strings.TrimSpace(msg)
}

func indent(s string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		lines[i] = "        " + l
	}
	return strings.Join(lines, "\n")
}

// waitReports waits until every admitted Pod of the demo namespace has a
// report, and returns the reports.
func waitReports(ctx context.Context, dyn dynamic.Interface, kube kubernetes.Interface, timeout time.Duration) ([]unstructured.Unstructured, error) {
	deadline := time.Now().Add(timeout)
	for {
		pods, err := kube.CoreV1().Pods(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		list, err := dyn.Resource(policyReports).Namespace(Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		// Reports are named by their resource's uid; the Deployment and
		// its ReplicaSet have reports too, so count the Pods' own.
		names := make(map[string]bool, len(list.Items))
		for _, r := range list.Items {
			names[r.GetName()] = true
		}
		missing := 0
		for _, p := range pods.Items {
			if !names[string(p.UID)] {
				missing++
			}
		}
		if len(pods.Items) > 0 && missing == 0 {
			return list.Items, nil
		}
		if time.Now().After(deadline) {
			return list.Items, fmt.Errorf("%d of %d pods have no report after %s", missing, len(pods.Items), timeout)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// printReports prints reports as `kubectl get policyreport -A -o wide`.
func printReports(out io.Writer, reports []unstructured.Unstructured) {
	sort.Slice(reports, func(i, j int) bool {
		return document.String(reports[i].Object, "scope", "name") < document.String(reports[j].Object, "scope", "name")
	})
	tw := tabwriter.NewWriter(out, 0, 4, 3, ' ', 0)
	fmt.Fprintln(tw, "NAMESPACE\tNAME\tKIND\tNAME\tPASS\tFAIL\tWARN\tERROR\tSKIP\tAGE")
	for _, r := range reports {
		sum, _ := r.Object["summary"].(map[string]any)
		n := func(k string) string {
			v, _ := sum[k].(int64)
			if f, ok := sum[k].(float64); ok {
				v = int64(f)
			}
			return fmt.Sprint(v)
		}
		age := time.Since(r.GetCreationTimestamp().Time).Round(time.Second)
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.GetNamespace(), r.GetName(),
			document.String(r.Object, "scope", "kind"), document.String(r.Object, "scope", "name"),
			n("pass"), n("fail"), n("warn"), n("error"), n("skip"), age)
	}
	_ = tw.Flush()
}
