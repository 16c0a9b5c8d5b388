package app_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	cleanerapp "github.com/verdict-dev/verdict/internal/cleaner/app"
	"github.com/verdict-dev/verdict/internal/cli"
	generatorapp "github.com/verdict-dev/verdict/internal/generator/app"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	reporterapp "github.com/verdict-dev/verdict/internal/reports/app"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/kyvernocrds"
	"github.com/verdict-dev/verdict/internal/testkit/testproc"
	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
	"github.com/verdict-dev/verdict/internal/webhook/registrar"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// Kyverno's policies as a Kyverno user has them: kyverno.io/v1, Enforce.
const kyvernoRequireTeam = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-team}
spec:
  validationFailureAction: Enforce
  background: true
  rules:
  - name: check-team
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "label team is required"
      pattern: {metadata: {labels: {team: "?*"}}}
`

// A Kyverno 1.19 PolicyException (kyverno.io/v2).
const kyvernoExemptScratch = `apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: scratch-pods, namespace: team}
spec:
  exceptions:
  - policyName: require-team
    ruleNames: [check-team]
  match:
    any:
    - resources: {kinds: [Pod], names: ["exempt-*"]}
`

// A Kyverno 1.19 cleanup policy (kyverno.io/v2): ConfigMaps labelled
// scratch=true go every minute.
const kyvernoCleanScratch = `apiVersion: kyverno.io/v2
kind: ClusterCleanupPolicy
metadata: {name: clean-scratch}
spec:
  schedule: "* * * * *"
  match:
    any:
    - resources:
        kinds: [ConfigMap]
        selector: {matchLabels: {scratch: "true"}}
`

// A synchronized GeneratingPolicy of policies.kyverno.io/v1: Kyverno's
// CRD of the kind has no status.downstreamKinds, so the kinds it
// generates are recorded in an annotation.
const kyvernoTeamDefaults = `apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata: {name: team-defaults}
spec:
  evaluation: {synchronize: {enabled: true}}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [namespaces]
  matchConditions:
  - name: teams
    expression: "object.metadata.name.startsWith('team-')"
  variables:
  - name: defaults
    expression: >-
      [{"kind": dyn("ConfigMap"), "apiVersion": dyn("v1"),
        "metadata": dyn({"name": "defaults", "namespace": string(object.metadata.name)}),
        "data": dyn({"owner": string(object.metadata.name)})}]
  generate:
  - expression: generator.Apply(object.metadata.name, variables.defaults)
`

// kyvernoReport is a PolicyReport as Kyverno writes one for a Pod: named
// after the Pod's UID, managed-by kyverno, its results' source kyverno.
func kyvernoReport(p *corev1.Pod, result string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "wgpolicyk8s.io/v1alpha2",
		"kind":       "PolicyReport",
		"metadata": map[string]any{
			"name": string(p.UID), "namespace": p.Namespace,
			"labels": map[string]any{model.LabelManagedBy: "kyverno"},
		},
		"scope": map[string]any{"apiVersion": "v1", "kind": "Pod", "name": p.Name, "namespace": p.Namespace, "uid": string(p.UID)},
		"results": []any{map[string]any{
			"policy": "require-team", "rule": "check-team", "result": result, "source": "kyverno",
			"scored": true, "timestamp": map[string]any{"seconds": int64(1), "nanos": int64(0)},
		}},
		"summary": map[string]any{"pass": int64(1)},
	}}
}

// runService runs a service until the test ends, its log shown when the
// test fails.
func runService(t *testing.T, name string, run func(ctx context.Context, log zerolog.Logger) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var logs testproc.LogBuffer
	go func() { done <- run(ctx, zerolog.New(&logs)) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop", name)
		}
		if t.Failed() {
			t.Logf("%s log:\n%s", name, logs.String())
		}
	})
}

// TestE2EKyvernoShadowThenAdopt is the way over from Kyverno through the
// real kube-apiserver, with Kyverno 1.19's own CRDs installed as a Kyverno
// installation leaves them and a kyverno.io/v1 ClusterPolicy in Enforce
// mode:
//
//   - shadow (the chart's kyverno.mode=shadow): Verdict registers
//     validating webhooks only, all Ignore; a Pod the policy fails is
//     admitted; Verdict's report of it (verdict-<uid>) says fail, beside
//     Kyverno's report of the same Pod (<uid>), which Verdict leaves as it
//     is; verdict compare lists the disagreement; the policy's status is
//     not written;
//   - adopt (kyverno.mode=adopt): the same ClusterPolicy object, unedited,
//     is enforced, a kyverno.io/v2 PolicyException honoured; `kubectl get cpol` shows it READY; a kyverno.io
//     policy Verdict finds invalid is refused; a synchronized
//     policies.kyverno.io/v1 GeneratingPolicy generates and restores
//     what it generated, its kinds recorded in an annotation (Kyverno's
//     CRD prunes status.downstreamKinds); a kyverno.io/v2
//     ClusterCleanupPolicy runs on its schedule.
func TestE2EKyvernoShadowThenAdopt(t *testing.T) {
	cp := controlplane.StartForTest(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	docs, err := kyvernocrds.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := controlplane.ApplyCRDs(ctx, dyn, docs); err != nil {
		t.Fatal(err)
	}
	e := &env{cp: cp, kube: kube, dyn: dyn, dir: t.TempDir(), port: testkit.FreePort(t)}
	for _, ns := range []string{"verdict", "team"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kube.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	api := policycache.KyvernoAPI
	cpols := api.MustResource(policy.KindClusterPolicy)
	if _, err := dyn.Resource(cpols).Create(ctx, testkit.Unstructured(t, kyvernoRequireTeam), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startNATS(t)
	natsURL := fmt.Sprintf("nats://127.0.0.1:%d", e.port)

	// Shadow.
	shadow := e.startReplica(t, "shadow", "", func(c *webhookapp.Config) {
		c.PolicyAPI = api
		c.Webhook.Shadow = true
	})
	runService(t, "reporter", func(ctx context.Context, log zerolog.Logger) error {
		cfg := reporterapp.DefaultConfig()
		cfg.Kube.Kubeconfig = cp.KubeconfigPath()
		cfg.NATS.URLs = []string{natsURL}
		cfg.ProbeAddress = ""
		cfg.CoalesceWindow = 50 * time.Millisecond
		cfg.PolicyAPI = api
		cfg.ReportNamePrefix = model.ShadowReportPrefix
		return reporterapp.Run(ctx, cfg, log)
	})
	testkit.Eventually(t, 60*time.Second, "the shadow's webhooks", func() error {
		val, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, registrar.DefaultValidatingName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, w := range val.Webhooks {
			if *w.FailurePolicy != admissionregistrationv1.Ignore {
				return fmt.Errorf("webhook %s fails closed", w.Name)
			}
		}
		if len(val.Webhooks) != 1 || !strings.HasPrefix(val.Webhooks[0].Name, "validate-ignore") {
			return fmt.Errorf("%d webhooks, want the one validating webhook", len(val.Webhooks))
		}
		mut, err := kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(ctx, registrar.DefaultMutatingName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(mut.Webhooks) != 0 {
			return fmt.Errorf("a shadow registered mutating webhooks %d", len(mut.Webhooks))
		}
		return nil
	})
	testkit.EventuallyTrue(t, 30*time.Second, "the shadow ready", shadow.ready)
	unlabelled, err := kube.CoreV1().Pods("team").Create(ctx, pod("no-team", false), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("the shadow changed an answer: %v", err)
	}
	// It evaluated the Pod, and would have denied it.
	testkit.EventuallyTrue(t, 10*time.Second, "the shadow's denial counted", func() bool {
		return metricAbove(scrape(t, shadow.probe), `verdict_webhook_shadow_decisions_total{outcome="denied"}`, 0)
	})
	kyvernos, err := dyn.Resource(model.PolicyReports).Namespace("team").Create(ctx, kyvernoReport(unlabelled, "pass"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the shadow's report", func() error {
		rep, err := dyn.Resource(model.PolicyReports).Namespace("team").Get(ctx, model.ShadowReportPrefix+string(unlabelled.UID), metav1.GetOptions{})
		if err != nil {
			return err
		}
		results, _, _ := unstructured.NestedSlice(rep.Object, "results")
		for _, r := range results {
			r := r.(map[string]any)
			if r["policy"] == "require-team" && r["rule"] == "check-team" && r["result"] == "fail" && r["source"] == model.Source {
				return nil
			}
		}
		return fmt.Errorf("results %v", results)
	})
	if got, err := dyn.Resource(model.PolicyReports).Namespace("team").Get(ctx, kyvernos.GetName(), metav1.GetOptions{}); err != nil || got.GetResourceVersion() != kyvernos.GetResourceVersion() {
		t.Errorf("Kyverno's report touched: %v", err)
	}
	// verdict compare finds the disagreement planted: Kyverno's report
	// says the Pod passes, Verdict's that it fails.
	var out, errOut bytes.Buffer
	code := cli.Main(ctx, []string{"compare", "--kubeconfig", cp.KubeconfigPath(), "-o", "json"}, strings.NewReader(""), &out, &errOut)
	var cmp cli.Comparison
	if err := json.Unmarshal(out.Bytes(), &cmp); err != nil {
		t.Fatalf("compare: exit %d, %v\n%s%s", code, err, out.String(), errOut.String())
	}
	if code != cli.ExitFailed || cmp.Summary.Disagree != 1 || len(cmp.Rows) != 1 {
		t.Fatalf("compare: exit %d, %+v", code, cmp)
	}
	if r := cmp.Rows[0]; r.Policy != "require-team" || r.Rule != "check-team" || r.Resource.UID != string(unlabelled.UID) || r.Kyverno != "pass" || r.Verdict != "fail" {
		t.Errorf("compare: %+v, want require-team/check-team on the Pod, pass against fail", r)
	}
	if u, err := dyn.Resource(cpols).Get(ctx, "require-team", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if st, ok := u.Object["status"]; ok && st != nil && fmt.Sprint(st) != "map[]" {
		t.Errorf("a shadow wrote the policy's status: %v", st)
	}
	shadow.stop(t)

	// Adopt: the same objects, enforced, Kyverno's exceptions honoured.
	if _, err := dyn.Resource(api.Exceptions()[0]).Namespace("team").Create(ctx, testkit.Unstructured(t, kyvernoExemptScratch), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startReplica(t, "owner", "", func(c *webhookapp.Config) { c.PolicyAPI = api })
	testkit.Eventually(t, 60*time.Second, "the policy enforced", func() error {
		_, err := kube.CoreV1().Pods("team").Create(ctx, pod(fmt.Sprintf("probe-%d", time.Now().UnixNano()), false), metav1.CreateOptions{})
		if err == nil || !strings.Contains(err.Error(), "label team is required") {
			return fmt.Errorf("not denied yet: %w", err)
		}
		return nil
	})
	if _, err := kube.CoreV1().Pods("team").Create(ctx, pod("exempt-1", false), metav1.CreateOptions{}); err != nil {
		t.Errorf("a Pod a kyverno.io/v2 PolicyException exempts: %v", err)
	}
	testkit.EventuallyTrue(t, 30*time.Second, "kubectl get cpol: READY", func() bool {
		_, rows := table(t, e, "/apis/kyverno.io/v1/clusterpolicies", false)
		return len(rows["require-team"]) > 3 && rows["require-team"][3] == "True"
	})
	invalid := strings.Replace(kyvernoRequireTeam, "name: require-team", "name: broken", 1)
	invalid = strings.Replace(invalid, `pattern: {metadata: {labels: {team: "?*"}}}`, `deny: {conditions: {any: [{key: "{{ request.object.metadata.name }}", operator: Bogus, value: x}]}}`, 1)
	if _, err := dyn.Resource(cpols).Create(ctx, testkit.Unstructured(t, invalid), metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "Bogus") {
		t.Errorf("an invalid kyverno.io ClusterPolicy: %v, want refused, naming the operator", err)
	}

	runService(t, "generator", func(ctx context.Context, log zerolog.Logger) error {
		cfg := generatorapp.DefaultConfig()
		cfg.Kube.Kubeconfig = cp.KubeconfigPath()
		cfg.ProbeAddress = ""
		cfg.NATS.URLs = []string{natsURL}
		cfg.PolicyAPI = api
		cfg.Worker.RetryMin, cfg.Worker.RetryMax, cfg.Worker.ShutdownTimeout = 100*time.Millisecond, time.Second, 5*time.Second
		return generatorapp.Run(ctx, cfg, log)
	})
	gpols := api.MustResource(policy.KindGeneratingPolicy)
	if _, err := dyn.Resource(gpols).Create(ctx, testkit.Unstructured(t, kyvernoTeamDefaults), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the webhooks select Namespaces", func() error {
		val, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, registrar.DefaultValidatingName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, w := range val.Webhooks {
			for _, r := range w.Rules {
				if slices.Contains(r.Resources, "namespaces") {
					return nil
				}
			}
		}
		return errors.New("not yet")
	})
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the GeneratingPolicy's ConfigMap in a new team namespace", func() error {
		_, err := kube.CoreV1().ConfigMaps("team-a").Get(ctx, "defaults", metav1.GetOptions{})
		return err
	})
	gp, err := dyn.Resource(gpols).Get(ctx, "team-defaults", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := gp.GetAnnotations()[policy.AnnotationDownstreamKinds]; got != `[{"apiVersion":"v1","kind":"ConfigMap"}]` {
		t.Errorf("the kinds recorded where Kyverno's CRD keeps them: %q", got)
	}
	if err := kube.CoreV1().ConfigMaps("team-a").Delete(ctx, "defaults", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the deleted downstream restored", func() error {
		_, err := kube.CoreV1().ConfigMaps("team-a").Get(ctx, "defaults", metav1.GetOptions{})
		return err
	})

	runService(t, "cleaner", func(ctx context.Context, log zerolog.Logger) error {
		cfg := cleanerapp.DefaultConfig()
		cfg.Kube.Kubeconfig = cp.KubeconfigPath()
		cfg.ProbeAddress = ""
		cfg.NATS.URLs = []string{natsURL}
		cfg.PolicyAPI = api
		cfg.Resync = 2 * time.Second
		cfg.Worker.RetryMin, cfg.Worker.RetryMax, cfg.Worker.ShutdownTimeout = 100*time.Millisecond, time.Second, 5*time.Second
		return cleanerapp.Run(ctx, cfg, log)
	})
	scratch, err := kube.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "scratch", Labels: map[string]string{"scratch": "true"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kept, err := kube.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "kept"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(api.MustResource(policy.KindClusterCleanupPolicy)).Create(ctx, testkit.Unstructured(t, kyvernoCleanScratch), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 150*time.Second, "the cleanup policy's tick", func() error {
		_, err := kube.CoreV1().ConfigMaps("team").Get(ctx, scratch.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("scratch still there: %w", err)
	})
	if _, err := kube.CoreV1().ConfigMaps("team").Get(ctx, kept.Name, metav1.GetOptions{}); err != nil {
		t.Errorf("a ConfigMap the policy does not select: %v", err)
	}
}
