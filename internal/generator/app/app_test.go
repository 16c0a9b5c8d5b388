package app_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/cli"
	"github.com/verdict-dev/verdict/internal/generator"
	generatorapp "github.com/verdict-dev/verdict/internal/generator/app"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/internal/testkit/testproc"
	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
	"github.com/verdict-dev/verdict/pkg/queue"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"
)

func TestConfigValidate(t *testing.T) {
	tests := map[string]struct {
		mod  func(*generatorapp.Config)
		want string
	}{
		"defaults":                        {mod: func(*generatorapp.Config) {}},
		"no nats":                         {mod: func(c *generatorapp.Config) { c.NATS.URLs = nil }, want: "nats-url"},
		"zero concurrency":                {mod: func(c *generatorapp.Config) { c.Worker.Concurrency = 0 }, want: "concurrency 0"},
		"huge concurrency":                {mod: func(c *generatorapp.Config) { c.Worker.Concurrency = 501 }, want: "concurrency 501"},
		"short ack wait":                  {mod: func(c *generatorapp.Config) { c.Worker.AckWait = time.Second }, want: "ack wait"},
		"no attempts":                     {mod: func(c *generatorapp.Config) { c.Worker.Attempts = 0 }, want: "attempts 0"},
		"retries reversed":                {mod: func(c *generatorapp.Config) { c.Worker.RetryMin, c.Worker.RetryMax = time.Minute, time.Second }, want: "retry delays"},
		"no grace":                        {mod: func(c *generatorapp.Config) { c.VerifyGrace = 0 }, want: "verify grace"},
		"grace past the duplicate window": {mod: func(c *generatorapp.Config) { c.VerifyGrace = 3 * time.Minute }, want: "duplicate window"},
		"no shutdown":                     {mod: func(c *generatorapp.Config) { c.Worker.ShutdownTimeout = 0 }, want: "shutdown timeout"},
		"bad api qps":                     {mod: func(c *generatorapp.Config) { c.Kube.QPS = -1 }, want: "api-qps"},
		"bad log format":                  {mod: func(c *generatorapp.Config) { c.Log.Format = "xml" }, want: "log-format"},
		"several problems":                {mod: func(c *generatorapp.Config) { c.Worker.Attempts, c.Worker.Concurrency = 0, 0 }, want: "attempts 0"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			c := generatorapp.DefaultConfig()
			tc.mod(&c)
			err := c.Validate()
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, generatorapp.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want generatorapp.ErrInvalidConfig about %q", err, tc.want)
			}
		})
	}
}

// addDefaults generates a ConfigMap into every new Namespace.
const addDefaults = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: add-defaults}
spec:
  rules:
  - name: defaults-configmap
    match: {any: [{resources: {kinds: [Namespace], names: ["gen-*"]}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: defaults
      namespace: "{{request.object.metadata.name}}"
      data:
        metadata: {labels: {team: platform}}
        data: {owner: "{{request.object.metadata.name}}", tier: standard}
`

// cloneSecret copies a Secret kept in the templates namespace into every
// new Namespace.
const cloneSecret = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: clone-secret}
spec:
  rules:
  - name: regcred
    match: {any: [{resources: {kinds: [Namespace], names: ["gen-*"]}}]}
    generate:
      apiVersion: v1
      kind: Secret
      name: regcred
      namespace: "{{request.object.metadata.name}}"
      clone: {namespace: templates, name: regcred}
`

// labelSecret is a mutate-existing policy: a ConfigMap named dictionary
// labels the Secret named target in its namespace.
const labelSecret = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: label-secret}
spec:
  rules:
  - name: touch
    match: {any: [{resources: {kinds: [ConfigMap], names: [dictionary]}}]}
    mutate:
      targets:
      - {apiVersion: v1, kind: Secret, name: target, namespace: "{{request.object.metadata.namespace}}"}
      patchStrategicMerge:
        metadata: {labels: {touched-by: "{{request.object.metadata.name}}"}}
`

// escape is a namespaced Policy that tries to generate into another
// namespace. The namespace is a variable: a literal one is refused
// when the policy is admitted (or compiled), so only the generator's own
// check can stop this one.
const escape = `apiVersion: verdict.dev/v1
kind: Policy
metadata: {name: escape, namespace: team}
spec:
  rules:
  - name: elsewhere
    match: {any: [{resources: {kinds: [ConfigMap], names: ["trigger-*"]}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: escaped
      namespace: "{{ 'other' }}"
      data:
        data: {from: team}
`

// start runs fn until the test ends and checks it stops cleanly.
func start(t testing.TB, what string, fn func(ctx context.Context) error) {
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- fn(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("%s: %v", what, err)
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not stop", what)
		}
	})
}

// metric is the value of the sample that starts with series in the
// generator's /metrics (0 when absent).
func metric(t *testing.T, probe, series string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + probe + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			var f float64
			if _, err := fmt.Sscan(v, &f); err == nil {
				return f
			}
		}
	}
	return 0
}

// startStack starts an embedded JetStream, the real webhook (one replica,
// leader: it registers itself) and the generator service (its Run, as its
// main does, with short retries) against the control plane. It returns
// the JetStream server and the generator's probe address; the
// generator's log is shown when the test fails.
func startStack(t *testing.T, cp *controlplane.ControlPlane) (*embedded.Server, string) {
	t.Helper()
	nats, probe, _ := startStackWith(t, cp, stackOptions{mutualTLS: true})
	return nats, probe
}

// stackOptions change what startStackWith starts.
type stackOptions struct {
	// mutualTLS: the webhook requires the API server's client
	// certificate (without it, the chart's default, anyone may call it).
	mutualTLS bool
	// grace is the generator's --verify-grace (0: the default).
	grace time.Duration
}

// startStackWith is startStack with options; it also returns the
// webhook's address.
func startStackWith(t *testing.T, cp *controlplane.ControlPlane, o stackOptions) (*embedded.Server, string, string) {
	t.Helper()
	nats := natstest.Server(t)
	webhookAddr := startWebhookWith(t, cp, nats.ClientURL(), o.mutualTLS)
	probe := testkit.FreeAddr(t)
	gcfg := generatorapp.DefaultConfig()
	if o.grace > 0 {
		gcfg.VerifyGrace = o.grace
	}
	gcfg.Kube.Kubeconfig = cp.KubeconfigPath()
	gcfg.NATS.URLs = []string{nats.ClientURL()}
	gcfg.ProbeAddress = probe
	gcfg.Worker.RetryMin, gcfg.Worker.RetryMax = 100*time.Millisecond, time.Second
	gcfg.Worker.ShutdownTimeout = 5 * time.Second
	var logs testproc.LogBuffer
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("generator log:\n%s", logs.String())
		}
	})
	start(t, "generator", func(ctx context.Context) error { return generatorapp.Run(ctx, gcfg, zerolog.New(&logs)) })
	return nats, probe, webhookAddr
}

// startWebhook runs the real webhook (one replica, leader: it registers
// itself) until the test ends.
func startWebhook(t testing.TB, cp *controlplane.ControlPlane, natsURL string) {
	t.Helper()
	startWebhookWith(t, cp, natsURL, true)
}

// startWebhookWith is startWebhook, with or without mutual TLS; it
// returns the webhook's address.
func startWebhookWith(t testing.TB, cp *controlplane.ControlPlane, natsURL string, mutualTLS bool) string {
	t.Helper()
	webhookAddr := testkit.FreeAddr(t)
	wcfg := webhookapp.DefaultConfig()
	wcfg.Kube.Kubeconfig = cp.KubeconfigPath()
	wcfg.Identity = "replica-a"
	wcfg.WebhookURL = "https://" + webhookAddr
	wcfg.CertIPs = []net.IP{net.ParseIP("127.0.0.1")}
	wcfg.Webhook.Address = webhookAddr
	wcfg.Webhook.ProbeAddress = ""
	wcfg.Webhook.ShutdownDelay = 0
	if mutualTLS {
		wcfg.Webhook.ClientCAFile = cp.WebhookClientCAFile()
	}
	wcfg.NATS.URLs = []string{natsURL}
	wcfg.LeaseDuration, wcfg.RenewDeadline, wcfg.RetryPeriod = 3*time.Second, 2*time.Second, 200*time.Millisecond
	wcfg.ReconcileInterval = 2 * time.Second
	start(t, "webhook", func(ctx context.Context) error {
		return webhookapp.Run(ctx, wcfg, zerolog.Nop())
	})
	return webhookAddr
}

func items(outcome, reason string) string {
	return fmt.Sprintf(`verdict_queue_work_items_total{consumer="generator",kind="generate",outcome=%q,reason=%q}`, outcome, reason)
}

// TestE2EGenerate runs the real webhook and the generator service (its
// Run, as its main does) against a real kube-apiserver and JetStream:
// creating a Namespace makes the webhook publish a generate item and the
// generator apply the ConfigMap with Kyverno's labels; a duplicate item
// changes nothing; an item whose trigger uid is not the object's writes
// nothing; a namespaced Policy generating into another namespace ends in
// VERDICT_DEAD with its reason, counted.
func TestE2EGenerate(t *testing.T) {
	cp := controlplane.StartForTest(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	for _, ns := range []string{"verdict", "team", "other", "templates"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cpol, err := dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, addDefaults), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(policycache.Policies).Namespace("team").Create(ctx, testkit.Unstructured(t, escape), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, y := range []string{cloneSecret, labelSecret} {
		if _, err := dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, y), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	source := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "templates", Name: "regcred", Labels: map[string]string{"kind": "registry"}},
		Data: map[string][]byte{".dockerconfigjson": []byte(`{"auths":{}}`)}, Type: corev1.SecretTypeDockerConfigJson}
	if _, err := kube.CoreV1().Secrets("templates").Create(ctx, source, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	nats, probe := startStack(t, cp)

	// Once the webhook is registered, a new Namespace gets its ConfigMap.
	ns, cm := firstGenerated(t, kube, "gen", "defaults")
	want := map[string]string{
		"team": "platform", generator.LabelManagedBy: "verdict",
		generator.LabelPolicyName: "add-defaults", generator.LabelPolicyNamespace: "", generator.LabelRuleName: "defaults-configmap",
		generator.LabelTriggerKind: "Namespace", generator.LabelTriggerVersion: "v1", generator.LabelTriggerGroup: "",
		generator.LabelTriggerName: ns.Name, generator.LabelTriggerNS: "", generator.LabelTriggerUID: string(ns.UID),
	}
	for k, v := range want {
		if got, ok := cm.Labels[k]; !ok || got != v {
			t.Errorf("label %s = %q (present %v), want %q", k, got, ok, v)
		}
	}
	if cm.Data["owner"] != ns.Name || cm.Data["tier"] != "standard" {
		t.Errorf("data %v", cm.Data)
	}
	// The clone rule of another policy on the same trigger copies the
	// Secret, read from the cluster, with its data, type and labels.
	testkit.Eventually(t, 15*time.Second, "the cloned Secret", func() error {
		sec, err := kube.CoreV1().Secrets(ns.Name).Get(ctx, "regcred", metav1.GetOptions{})
		switch {
		case err != nil:
			return err
		case string(sec.Data[".dockerconfigjson"]) != `{"auths":{}}` || sec.Type != corev1.SecretTypeDockerConfigJson:
			return fmt.Errorf("secret %s %v", sec.Type, sec.Data)
		case sec.Labels["kind"] != "registry" || sec.Labels[generator.LabelPolicyName] != "clone-secret":
			return fmt.Errorf("labels %v", sec.Labels)
		}
		return nil
	})

	// A mutate-existing rule: the webhook queues a mutate item for the
	// trigger, the generator patches the existing target.
	if _, err := kube.CoreV1().Secrets("team").Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "target"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "dictionary"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 15*time.Second, "the target patched", func() error {
		sec, err := kube.CoreV1().Secrets("team").Get(ctx, "target", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if sec.Labels["touched-by"] != "dictionary" {
			return fmt.Errorf("labels %v", sec.Labels)
		}
		return nil
	})
	if len(cm.ManagedFields) != 1 || cm.ManagedFields[0].Manager != generator.FieldManager || cm.ManagedFields[0].Operation != metav1.ManagedFieldsOperationApply {
		t.Errorf("managed fields %+v, want one apply by %s", cm.ManagedFields, generator.FieldManager)
	}
	processed := metric(t, probe, items(queue.ResultProcessed, generator.ReasonApplied))

	conn, err := bus.Connect(ctx, queue.WithURL(nats.ClientURL()), queue.WithLogger(zerolog.Nop()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	publish := func(item bus.WorkItem) {
		t.Helper()
		msg, err := bus.WorkMessage(item)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := conn.PublishSync(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	item := bus.WorkItem{
		Kind:      bus.WorkGenerate,
		Policy:    bus.PolicyRef{Key: "add-defaults", UID: string(cpol.GetUID()), ResourceVersion: cpol.GetResourceVersion()},
		Rule:      "defaults-configmap",
		Trigger:   bus.ResourceRef{APIVersion: "v1", Kind: "Namespace", Name: ns.Name, UID: string(ns.UID)},
		Operation: "CREATE", RequestUID: "duplicate", Timestamp: time.Now(),
	}

	t.Run("duplicate changes nothing", func(t *testing.T) {
		publish(item)
		testkit.Eventually(t, 15*time.Second, "duplicate processed", func() error {
			if got := metric(t, probe, items(queue.ResultProcessed, generator.ReasonApplied)); got < processed+1 {
				return fmt.Errorf("processed %v", got)
			}
			return nil
		})
		again, err := kube.CoreV1().ConfigMaps(ns.Name).Get(ctx, "defaults", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if again.ResourceVersion != cm.ResourceVersion {
			t.Fatalf("resourceVersion %s after the duplicate, was %s", again.ResourceVersion, cm.ResourceVersion)
		}
	})

	t.Run("trigger uid mismatch writes nothing", func(t *testing.T) {
		forged := item
		forged.Trigger = bus.ResourceRef{APIVersion: "v1", Kind: "Namespace", Name: "team", UID: "not-the-uid"}
		forged.RequestUID = "forged"
		publish(forged)
		testkit.Eventually(t, 15*time.Second, "forged item skipped", func() error {
			if got := metric(t, probe, items(queue.ResultSkipped, generator.ReasonTriggerUIDMismatch)); got != 1 {
				return fmt.Errorf("skipped %v", got)
			}
			return nil
		})
		if _, err := kube.CoreV1().ConfigMaps("team").Get(ctx, "defaults", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("a ConfigMap was written for a forged trigger: %v", err)
		}
	})

	t.Run("a policy that is gone writes nothing", func(t *testing.T) {
		gone := item
		gone.Policy = bus.PolicyRef{Key: "no-such-policy", UID: "u"}
		publish(gone)
		testkit.Eventually(t, 15*time.Second, "item of a deleted policy skipped", func() error {
			if got := metric(t, probe, items(queue.ResultSkipped, generator.ReasonPolicyGone)); got != 1 {
				return fmt.Errorf("skipped %v", got)
			}
			return nil
		})
	})

	t.Run("namespaced policy generating elsewhere is dead-lettered", func(t *testing.T) {
		trig, err := kube.CoreV1().ConfigMaps("team").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "trigger-1"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		series := items(queue.ResultDeadLettered, generator.ReasonNamespaceForbidden)
		testkit.Eventually(t, 15*time.Second, "dead-letter counted", func() error {
			if got := metric(t, probe, series); got != 1 {
				return fmt.Errorf("%s = %v", series, got)
			}
			return nil
		})
		// The handler counts the outcome; the runner then stores the dead
		// letter.
		var dead []queue.DeadLetter
		testkit.Eventually(t, 10*time.Second, "one dead letter", func() error {
			dead = dead[:0]
			if _, err := conn.Replay(ctx, bus.StreamDead, func(m queue.ReplayMsg) error {
				d, err := queue.ParseDeadLetter(m.Header, m.Data)
				if err != nil {
					return err
				}
				dead = append(dead, d)
				return nil
			}); err != nil {
				return err
			}
			if len(dead) != 1 {
				return fmt.Errorf("%d dead letters: %+v", len(dead), dead)
			}
			return nil
		})
		d := dead[0]
		if !strings.Contains(d.Reason, generator.ReasonNamespaceForbidden) || !strings.Contains(d.Reason, "only into namespace team, not other") ||
			d.Consumer != bus.ConsumerGenerator || d.Stream != bus.StreamWork {
			t.Fatalf("dead letter %+v", d)
		}
		if !strings.Contains(string(d.Data), string(trig.UID)) {
			t.Fatalf("the dead letter is not the trigger's item: %s", d.Data)
		}
		if _, err := kube.CoreV1().ConfigMaps("other").Get(ctx, "escaped", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the namespaced policy wrote into another namespace: %v", err)
		}
		if got := metric(t, probe, `verdict_queue_dead_lettered_total{consumer="generator"}`); got != 1 {
			t.Errorf("verdict_queue_dead_lettered_total = %v", got)
		}
		// The trigger's events say so.
		testkit.Eventually(t, 10*time.Second, "a GenerateFailed event on the trigger", func() error {
			evs, err := kube.CoreV1().Events(trig.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.uid=" + string(trig.UID)})
			if err != nil {
				return err
			}
			for _, ev := range evs.Items {
				if ev.Type == corev1.EventTypeWarning && ev.Reason == generator.EventReasonDeadLettered && strings.Contains(ev.Message, "only into namespace team, not other") {
					return nil
				}
			}
			return fmt.Errorf("events %+v", evs.Items)
		})

		// The operator sees it with `verdict work list --dead`, fixes the
		// policy, re-queues it with `verdict work retry`, and it succeeds.
		work := func(args ...string) string {
			t.Helper()
			var out, errOut bytes.Buffer
			if code := cli.Main(ctx, append(append([]string{"work"}, args...), "--nats-url", nats.ClientURL()), strings.NewReader(""), &out, &errOut); code != 0 {
				t.Fatalf("verdict work %v: exit %d: %s", args, code, errOut.String())
			}
			return out.String()
		}
		if out := work("list", "--dead"); !strings.Contains(out, generator.ReasonNamespaceForbidden) || !strings.Contains(out, "generate") {
			t.Fatalf("verdict work list --dead does not show the dead letter and its reason:\n%s", out)
		}
		pols := dyn.Resource(policycache.Policies).Namespace("team")
		pol, err := pols.Get(ctx, "escape", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rules, _, _ := unstructured.NestedSlice(pol.Object, "spec", "rules")
		if err := unstructured.SetNestedField(rules[0].(map[string]any), "team", "generate", "namespace"); err != nil {
			t.Fatal(err)
		}
		if err := unstructured.SetNestedSlice(pol.Object, rules, "spec", "rules"); err != nil {
			t.Fatal(err)
		}
		if _, err := pols.Update(ctx, pol, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		work("retry", "--all")
		testkit.Eventually(t, 15*time.Second, "the re-queued item worked", func() error {
			cm, err := kube.CoreV1().ConfigMaps("team").Get(ctx, "escaped", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Labels[generator.LabelTriggerUID] != string(trig.UID) {
				return fmt.Errorf("labels %v", cm.Labels)
			}
			return nil
		})
		if out := work("list", "--dead", "-o", "json"); strings.Contains(out, generator.ReasonNamespaceForbidden) {
			t.Fatalf("the dead letter is still there after the retry:\n%s", out)
		}
	})
}
