package app_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/cli"
	"github.com/verdict-dev/verdict/internal/platform/natsconn"
	"github.com/verdict-dev/verdict/internal/testkit"
	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// installedLatest is the installed disallow-latest-tag: it audits.
const installedLatest = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: disallow-latest-tag}
spec:
  validationFailureAction: Audit
  rules:
  - name: validate-image-tag
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "An image tag other than latest is required."
      pattern: {spec: {containers: [{image: "!*:latest"}]}}
`

// candidateLatest is the installed policy's Enforce version.
var candidateLatest = strings.Replace(installedLatest, "validationFailureAction: Audit", "validationFailureAction: Enforce", 1)

// TestWhatIfOfRecordedAdmissions (issue 34): 200 Pod admissions answered
// by the webhook, which records their objects (and a Secret's decision,
// never its object); the what-if of the Enforce version of the installed
// Audit policy lists exactly the Pods `verdict apply` of it fails on the
// same objects, each newly denied against the installed version; the
// stream holds no byte of the Secret.
func TestWhatIfOfRecordedAdmissions(t *testing.T) {
	fw := startFilesWebhook(t, map[string]string{"latest.yaml": installedLatest, "secrets.yaml": auditSecrets}, func(c *webhookapp.Config) {
		c.Webhook.DecisionObjects.Kinds = []string{"*"}
	})
	url := fmt.Sprintf("https://127.0.0.1:%d/validate", fw.port)
	var pods bytes.Buffer
	post := func(review string) {
		t.Helper()
		var code int
		testkit.EventuallyTrue(t, 10*time.Second, "the review answered", func() bool {
			resp, err := fw.client.Post(url, "application/json", strings.NewReader(review))
			if err != nil {
				return false
			}
			_ = resp.Body.Close()
			code = resp.StatusCode
			return true
		})
		if code != http.StatusOK {
			t.Fatalf("status %d", code)
		}
	}
	for i := range 200 {
		image := fmt.Sprintf("registry.example.com/app%d:v1", i%7)
		if i%3 == 0 {
			image = fmt.Sprintf("registry.example.com/app%d:latest", i%7)
		}
		obj := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"pod-%03d","namespace":"team-%d","uid":"uid-%d"},"spec":{"containers":[{"name":"app","image":%q}]}}`, i, i%4, i, image)
		pods.WriteString("---\n" + obj + "\n")
		post(fmt.Sprintf(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"req-%d","operation":"CREATE",
		  "kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"namespace":"team-%d","name":"pod-%03d",
		  "userInfo":{"username":"alice"},"object":%s}}`, i, i%4, i, obj))
	}
	const secretValue = "c3VwZXItc2VjcmV0LXZhbHVl"
	post(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"req-secret","operation":"CREATE",
	  "kind":{"version":"v1","kind":"Secret"},"resource":{"version":"v1","resource":"secrets"},"namespace":"team-0","name":"db",
	  "userInfo":{"username":"alice"},"object":{"apiVersion":"v1","kind":"Secret","metadata":{"name":"db","namespace":"team-0"},"data":{"password":"` + secretValue + `"}}}}`)

	nc := natsconn.Default()
	nc.URLs, nc.NKeyFile = []string{fw.nats.ClientURL()}, fw.seed
	conn, err := bus.Connect(t.Context(), nc.ConnOptions("test", zerolog.Nop())...)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Every decision logged, the Secret's too; no message holds its data.
	testkit.Eventually(t, 15*time.Second, "201 decisions logged", func() error {
		n, secret := 0, false
		_, err := conn.Replay(t.Context(), bus.StreamDecisions, func(m queue.ReplayMsg) error {
			n++
			if bytes.Contains(m.Data, []byte(secretValue)) {
				return fmt.Errorf("a message holds the Secret's data: %s", m.Data)
			}
			if d, err := bus.DecodeDecision(m.Subject, m.Data); err == nil && d.Resource.Kind == "Secret" {
				secret = len(d.Object) == 0
			}
			return nil
		}, queue.WithReplayAll())
		if err != nil {
			return err
		}
		if n < 201 || !secret {
			return testkit.ErrNotYet
		}
		return nil
	})

	dir := t.TempDir()
	candidate, resources := filepath.Join(dir, "candidate.yaml"), filepath.Join(dir, "pods.yaml")
	for name, data := range map[string][]byte{candidate: []byte(candidateLatest), resources: pods.Bytes()} {
		if err := os.WriteFile(name, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	rep, err := cli.WhatIf(t.Context(), cli.WhatIfOptions{Policies: []string{candidate}, NATS: nc, Timeout: 5 * time.Second, Since: time.Hour, Output: "json"}, nil, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 200 || len(rep.Rules) != 1 {
		t.Fatalf("%d requests, %d rules", rep.Requests, len(rep.Rules))
	}
	var denied []string
	for _, ex := range rep.Rules[0].Examples["deny"] {
		denied = append(denied, ex.Name)
	}
	var out bytes.Buffer
	if _, err := cli.Apply(t.Context(), cli.ApplyOptions{Policies: []string{candidate}, Resources: []string{resources}, Output: "json"}, nil, &out); err != nil {
		t.Fatal(err)
	}
	var applied struct {
		Results []struct{ Name, Result string }
	}
	if err := json.Unmarshal(out.Bytes(), &applied); err != nil {
		t.Fatal(err)
	}
	var failed []string
	for _, r := range applied.Results {
		if r.Result == "fail" {
			failed = append(failed, r.Name)
		}
	}
	slices.Sort(denied)
	slices.Sort(failed)
	if len(failed) != 67 || !slices.Equal(denied, failed) {
		t.Fatalf("what-if denies %d Pods, apply fails %d:\n%v\n%v", len(denied), len(failed), denied, failed)
	}
	if ch := rep.Changes[0]; ch.NewlyDenied != 67 || ch.NoLongerDenied != 0 {
		t.Fatalf("against the installed Audit version: %+v", ch)
	}
}

// auditSecrets makes the webhook evaluate Secrets, so that their
// requests are decided and logged.
const auditSecrets = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: secrets-labelled}
spec:
  validationFailureAction: Audit
  rules:
  - name: owner
    match: {any: [{resources: {kinds: [Secret]}}]}
    validate:
      message: "label owner is required"
      pattern: {metadata: {labels: {owner: "?*"}}}
`
