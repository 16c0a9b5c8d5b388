package helm_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// topoCandidate is an Enforce policy requiring the label app on the Pods
// of the test namespace, as a candidate.
const topoCandidate = `apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata:
  name: require-app-candidate
  annotations: {verdict.dev/candidate: "true"}
spec:
  validationFailureAction: Enforce
  rules:
  - name: check-app
    match: {any: [{resources: {kinds: [Pod], namespaces: [team]}}]}
    validate:
      message: "label app is required"
      pattern: {metadata: {labels: {app: "?*"}}}
`

// TestE2ECandidateTopology (issue 34): the chart's webhook and reporter
// as processes with the chart's arguments and RBAC, Pods recorded with
// their objects. A candidate Enforce policy is the only policy: the
// webhooks are registered for its Pods failing open, a Pod it would deny
// is admitted, its status says READY False (Candidate), and the
// reporter writes to its status.candidate what it would have done, on
// the requests the webhooks recorded and on the Pods in the cluster.
func TestE2ECandidateTopology(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the chart's topology on a real control plane; skipped under -short")
	}
	env := startChartTopology(t, []string{"webhook", "reporter"},
		"--set", "webhook.decisions.objects.kinds={Pod}", "--set", "reporter.scanInterval=5s")
	ctx, kube, dyn := t.Context(), env.kube, env.dyn
	createPolicy(t, dyn, policycache.ClusterPolicies, "", topoCandidate)

	// The webhooks receive the candidate's Pods once registered: a Pod it
	// would deny is admitted and recorded.
	topoEventually(t, 60*time.Second, "the Pods' webhook registered for the candidate", func() error {
		val, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, c := range val.Items {
			for _, w := range c.Webhooks {
				for _, r := range w.Rules {
					if len(r.Resources) > 0 && r.Resources[0] == "pods" {
						if w.FailurePolicy == nil || string(*w.FailurePolicy) != "Ignore" {
							t.Fatalf("webhook %s fails closed on a candidate's Pods", w.Name)
						}
						return nil
					}
				}
			}
		}
		return fmt.Errorf("no webhook for Pods")
	})
	if _, err := kube.CoreV1().Pods(topoNamespace).Create(ctx, topoPod("bare", false), metav1.CreateOptions{}); err != nil {
		t.Fatalf("a Pod the candidate would deny: %v", err)
	}
	labelled := topoPod("labelled", false)
	labelled.Labels = map[string]string{"app": "web"}
	if _, err := kube.CoreV1().Pods(topoNamespace).Create(ctx, labelled, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	var st policy.CandidateStatus
	topoEventually(t, 90*time.Second, "status.candidate with the recorded requests and the Pods", func() error {
		u, err := dyn.Resource(policycache.ClusterPolicies).Get(ctx, "require-app-candidate", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := candidateReady(u); err != nil {
			return err
		}
		raw, ok, _ := unstructured.NestedMap(u.Object, "status", "candidate")
		if !ok {
			return fmt.Errorf("no status.candidate")
		}
		b, _ := json.Marshal(raw)
		st = policy.CandidateStatus{}
		if err := json.Unmarshal(b, &st); err != nil {
			return err
		}
		if st.Requests < 2 || len(st.Rules) == 0 || st.Rules[0].Requests.Deny < 1 || st.Rules[0].Requests.Pass < 1 ||
			st.Rules[0].Resources != (policy.CandidateCounts{Deny: 1, Pass: 1}) {
			return fmt.Errorf("status.candidate %+v", st)
		}
		return nil
	})
	found := false
	for _, ex := range st.Rules[0].Examples {
		if ex.Outcome == "deny" && ex.Source == "request" && ex.Name == "bare" && ex.Operation == "CREATE" {
			found = true
		}
	}
	if !found {
		t.Errorf("no recorded request of the bare Pod among the examples: %+v", st.Rules[0].Examples)
	}
}

// candidateReady checks that u's Ready condition says it is a candidate.
func candidateReady(u *unstructured.Unstructured) error {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Ready" {
			if m["status"] != "False" || m["reason"] != "Candidate" || !strings.Contains(fmt.Sprint(m["message"]), "never enforced") {
				return fmt.Errorf("Ready condition %v", m)
			}
			return nil
		}
	}
	return fmt.Errorf("no Ready condition")
}
