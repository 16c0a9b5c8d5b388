package app_test

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/generator"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// nsOwner binds whoever creates a Namespace to the admin ClusterRole in
// it, as Kyverno's "namespace owner" sample does: the rule reads
// request.userInfo, so the policy runs only at admission.
const nsOwner = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: ns-owner}
spec:
  background: false
  rules:
  - name: owner-binding
    match: {any: [{resources: {kinds: [Namespace], names: ["own-*"]}}]}
    generate:
      apiVersion: rbac.authorization.k8s.io/v1
      kind: RoleBinding
      name: owner
      namespace: "{{request.object.metadata.name}}"
      data:
        roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}
        subjects:
        - {apiGroup: rbac.authorization.k8s.io, kind: User, name: "{{request.userInfo.username}}"}
`

// TestE2EForgedRequester is issue 28's finding 2: the webhook takes
// callers without a client certificate (the chart's default), so anyone
// who reaches it can send a review naming a real Namespace (its real uid)
// and any requester. The generator must not act on that requester: a
// forged CREATE for a Namespace created before the grace period, a forged
// UPDATE, and a forged CREATE sent after the real one (same trigger uid)
// give the forged user nothing, while the real creation of a Namespace by
// a real user still binds that user.
func TestE2EForgedRequester(t *testing.T) {
	cp := controlplane.StartForTest(t)
	ctx := t.Context()
	kube := kubernetes.NewForConfigOrDie(cp.RESTConfig())
	dyn := dynamic.NewForConfigOrDie(cp.RESTConfig())
	for _, ns := range []string{"verdict", "own-victim"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	victim, err := kube.CoreV1().Namespaces().Get(ctx, "own-victim", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// alice may create Namespaces; she creates hers through the API
	// server, which calls the webhook with her identity.
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "ns-creator"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create", "get"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "ns-creator-alice"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "ns-creator"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: "alice"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	aliceCfg := rest.CopyConfig(cp.RESTConfig())
	aliceCfg.Impersonate = rest.ImpersonationConfig{UserName: "alice", Groups: []string{"system:authenticated"}}
	alice := kubernetes.NewForConfigOrDie(aliceCfg)
	if _, err := dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, nsOwner), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	const grace = 10 * time.Second
	nats, probe, webhookAddr := startStackWith(t, cp, stackOptions{mutualTLS: false, grace: grace})

	// The real creation by a real user binds her (once the webhook is
	// registered: until then the creations go unseen; each try is a new
	// Namespace).
	var own *corev1.Namespace
	testkit.Eventually(t, 60*time.Second, "alice's Namespace bound to her", func() error {
		if own == nil {
			ns, err := alice.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "own-alice-"}}, metav1.CreateOptions{})
			if err != nil {
				return err
			}
			own = ns
		}
		rb, err := kube.RbacV1().RoleBindings(own.Name).Get(ctx, "owner", metav1.GetOptions{})
		if apierrors.IsNotFound(err) && time.Since(own.CreationTimestamp.Time) > 5*time.Second {
			own = nil // created before the webhook was registered
		}
		if err != nil {
			return err
		}
		if len(rb.Subjects) != 1 || rb.Subjects[0].Name != "alice" {
			return fmt.Errorf("subjects %+v", rb.Subjects)
		}
		return nil
	})

	conn, err := bus.Connect(ctx, queue.WithURL(nats.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	lastSeq := func() uint64 {
		t.Helper()
		s, err := conn.JetStream().Stream(ctx, bus.StreamWork)
		if err != nil {
			t.Fatal(err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return info.State.LastSeq
	}

	// A forged CREATE for alice's Namespace, within the grace period, after
	// the real one: the work item of a CREATE is one per trigger uid, so
	// JetStream takes it as a duplicate and nothing is queued.
	before := lastSeq()
	forge(t, webhookAddr, "CREATE", own)
	if got := lastSeq(); got != before {
		t.Errorf("a forged CREATE after the real one queued work (VERDICT_WORK's last sequence %d -> %d)", before, got)
	}

	// Forged reviews for a Namespace created before the grace period, and
	// a forged UPDATE of alice's: each is queued, none binds mallory.
	if wait := grace + time.Second - time.Since(victim.CreationTimestamp.Time); wait > 0 {
		time.Sleep(wait)
	}
	handledBefore := handled(t, probe)
	forge(t, webhookAddr, "CREATE", victim)
	forge(t, webhookAddr, "UPDATE", victim)
	forge(t, webhookAddr, "UPDATE", own)
	testkit.Eventually(t, 30*time.Second, "the forged items worked", func() error {
		if got := handled(t, probe); got < handledBefore+3 {
			return fmt.Errorf("%v items handled since the forged reviews, want 3", got-handledBefore)
		}
		return nil
	})
	time.Sleep(time.Second) // an item retried would show by now
	for _, ns := range []string{victim.Name, own.Name} {
		rbs, err := kube.RbacV1().RoleBindings(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, rb := range rbs.Items {
			for _, s := range rb.Subjects {
				if s.Name == "mallory" {
					t.Errorf("a forged review bound mallory: RoleBinding %s/%s", ns, rb.Name)
				}
			}
		}
	}
	rb, err := kube.RbacV1().RoleBindings(own.Name).Get(ctx, "owner", metav1.GetOptions{})
	if err != nil || len(rb.Subjects) != 1 || rb.Subjects[0].Name != "alice" {
		t.Errorf("alice's binding after the forged reviews: %v %+v", err, rb)
	}
	// Each refusal is counted with its reason.
	if got := metric(t, probe, items(queue.ResultSkipped, generator.ReasonRequesterUnverified)); got != 3 {
		t.Errorf("skipped as requesterUnverified: %v, want 3", got)
	}
}

// forge sends the webhook, without a client certificate, a review of op
// on the Namespace ns (its real name, uid and resourceVersion) by
// mallory, a user who may do nothing, and checks it was admitted.
func forge(t *testing.T, addr, op string, ns *corev1.Namespace) {
	t.Helper()
	obj := map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns.Name, "uid": string(ns.UID)}}
	req := map[string]any{
		"uid": fmt.Sprintf("forged-%s-%d", strings.ToLower(op), time.Now().UnixNano()), "operation": op, "name": ns.Name,
		"kind":     map[string]any{"group": "", "version": "v1", "kind": "Namespace"},
		"resource": map[string]any{"group": "", "version": "v1", "resource": "namespaces"},
		"userInfo": map[string]any{"username": "mallory", "groups": []string{"system:authenticated"}},
		"object":   obj,
	}
	if op == "UPDATE" {
		obj["metadata"].(map[string]any)["resourceVersion"] = ns.ResourceVersion
		req["oldObject"] = obj
	}
	body, err := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
	if err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the attacker does not care
	resp, err := client.Post("https://"+addr+"/validate", "application/json", strings.NewReader(string(body)))
	if err != nil {
		t.Fatalf("forged %s: %v", op, err)
	}
	defer resp.Body.Close()
	var review struct {
		Response struct {
			Allowed bool `json:"allowed"`
		} `json:"response"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil || resp.StatusCode != http.StatusOK || !review.Response.Allowed {
		t.Fatalf("forged %s: %d %+v %v", op, resp.StatusCode, review, err)
	}
}

// handled is the number of items the generator has worked, whatever
// became of them.
func handled(t *testing.T, probe string) float64 {
	t.Helper()
	var sum float64
	for _, outcome := range []string{queue.ResultProcessed, queue.ResultSkipped, queue.ResultDeadLettered} {
		sum += metricSum(t, probe, `verdict_queue_work_items_total{consumer="generator",kind="generate",outcome="`+outcome+`"`)
	}
	return sum
}

// metricSum is the sum of the samples whose series starts with prefix.
func metricSum(t *testing.T, probe, prefix string) float64 {
	t.Helper()
	resp, err := http.Get("http://" + probe + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var sum float64
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		var f float64
		if i := strings.LastIndexByte(line, ' '); i > 0 {
			if _, err := fmt.Sscan(line[i+1:], &f); err == nil {
				sum += f
			}
		}
	}
	return sum
}
