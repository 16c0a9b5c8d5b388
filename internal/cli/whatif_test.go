package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/natsconn"
	"github.com/verdict-dev/verdict/internal/testkit/golden"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	"github.com/verdict-dev/verdict/pkg/queue"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"
)

// candidateLatest is the candidate: an Enforce policy refusing the
// latest tag, a changed version of an installed one of the same name.
const candidateLatest = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: disallow-latest-tag}
spec:
  validationFailureAction: Enforce
  rules:
  - name: validate-image-tag
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "An image tag other than latest is required."
      pattern:
        spec:
          containers:
          - image: "!*:latest"
`

// whatifPod is the i-th recorded Pod: every third runs a latest image.
func whatifPod(i int) map[string]any {
	image := fmt.Sprintf("registry.example.com/app%d:v1", i%7)
	if i%3 == 0 {
		image = fmt.Sprintf("registry.example.com/app%d:latest", i%7)
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": fmt.Sprintf("pod-%03d", i), "namespace": fmt.Sprintf("team-%d", i%4)},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "app", "image": image}}},
	}
}

// TestWhatIf (issue 34): after 200 recorded Pod admissions, a candidate
// Enforce policy's what-if denies exactly the Pods that `verdict apply`
// of the same policy fails on the same objects; against the installed
// version (which, by the log's findings, denied every fifth Pod) it
// lists the newly denied and the no longer denied; decisions without an
// object are counted, not evaluated. The table is pinned by a golden
// file.
func TestWhatIf(t *testing.T) {
	srv, conn := decisionLog(t)
	ctx := t.Context()
	dir := t.TempDir()
	var resources bytes.Buffer
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	for i := range 200 {
		p := whatifPod(i)
		obj, err := json.Marshal(p)
		if err != nil {
			t.Fatal(err)
		}
		resources.WriteString("---\n")
		resources.Write(obj)
		resources.WriteString("\n")
		d := bus.Decision{
			RequestUID: fmt.Sprint("req-", i), Webhook: "validate-cluster", Operation: "CREATE",
			Resource: bus.DecisionResource{Version: "v1", Kind: "Pod", Resource: "pods", Namespace: fmt.Sprintf("team-%d", i%4), Name: fmt.Sprintf("pod-%03d", i)},
			User:     bus.DecisionUser{Username: "alice"}, Outcome: bus.DecisionAllowed, Object: obj,
			Time: at.Add(time.Duration(i) * time.Second),
		}
		if i%5 == 0 {
			// The installed version denied it (a rule of its own).
			d.Outcome, d.Object = bus.DecisionDenied, nil
			d.Findings = []bus.Finding{{Policy: "disallow-latest-tag", Rule: "old-rule", Action: bus.ActionDeny, Message: "old"}}
			d.Object = obj // recorded all the same, to compare
		}
		publishDecision(t, conn, d)
	}
	// A decision without its object (its kind not recorded).
	publishDecision(t, conn, bus.Decision{RequestUID: "cm", Webhook: "validate-cluster", Operation: "CREATE",
		Resource: bus.DecisionResource{Version: "v1", Kind: "ConfigMap", Resource: "configmaps", Namespace: "team-0", Name: "cm"},
		User:     bus.DecisionUser{Username: "bob"}, Outcome: bus.DecisionAllowed, Time: at})

	policyFile := filepath.Join(dir, "candidate.yaml")
	resourceFile := filepath.Join(dir, "pods.yaml")
	for name, data := range map[string][]byte{policyFile: []byte(candidateLatest), resourceFile: resources.Bytes()} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	nc := natsconn.Default()
	nc.URLs = []string{srv.ClientURL()}
	opts := WhatIfOptions{Policies: []string{policyFile}, NATS: nc, Timeout: 5 * time.Second, Since: 24 * time.Hour, Examples: 0, Output: "json"}
	rep, err := WhatIf(ctx, opts, nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 200 || rep.WithoutObject != 1 || len(rep.Rules) != 1 {
		t.Fatalf("%d requests, %d without object, %d rules", rep.Requests, rep.WithoutObject, len(rep.Rules))
	}
	var whatif []string
	for _, ex := range rep.Rules[0].Examples["deny"] {
		whatif = append(whatif, ex.Name)
	}

	// verdict apply of the same policy on the same objects.
	var out bytes.Buffer
	if _, err := Apply(ctx, ApplyOptions{Policies: []string{policyFile}, Resources: []string{resourceFile}, Output: "json"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	var applied struct {
		Results []struct{ Name, Result string }
	}
	if err := json.Unmarshal(out.Bytes(), &applied); err != nil {
		t.Fatalf("%v\n%s", err, out.Bytes())
	}
	var failed []string
	for _, r := range applied.Results {
		if r.Result == "fail" {
			failed = append(failed, r.Name)
		}
	}
	slices.Sort(whatif)
	slices.Sort(failed)
	if len(failed) != 67 || !slices.Equal(whatif, failed) {
		t.Fatalf("what-if denies %d Pods, apply fails %d:\n%v\n%v", len(whatif), len(failed), whatif, failed)
	}
	if c := rep.Rules[0].Counts; c["deny"] != 67 || c["pass"] != 133 {
		t.Fatalf("counts %v", c)
	}

	// Against the installed version: denied by both where i%15 == 0 (14
	// Pods), newly denied the other latest Pods (67-14), no longer
	// denied the other fifths (40-14).
	ch := rep.Changes[0]
	if ch.Policy != "disallow-latest-tag" || ch.NewlyDenied != 53 || ch.NoLongerDenied != 26 {
		t.Fatalf("changes %+v", ch)
	}

	// The table, with three examples a list.
	opts.Examples, opts.Output = 3, "table"
	rep, err = WhatIf(ctx, opts, nil, func() time.Time { return at.Add(23 * time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	var table bytes.Buffer
	if err := writeWhatIf(&table, "table", rep); err != nil {
		t.Fatal(err)
	}
	// Times are the test's: the golden file holds them relative.
	text := table.String()
	for i := 200; i >= 0; i-- {
		text = strings.ReplaceAll(text, at.Add(time.Duration(i)*time.Second).Format(time.RFC3339), fmt.Sprintf("T+%ds", i))
	}
	text = strings.ReplaceAll(text, rep.Since.Format(time.RFC3339), "SINCE")
	golden.Assert(t, "testdata/golden/whatif.txt", []byte(text))
}

// decisionLog starts a NATS server with Verdict's streams and connects
// to it (closed when the test ends): where the tests record decisions.
func decisionLog(t *testing.T) (*embedded.Server, *queue.Conn) {
	t.Helper()
	srv := natstest.Server(t)
	conn, err := bus.Connect(t.Context(), queue.WithURL(srv.ClientURL()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(conn.Close)
	if err := bus.Provision(t.Context(), conn, bus.WithConsumers()); err != nil {
		t.Fatal(err)
	}
	return srv, conn
}

func publishDecision(t *testing.T, conn *queue.Conn, d bus.Decision) {
	t.Helper()
	m, err := bus.DecisionMessage(d)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.PublishSync(t.Context(), m); err != nil {
		t.Fatal(err)
	}
}

// testWhatIfCluster (TestCluster): `verdict whatif --cluster` evaluates
// the candidates on the cluster's objects as well as on the log's
// requests: a namespaceSelector and a configMap entry answered by the
// cluster, and the objects it would deny or warn on are those `verdict
// apply --cluster` of the same policies fails. The table is pinned by a
// golden file.
func testWhatIfCluster(t *testing.T, kubeconfig string) {
	srv, conn := decisionLog(t)
	ctx := t.Context()
	at := time.Now().Add(-time.Hour).UTC().Truncate(time.Second)
	obj := []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"recorded","namespace":"team"},"spec":{"containers":[{"name":"c","image":"docker.io/x:1"}]}}`)
	publishDecision(t, conn, bus.Decision{RequestUID: "r1", Webhook: "validate", Operation: "CREATE",
		Resource: bus.DecisionResource{Version: "v1", Kind: "Pod", Resource: "pods", Namespace: "team", Name: "recorded"},
		User:     bus.DecisionUser{Username: "alice"}, Outcome: bus.DecisionAllowed, Object: obj, Time: at})
	policies := []string{"testdata/cluster/policies/require-team.yaml", "testdata/cluster/policies/prod-registry.yaml"}
	nc := natsconn.Default()
	nc.URLs = []string{srv.ClientURL()}
	opts := WhatIfOptions{Policies: policies, NATS: nc, Timeout: 5 * time.Second, Since: 24 * time.Hour, Examples: 0, Output: "table",
		Cluster: true, Kube: KubeOptions{Kubeconfig: kubeconfig}}
	rep, err := WhatIf(ctx, opts, nil, func() time.Time { return at.Add(time.Hour) })
	if err != nil {
		t.Fatal(err)
	}
	// The recorded Pod of team (env=prod, a label the log does not
	// hold) pulls from elsewhere and has no team label.
	counts := map[string]map[string]int{}
	for _, r := range rep.Rules {
		counts[r.Rule] = r.Counts
	}
	if rep.Requests != 1 || counts["approved-registry"]["deny"] != 1 || counts["check-team"]["warn"] != 1 {
		t.Fatalf("%d requests, counts %v", rep.Requests, counts)
	}
	flagged := map[string]bool{}
	for _, r := range rep.Rules {
		for _, outcome := range []string{"deny", "warn", "error"} {
			for _, ex := range r.ResourceExamples[outcome] {
				flagged[r.Policy+" "+ex.Namespace+"/"+ex.Name] = true
			}
		}
	}
	var out bytes.Buffer
	if _, err := Apply(ctx, ApplyOptions{Policies: policies, Cluster: true, Kube: KubeOptions{Kubeconfig: kubeconfig}, Output: "json"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	var applied struct {
		Results []struct{ Policy, Namespace, Name, Result string }
	}
	if err := json.Unmarshal(out.Bytes(), &applied); err != nil {
		t.Fatalf("%v\n%s", err, out.Bytes())
	}
	failed := map[string]bool{}
	for _, r := range applied.Results {
		if r.Result == "fail" || r.Result == "error" {
			failed[r.Policy+" "+r.Namespace+"/"+r.Name] = true
		}
	}
	if len(failed) == 0 || !maps.Equal(flagged, failed) {
		t.Fatalf("whatif --cluster flags %v, apply --cluster fails %v", slices.Sorted(maps.Keys(flagged)), slices.Sorted(maps.Keys(failed)))
	}
	var table bytes.Buffer
	if err := writeWhatIf(&table, "table", rep); err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(table.String(), at.Format(time.RFC3339), "T")
	text = strings.ReplaceAll(text, rep.Since.Format(time.RFC3339), "SINCE")
	golden.Assert(t, "testdata/golden/whatif-cluster.txt", []byte(text))
}
