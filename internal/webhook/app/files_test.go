package app_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/cli/decisions"
	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
	webhookapp "github.com/verdict-dev/verdict/internal/webhook/app"
	"github.com/verdict-dev/verdict/pkg/queue"
	"github.com/verdict-dev/verdict/pkg/queue/embedded"
)

const auditLabelsKyverno = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-team-label, uid: pol-1, resourceVersion: "1"}
spec:
  validationFailureAction: Audit
  rules:
  - name: team
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "label team is required"
      pattern: {metadata: {labels: {team: "?*"}}}
`

// Two more Audit policies, without uid or resourceVersion, as policy
// files usually are.
const auditMoreKyverno = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-owner-label}
spec:
  validationFailureAction: Audit
  rules:
  - name: owner
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "label owner is required"
      pattern: {metadata: {labels: {owner: "?*"}}}
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: require-app-label}
spec:
  validationFailureAction: Audit
  rules:
  - name: app
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: "label app is required"
      pattern: {metadata: {labels: {app: "?*"}}}
`

// TestFilesMode starts the service in files mode, with policies and a
// certificate from files and a JetStream that lets in only its NKey: a
// review is answered, and its result reaches VERDICT_RESULTS through the
// credentials (after a review with a 5,000-byte uid, which is refused).
func TestFilesMode(t *testing.T) {
	fw := startFilesWebhook(t, map[string]string{"policy.yaml": auditLabelsKyverno, "more.yaml": auditMoreKyverno}, nil)
	port, client, nats, seedFile := fw.port, fw.client, fw.nats, fw.seed
	review := []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"r-1","operation":"CREATE",
	  "kind":{"version":"v1","kind":"Pod"},"resource":{"version":"v1","resource":"pods"},"namespace":"team","name":"p",
	  "object":{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"team","uid":"pod-uid-1"},"spec":{"containers":[{"name":"c","image":"nginx"}]}}}}`)
	// Issue 28, finding 6: a review whose object has a 5,000-byte uid is
	// refused. Before, its result's subject made the server drop the
	// client for good, and no result was published after it (the one
	// below is).
	long := bytes.Replace(review, []byte(`"uid":"pod-uid-1"`), []byte(`"uid":"`+strings.Repeat("u", 5000)+`"`), 1)
	var longStatus int
	testkit.EventuallyTrue(t, 10*time.Second, "the condition", func() bool {
		resp, err := client.Post(fmt.Sprintf("https://127.0.0.1:%d/validate", port), "application/json", bytes.NewReader(long))
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		longStatus = resp.StatusCode
		return true
	})
	if longStatus != http.StatusBadRequest {
		t.Fatalf("review with a 5,000-byte uid: status %d, want 400", longStatus)
	}
	var allowed bool
	testkit.EventuallyTrue(t, 10*time.Second, "the condition", func() bool {
		resp, err := client.Post(fmt.Sprintf("https://127.0.0.1:%d/validate", port), "application/json", bytes.NewReader(review))
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var out struct {
			Response struct{ Allowed bool } `json:"response"`
		}
		allowed = json.NewDecoder(resp.Body).Decode(&out) == nil && out.Response.Allowed
		return resp.StatusCode == http.StatusOK
	})
	if !allowed {
		t.Fatal("the audited Pod was not admitted")
	}

	conn, err := bus.Connect(t.Context(), queue.WithURL(nats.ClientURL()), queue.WithNKeyFile(seedFile))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Each policy's result is stored, those of the policies without a
	// uid too (issue 33: their ids used to be one, and JetStream kept the
	// first as the others' duplicate), all in one message: the
	// admission's batch.
	messages := 0
	testkit.EventuallyTrue(t, 15*time.Second, "every policy's result stored", func() bool {
		failed := map[string]bool{}
		messages = 0
		_, err := conn.Replay(t.Context(), bus.StreamResults, func(m queue.ReplayMsg) error {
			messages++
			evs, err := bus.DecodeResults(m.Subject, m.Data)
			if err != nil {
				return err
			}
			for _, ev := range evs {
				if len(ev.Rules) == 1 && ev.Rules[0].Status == "fail" {
					failed[ev.Policy.Key] = true
				}
			}
			return nil
		}, queue.WithReplayFilter(bus.ResultsOfResource("pod-uid-1")))
		return err == nil && failed["require-team-label"] && failed["require-owner-label"] && failed["require-app-label"]
	})
	if messages != 1 {
		t.Errorf("the admission's results in %d messages, want 1 (a batch)", messages)
	}
	// Issue 34: the admission log holds the answer once, with the three
	// policies' warnings, as `verdict decisions` reads it; the refused
	// review (400, never decided) is not in it.
	var logged []bus.Decision
	testkit.EventuallyTrue(t, 15*time.Second, "the decision logged", func() bool {
		logged = nil
		err := decisions.Read(t.Context(), conn, decisions.Filter{Namespace: "team"}, time.Now().Add(-time.Hour), func(e decisions.Entry) error {
			if e.Err != nil {
				return e.Err
			}
			logged = append(logged, e.Decision)
			return nil
		})
		return err == nil && len(logged) > 0
	})
	if len(logged) != 1 {
		t.Fatalf("%d decisions logged, want 1: %+v", len(logged), logged)
	}
	d := logged[0]
	warned := map[string]bool{}
	for _, f := range d.Findings {
		if f.Action == bus.ActionWarn {
			warned[f.Policy] = true
		}
	}
	if d.RequestUID != "r-1" || d.Outcome != bus.DecisionWarned || d.Replica != "files" || d.Webhook != "validate" ||
		!warned["require-team-label"] || !warned["require-owner-label"] || !warned["require-app-label"] {
		t.Fatalf("decision %+v", d)
	}
}

// filesWebhook is a webhook service in files mode, its client (trusting
// its CA), and its JetStream (which lets in only the service's NKey,
// seed).
type filesWebhook struct {
	port   int
	client *http.Client
	nats   *embedded.Server
	seed   string
}

// startFilesWebhook starts the service in files mode with the policies
// (file name to YAML) and a certificate from files, mod changing its
// configuration; it stops at the end of the test.
func startFilesWebhook(t *testing.T, policies map[string]string, mod func(*webhookapp.Config)) filesWebhook {
	t.Helper()
	dir := t.TempDir()
	ca, err := certs.NewCA("files-mode-ca", time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	kp, err := certs.NewServing(ca, []string{"localhost"}, []net.IP{net.ParseIP("127.0.0.1")}, time.Now(), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{"tls.crt": kp.CertPEM, "tls.key": kp.KeyPEM}
	var paths []string
	for name, y := range policies {
		files[name] = []byte(y)
		paths = append(paths, filepath.Join(dir, name))
	}
	slices.Sort(paths)
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	seedFile, public := natstest.NKeyUser(t)
	nats := natstest.Server(t, natstest.WithNKeyUsers(public))

	port := testkit.FreePort(t)
	cfg := webhookapp.DefaultConfig()
	cfg.Mode = webhookapp.ModeFiles
	cfg.Identity = "files"
	cfg.Webhook.Address = fmt.Sprintf("127.0.0.1:%d", port)
	cfg.Webhook.CertFile, cfg.Webhook.KeyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	cfg.Webhook.PolicyPaths = paths
	cfg.Webhook.ShutdownDelay = 0
	cfg.NATS.URLs, cfg.NATS.NKeyFile = []string{nats.ClientURL()}, seedFile
	if mod != nil {
		mod(&cfg)
	}
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- webhookapp.Run(ctx, cfg, zerolog.Nop()) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("service: %v", err)
		}
	})
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert())
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}}
	return filesWebhook{port: port, client: client, nats: nats, seed: seedFile}
}
