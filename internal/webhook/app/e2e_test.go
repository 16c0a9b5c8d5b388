package app_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
	"github.com/verdict-dev/verdict/pkg/queue"
)

const enforcePrivileged = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: disallow-privileged}
spec:
  validationFailureAction: Enforce
  rules:
  - name: privileged-containers
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "Privileged mode is disallowed."
      pattern:
        spec:
          containers:
          - =(securityContext):
              =(privileged): "false"
`

const auditLabels = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: require-team-label, annotations: {policies.kyverno.io/category: Best Practices}}
spec:
  validationFailureAction: Audit
  rules:
  - name: team
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "label team is required"
      pattern: {metadata: {labels: {team: "?*"}}}
`

const mutateLabel = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: add-managed-label}
spec:
  rules:
  - name: add
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
      patchStrategicMerge:
        metadata:
          labels:
            +(verdict.dev/checked): "yes"
`

func pod(name string, privileged bool) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27"}}},
	}
	if privileged {
		t := true
		p.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: &t}
	}
	return p
}

// TestE2EWebhook runs the service (cluster mode) against a real
// kube-apiserver and a real JetStream that takes only its NKey: it
// registers itself, denies an Enforce violation with the
// rule's message, admits and mutates a compliant Pod, publishes the audit
// results, and refuses an invalid policy at create time.
func TestE2EWebhook(t *testing.T) {
	cp := controlplane.StartForTest(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	for _, ns := range []string{"verdict", "team"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kube.CoreV1().ServiceAccounts("team").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, y := range []string{enforcePrivileged, auditLabels, mutateLabel} {
		if _, err := dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, y), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// JetStream lets in one NKey user: the service's credentials are used.
	seedFile, public := natstest.NKeyUser(t)
	nats := natstest.Server(t, natstest.WithNKeyUsers(public))

	port := testkit.FreePort(t)
	cfg := webhookapp.DefaultConfig()
	cfg.Kube.Kubeconfig = cp.KubeconfigPath()
	cfg.Identity = "replica-a"
	cfg.WebhookURL = fmt.Sprintf("https://127.0.0.1:%d", port)
	cfg.CertIPs = []net.IP{net.ParseIP("127.0.0.1")}
	cfg.Webhook.Address = fmt.Sprintf("127.0.0.1:%d", port)
	cfg.Webhook.ShutdownDelay = 0
	cfg.NATS.URLs = []string{nats.ClientURL()}
	cfg.NATS.NKeyFile = seedFile
	cfg.Webhook.ClientCAFile = cp.WebhookClientCAFile()
	cfg.LeaseDuration, cfg.RenewDeadline, cfg.RetryPeriod = 3*time.Second, 2*time.Second, 200*time.Millisecond
	appCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- webhookapp.Run(appCtx, cfg, zerolog.Nop()) }()
	t.Cleanup(func() {
		stop()
		select {
		case err := <-done:
			if err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("service: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Error("service did not stop")
		}
	})

	// The leader registers the webhooks and issues the certificate; the
	// API server then calls the webhook for Pods.
	var denied error
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		_, denied = kube.CoreV1().Pods("team").Create(ctx, pod("bad", true), metav1.CreateOptions{})
		if denied != nil && strings.Contains(denied.Error(), "Privileged mode is disallowed") {
			break
		}
		if denied == nil {
			_ = kube.CoreV1().Pods("team").Delete(ctx, "bad", metav1.DeleteOptions{})
		}
		time.Sleep(500 * time.Millisecond)
	}
	if denied == nil || !strings.Contains(denied.Error(), "Privileged mode is disallowed") {
		t.Fatalf("the privileged pod was not denied by the webhook: %v", denied)
	}
	if !strings.Contains(denied.Error(), "disallow-privileged") || !strings.Contains(denied.Error(), "privileged-containers") {
		t.Fatalf("denial does not name the policy and rule: %v", denied)
	}

	good, err := kube.CoreV1().Pods("team").Create(ctx, pod("good", false), metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("compliant pod refused: %v", err)
	}
	if good.Labels["verdict.dev/checked"] != "yes" {
		t.Fatalf("stored pod not mutated: labels %v", good.Labels)
	}

	// The audit policy's failure is in VERDICT_RESULTS, under the pod's uid.
	conn, err := bus.Connect(ctx, queue.WithURL(nats.ClientURL()), queue.WithNKeyFile(seedFile))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var found *bus.ResultEvent
	deadline = time.Now().Add(15 * time.Second)
	for found == nil && time.Now().Before(deadline) {
		_, err := conn.Replay(ctx, bus.StreamResults, func(m queue.ReplayMsg) error {
			evs, err := bus.DecodeResults(m.Subject, m.Data)
			if err != nil {
				return err
			}
			for _, ev := range evs {
				if ev.Policy.Key == "require-team-label" {
					found = &ev
				}
			}
			return nil
		}, queue.WithReplayFilter(bus.ResultsOfResource(string(good.UID))))
		if err != nil {
			t.Fatal(err)
		}
		if found == nil {
			time.Sleep(200 * time.Millisecond)
		}
	}
	if found == nil {
		t.Fatal("no audit result for the admitted pod in VERDICT_RESULTS")
	}
	if len(found.Rules) != 1 || found.Rules[0].Status != "fail" || found.Category != "Best Practices" || found.Resource.Name != "good" {
		t.Fatalf("result event %+v", found)
	}

	// An invalid policy is refused at create time, with the field path.
	bad := testkit.Unstructured(t, strings.Replace(auditLabels, "name: require-team-label", "name: broken", 1))
	spec := bad.Object["spec"].(map[string]any)
	spec["rules"].([]any)[0].(map[string]any)["validate"].(map[string]any)["patern"] = map[string]any{}
	_, err = dyn.Resource(policycache.ClusterPolicies).Create(ctx, bad, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "spec.rules[0].validate.patern") {
		t.Fatalf("invalid policy not refused with its field path: %v", err)
	}
}
