package app_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
)

// widgetPolicy matches a kind the API server does not serve: no webhook
// can be registered for it.
const widgetPolicy = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: widgets}
spec:
  rules:
  - name: named
    match: {any: [{resources: {kinds: [Widget]}}]}
    validate: {pattern: {metadata: {name: "?*"}}}
`

// table is `kubectl get` of a resource as the API server renders it
// (the table client-go asks for, the one kubectl prints).
func table(t *testing.T, e *env, path string, wide bool) (columns []string, rows map[string][]any) {
	t.Helper()
	raw, err := e.kube.CoreV1().RESTClient().Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var tab metav1.Table
	if err := json.Unmarshal(raw, &tab); err != nil {
		t.Fatal(err)
	}
	rows = map[string][]any{}
	for _, c := range tab.ColumnDefinitions {
		if wide || c.Priority == 0 {
			columns = append(columns, c.Name)
		}
	}
	for _, r := range tab.Rows {
		var cells []any
		for i, c := range tab.ColumnDefinitions {
			if wide || c.Priority == 0 {
				cells = append(cells, r.Cells[i])
			}
		}
		rows[cells[0].(string)] = cells
	}
	return columns, rows
}

// TestE2EPolicyStatus: `kubectl get cpol` through the real API server
// shows ADMISSION true, BACKGROUND true (defaults) and READY True for a
// working policy, READY False with the reason for one whose webhook cannot
// be registered, and, wide, the rule counts autogen included.
func TestE2EPolicyStatus(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	if _, err := e.dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, widgetPolicy), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.startReplica(t, "replica-a", "", nil)
	waitEnforced(t, e.kube)
	var cols []string
	var rows map[string][]any
	testkit.EventuallyTrue(t, 30*time.Second, "the condition", func() bool {
		cols, rows = table(t, e, "/apis/verdict.dev/v1/clusterpolicies", false)
		return len(rows["widgets"]) > 3 && rows["widgets"][3] == "False" && rows["disallow-privileged"][3] == "True"
	})
	if want := "Name ADMISSION BACKGROUND READY AGE MESSAGE"; strings.Join(cols, " ") != want {
		t.Fatalf("columns %v, want %s", cols, want)
	}
	good := rows["disallow-privileged"]
	if good[1] != true || good[2] != true || good[3] != "True" || good[5] != "Ready" {
		t.Errorf("disallow-privileged: %v", good)
	}
	bad := rows["widgets"]
	if msg, _ := bad[5].(string); bad[3] != "False" || !strings.Contains(msg, "Widget") {
		t.Errorf("widgets: %v, want READY False and a message naming Widget", bad)
	}
	cols, rows = table(t, e, "/apis/verdict.dev/v1/clusterpolicies", true)
	idx := map[string]int{}
	for i, c := range cols {
		idx[c] = i
	}
	// One rule on Pods, and its two autogen rules (Pod controllers and
	// CronJobs).
	if v := rows["disallow-privileged"][idx["VALIDATE"]]; v != float64(3) {
		t.Errorf("VALIDATE = %v (%T), want 3; columns %v", v, v, cols)
	}
	// The status is written once: a second round changes nothing.
	u, err := e.dyn.Resource(policycache.ClusterPolicies).Get(ctx, "disallow-privileged", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rv := u.GetResourceVersion()
	time.Sleep(3 * time.Second) // more than the reconcile interval of the test replica
	if u, err = e.dyn.Resource(policycache.ClusterPolicies).Get(ctx, "disallow-privileged", metav1.GetOptions{}); err != nil || u.GetResourceVersion() != rv {
		t.Fatalf("status rewritten without a change: %v %s -> %s", err, rv, u.GetResourceVersion())
	}
}

// candidateDenyLabelled is an Enforce policy denying Pods labelled
// verdict-test=deny, as a candidate.
const candidateDenyLabelled = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata:
  name: deny-labelled
  annotations: {verdict.dev/candidate: "true"}
spec:
  validationFailureAction: Enforce
  rules:
  - name: no-deny-label
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "the label verdict-test=deny is refused"
      pattern: {metadata: {=(labels): {=(verdict-test): "!deny"}}}
`

// TestE2ECandidateNeverEnforced (issue 34): an Enforce policy annotated
// as a candidate is compiled (READY False, reason Candidate, its rules
// counted) and denies nothing through the real API server; the
// annotation removed, the same policy denies.
func TestE2ECandidateNeverEnforced(t *testing.T) {
	e := newEnv(t)
	ctx := t.Context()
	e.startReplica(t, "replica-a", "", nil)
	waitEnforced(t, e.kube)
	if _, err := e.dyn.Resource(policycache.ClusterPolicies).Create(ctx, testkit.Unstructured(t, candidateDenyLabelled), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.EventuallyTrue(t, 30*time.Second, "the candidate's condition", func() bool {
		_, rows := table(t, e, "/apis/verdict.dev/v1/clusterpolicies", false)
		msg, _ := rows["deny-labelled"][5].(string)
		return len(rows["deny-labelled"]) > 5 && rows["deny-labelled"][3] == "False" && strings.Contains(msg, "candidate")
	})
	labelled := func(name string) *corev1.Pod {
		p := pod(name, false)
		p.Labels = map[string]string{"verdict-test": "deny"}
		return p
	}
	if _, err := e.kube.CoreV1().Pods("team").Create(ctx, labelled("candidate-admitted"), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a candidate denied a Pod: %v", err)
	}
	patch := []byte(`{"metadata":{"annotations":{"verdict.dev/candidate":null}}}`)
	if _, err := e.dyn.Resource(policycache.ClusterPolicies).Patch(ctx, "deny-labelled", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 30*time.Second, "the policy enforced once no longer a candidate", func() error {
		_, err := e.kube.CoreV1().Pods("team").Create(ctx, labelled("enforced"), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil || !strings.Contains(err.Error(), "verdict-test=deny is refused") {
			return fmt.Errorf("labelled Pod: %w", err)
		}
		return nil
	})
}
