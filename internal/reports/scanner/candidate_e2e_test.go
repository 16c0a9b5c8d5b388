package scanner_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/reports/scanner"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// candidatePolicy is an Enforce policy requiring the label app, as a
// candidate: a ClusterPolicy limited to two namespaces (%[3]s), or a
// Policy of one (kind Policy, namespace %[2]s).
const candidatePolicy = `apiVersion: verdict.dev/v1
kind: %[4]s
metadata:
  name: %[1]s
  namespace: "%[2]s"
  annotations: {verdict.dev/candidate: "true", verdict.dev/candidate-for: require-app-old}
spec:
  validationFailureAction: Enforce
  rules:
  - name: check-app
    match:
      any:
      - resources: {kinds: [Pod]%[3]s}
    validate:
      message: "label app is required"
      pattern: {metadata: {labels: {app: "?*"}}}
`

// recordDecision publishes to the admission log what the webhook records
// of an admitted Pod (its object included); denied says the installed
// require-app-old denied it.
func recordDecision(e *reportertest.Env, ns, name string, labels map[string]string, denied bool) {
	e.T.Helper()
	obj := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": "registry.example/app:1"}}}}
	raw, err := json.Marshal(obj)
	if err != nil {
		e.T.Fatal(err)
	}
	d := bus.Decision{RequestUID: "req-" + ns + "-" + name, Webhook: "validate", Operation: "CREATE",
		Resource: bus.DecisionResource{Version: "v1", Kind: "Pod", Resource: "pods", Namespace: ns, Name: name},
		User:     bus.DecisionUser{Username: "dev"}, Outcome: bus.DecisionAllowed, Object: raw, Time: time.Now().UTC()}
	if denied {
		d.Outcome, d.Object = bus.DecisionDenied, nil
		if labels["app"] != "" {
			// Denied for another reason the log holds the object of
			// (say a dry run before): recorded with it.
			d.Object = raw
		}
		d.Findings = []bus.Finding{{Policy: "require-app-old", Rule: "check-app", Action: bus.ActionDeny, Message: "old"}}
	}
	msg, err := bus.DecisionMessage(d)
	if err != nil {
		e.T.Fatal(err)
	}
	if _, err := e.Connect().PublishSync(e.T.Context(), msg); err != nil {
		e.T.Fatal(err)
	}
}

// candidateStatus reads status.candidate of a policy.
func candidateStatus(e *reportertest.Env, u *unstructured.Unstructured) (*policy.CandidateStatus, error) {
	gvr := policycache.ClusterPolicies
	if u.GetNamespace() != "" {
		gvr = policycache.Policies
	}
	got, err := e.Dyn.Resource(gvr).Namespace(u.GetNamespace()).Get(e.T.Context(), u.GetName(), metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	raw, ok, _ := unstructured.NestedMap(got.Object, "status", "candidate")
	if !ok {
		return nil, nil
	}
	b, err := json.Marshal(raw)
	if err != nil {
		return nil, err
	}
	var st policy.CandidateStatus
	return &st, json.Unmarshal(b, &st)
}

func createCandidate(e *reportertest.Env, y string) *unstructured.Unstructured {
	e.T.Helper()
	v, err := document.Decode([]byte(y))
	if err != nil {
		e.T.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: v.(map[string]any)}
	gvr := policycache.ClusterPolicies
	if u.GetNamespace() != "" {
		gvr = policycache.Policies
	}
	p, err := e.Dyn.Resource(gvr).Namespace(u.GetNamespace()).Create(e.T.Context(), u, metav1.CreateOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	// The control plane is the package's: the other tests' scans must
	// not find it.
	e.T.Cleanup(func() {
		_ = e.Dyn.Resource(gvr).Namespace(p.GetNamespace()).Delete(context.WithoutCancel(e.T.Context()), p.GetName(), metav1.DeleteOptions{})
	})
	return p
}

// TestE2ECandidatePolicy (issue 34): candidate policies in the cluster
// are evaluated by the scanner on the admission log's recorded requests
// and the cluster's objects, and what they would have done is written to
// their status.candidate; they publish no result. A ClusterPolicy
// candidate sees both namespaces it selects, and is compared with the
// installed policy it names; a namespaced Policy candidate sees only its
// own namespace's requests and objects, whatever the log holds of
// others. Made a policy (the annotation removed), its status.candidate is
// cleared and it is scanned as any policy.
func TestE2ECandidatePolicy(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	a, b := e.Namespace("cand-a-").Name, e.Namespace("cand-b-").Name
	createPod(e, a, "pod-app", map[string]string{"app": "web"})
	createPod(e, a, "pod-bare-1", nil)
	createPod(e, a, "pod-bare-2", nil)
	createPod(e, b, "pod-bare", nil)
	// Recorded: in a, two with app (one of which the installed policy
	// denied) and two without (one denied); in b, one without; and one
	// denial in a whose object the log does not hold.
	recordDecision(e, a, "req-app-1", map[string]string{"app": "x"}, false)
	recordDecision(e, a, "req-app-2", map[string]string{"app": "x"}, true)
	recordDecision(e, a, "req-bare-1", nil, false)
	recordDecision(e, a, "req-bare-2", map[string]string{"team": "t"}, false)
	recordDecision(e, b, "req-bare-b", nil, false)
	recordDecision(e, a, "req-denied", nil, true)

	startScanner(e, scanner.WithCandidates(policycache.VerdictAPI, time.Hour))
	cluster := createCandidate(e, fmt.Sprintf(candidatePolicy, "require-app-"+a, "", fmt.Sprintf(", namespaces: [%s, %s]", a, b), "ClusterPolicy"))
	ns := createCandidate(e, fmt.Sprintf(candidatePolicy, "require-app", a, "", "Policy"))

	var cst, nst *policy.CandidateStatus
	testkit.Eventually(t, 60*time.Second, "both candidates evaluated", func() error {
		var err error
		if cst, err = candidateStatus(e, cluster); err != nil || cst == nil {
			return fmt.Errorf("ClusterPolicy: %v, %w", cst, err)
		}
		if nst, err = candidateStatus(e, ns); err != nil || nst == nil {
			return fmt.Errorf("Policy: %v, %w", nst, err)
		}
		return nil
	})
	// The ClusterPolicy: 5 requests with objects (a's 4, b's 1), one
	// without; 4 Pods.
	if cst.Requests != 5 || cst.WithoutObject != 1 || cst.Resources != 4 || len(cst.Rules) != 1 || cst.ObservedGeneration != cluster.GetGeneration() {
		t.Fatalf("ClusterPolicy candidate: %+v", cst)
	}
	if r := cst.Rules[0]; r.Name != "check-app" || r.Requests != (policy.CandidateCounts{Deny: 3, Pass: 2}) ||
		r.Resources != (policy.CandidateCounts{Deny: 3, Pass: 1}) {
		t.Errorf("ClusterPolicy candidate's rule: %+v", r)
	}
	// Against require-app-old: req-bare-1, req-bare-2 and req-bare-b
	// newly denied; req-app-2 no longer; req-denied unknown.
	if c := cst.Change; c == nil || c.Policy != "require-app-old" || c.NewlyDenied != 3 || c.NoLongerDenied != 1 || c.DeniedUnrecorded != 1 {
		t.Errorf("ClusterPolicy candidate's change: %+v", c)
	}
	// The Policy of a: a's 4 requests and 3 Pods only; b's never.
	if nst.Requests != 4 || nst.WithoutObject != 1 || nst.Resources != 3 {
		t.Fatalf("Policy candidate: %+v", nst)
	}
	for _, r := range nst.Rules {
		for _, ex := range r.Examples {
			if ex.Namespace != a {
				t.Errorf("Policy candidate of %s shows %s/%s of %s", a, ex.Kind, ex.Name, ex.Namespace)
			}
		}
	}
	if r := nst.Rules[0]; r.Requests != (policy.CandidateCounts{Deny: 2, Pass: 2}) || r.Resources != (policy.CandidateCounts{Deny: 2, Pass: 1}) {
		t.Errorf("Policy candidate's rule: %+v", r)
	}
	// Candidates publish no result.
	if n := len(policyResults(e, cluster.GetName())) + len(policyResults(e, a+"/require-app")); n != 0 {
		t.Fatalf("%d results of candidates in the stream", n)
	}

	// Promoted: the annotation goes; status.candidate is cleared and the
	// policy's results are published by the scan.
	patch := []byte(`{"metadata":{"annotations":{"verdict.dev/candidate":null}}}`)
	if _, err := e.Dyn.Resource(policycache.Policies).Namespace(a).Patch(ctx, "require-app", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 60*time.Second, "the promoted policy's status.candidate cleared and its results published", func() error {
		st, err := candidateStatus(e, ns)
		if err != nil || st != nil {
			return fmt.Errorf("status.candidate %+v, %w", st, err)
		}
		if n := len(policyResults(e, a+"/require-app")); n != 3 {
			return fmt.Errorf("%d results, want one per Pod of %s", n, a)
		}
		return nil
	})
}
