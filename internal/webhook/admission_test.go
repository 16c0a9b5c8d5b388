package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/rs/zerolog"
	admissionv1 "k8s.io/api/admission/v1"

	evt "github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/certs"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/testproc"
	"github.com/verdict-dev/verdict/pkg/engine"
)

const enforcePrivileged = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: disallow-privileged, uid: pol-uid-1, resourceVersion: "42"}
spec:
  validationFailureAction: Enforce
  rules:
  - name: privileged-containers
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: Privileged mode is disallowed.
      pattern:
        spec:
          containers:
          - =(securityContext):
              =(privileged): "false"
`

const auditLatest = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: disallow-latest
  annotations: {policies.kyverno.io/category: Best Practices, policies.kyverno.io/severity: medium}
spec:
  validationFailureAction: Audit
  rules:
  - name: no-latest
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: Using a mutable image tag is not allowed.
      pattern:
        spec:
          containers:
          - image: "!*:latest"
`

func TestValidateEnforce(t *testing.T) {
	h := newHarness(t, staticSource(t, enforcePrivileged, auditLatest), testConfig())

	// The message of the denial is pinned by TestDenialMessages.
	t.Run("violating pod is denied", func(t *testing.T) {
		resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("bad", privileged)))
		if resp.Allowed {
			t.Fatal("privileged pod admitted")
		}
		if resp.Result == nil || resp.Result.Code != http.StatusForbidden {
			t.Fatalf("result %+v", resp.Result)
		}
	})
	t.Run("compliant pod is admitted without warnings", func(t *testing.T) {
		resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("good")))
		if !resp.Allowed || len(resp.Warnings) > 0 || resp.Result != nil {
			t.Fatalf("response %+v", resp)
		}
	})
	t.Run("update of a terminating object is admitted", func(t *testing.T) {
		old := pod("leaving", privileged)
		old["metadata"].(map[string]any)["deletionTimestamp"] = "2026-01-01T00:00:00Z"
		ar := reviewOf(t, admissionv1.Update, pod("leaving", privileged), func(r *admissionv1.AdmissionRequest) {
			r.OldObject.Raw, _ = json.Marshal(old)
		})
		if resp := h.admit(PathValidate, ar); !resp.Allowed {
			t.Fatalf("terminating update denied: %v", resp.Result)
		}
	})
	if got := counter(t, h.reg, "verdict_webhook_requests_total", map[string]string{"endpoint": "validate", "outcome": "denied"}); got != 1 {
		t.Fatalf("denied requests counted %v, want 1", got)
	}
}

// A denied request is one line at info, "request served", naming every
// policy that blocked it; an admitted one writes nothing at info.
func TestDenialIsOneLogLine(t *testing.T) {
	var buf testproc.LogBuffer
	enforceLatest := strings.Replace(auditLatest, "validationFailureAction: Audit", "validationFailureAction: Enforce", 1)
	h := newHarness(t, staticSource(t, enforcePrivileged, enforceLatest), testConfig(),
		WithLogger(zerolog.New(&buf).Level(zerolog.InfoLevel)))
	latest := func(p map[string]any) {
		p["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "registry.example.com/app:latest"
	}
	if resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("bad", privileged, latest))); resp.Allowed {
		t.Fatal("violating pod admitted")
	}
	if resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("good"))); !resp.Allowed {
		t.Fatalf("compliant pod denied: %v", resp.Result)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 1 {
		t.Fatalf("%d log lines, want 1:\n%s", len(lines), buf.String())
	}
	var line struct {
		Level, Message, Outcome, Name string
		DeniedBy                      []string
	}
	if err := json.Unmarshal([]byte(lines[0]), &line); err != nil {
		t.Fatal(err)
	}
	if line.Level != "info" || line.Message != "request served" || line.Outcome != "denied" || line.Name != "bad" ||
		!slices.Equal(line.DeniedBy, []string{"disallow-privileged", "disallow-latest"}) {
		t.Fatalf("log line %s", lines[0])
	}
}

func TestValidateAuditWarnsAndPublishes(t *testing.T) {
	h := newHarness(t, staticSource(t, enforcePrivileged, auditLatest), testConfig())
	p := pod("latest", func(p map[string]any) {
		p["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "nginx:latest"
	})
	resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, p))
	if !resp.Allowed {
		t.Fatalf("audit failure denied: %v", resp.Result)
	}
	want := []string{"policy disallow-latest.no-latest: validation error: Using a mutable image tag is not allowed. rule no-latest failed at path /spec/containers/0/image/"}
	if !reflect.DeepEqual(resp.Warnings, want) {
		t.Fatalf("warnings %q, want %q", resp.Warnings, want)
	}

	events := h.results.Events()
	if len(events) != 2 {
		t.Fatalf("%d result events, want one per policy: %+v", len(events), events)
	}
	byPolicy := map[string]ResultEvent{}
	for _, e := range events {
		byPolicy[e.Policy.Key] = e
	}
	audit, enforce := byPolicy["disallow-latest"], byPolicy["disallow-privileged"]
	wantRes := ResourceRef{APIVersion: "v1", Kind: "Pod", Namespace: "default", Name: "latest", UID: "uid-latest"}
	if audit.Resource != wantRes || !audit.Admission || audit.RequestUID != "req-latest" || audit.Category != "Best Practices" || audit.Severity != "medium" {
		t.Fatalf("audit event %+v", audit)
	}
	if len(audit.Rules) != 1 || audit.Rules[0].Status != engine.StatusFail || audit.Rules[0].Type != engine.TypeValidation {
		t.Fatalf("audit rules %+v", audit.Rules)
	}
	if !audit.Timestamp.Equal(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)) {
		t.Fatalf("timestamp %v", audit.Timestamp)
	}
	if enforce.Policy != (PolicyRef{Key: "disallow-privileged", UID: "pol-uid-1", ResourceVersion: "42"}) || enforce.Rules[0].Status != engine.StatusPass {
		t.Fatalf("enforce pass event %+v", enforce)
	}

	t.Run("dry runs and denials publish nothing", func(t *testing.T) {
		h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("dry"), dryRun))
		h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("denied", privileged)))
		if n := len(h.results.Events()); n != 2 {
			t.Fatalf("%d events after a dry run and a denial, want still 2", n)
		}
	})
}

func TestWarningsCapped(t *testing.T) {
	cases := map[string]struct {
		n, max int
		want   []string
	}{
		"under the cap":  {n: 2, max: 3, want: []string{"w0", "w1"}},
		"at the cap":     {n: 3, max: 3, want: []string{"w0", "w1", "w2"}},
		"over the cap":   {n: 5, max: 3, want: []string{"w0", "w1", "3 more policy warnings not shown"}},
		"none allowed":   {n: 2, max: 0, want: nil},
		"one of several": {n: 2, max: 1, want: []string{"2 more policy warnings not shown"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var ws []string
			for i := range tc.n {
				ws = append(ws, "w"+string(rune('0'+i)))
			}
			if got := capWarnings(ws, tc.max); !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("long and many", func(t *testing.T) {
		ws := make([]string, 40)
		for i := range ws {
			ws[i] = strings.Repeat("x", 1000)
		}
		got := capWarnings(ws, 100)
		total := 0
		for _, w := range got[:len(got)-1] {
			if len(w) > maxWarningLen {
				t.Fatalf("warning of %d bytes", len(w))
			}
			total += len(w)
		}
		if total+len(got[len(got)-1]) > maxWarningsTotal || !strings.HasSuffix(got[len(got)-1], "more policy warnings not shown") {
			t.Fatalf("%d warnings, %d bytes, last %q", len(got), total, got[len(got)-1])
		}
	})
}

const mutateLabels = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: add-labels}
spec:
  rules:
  - name: team-label
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
      patchStrategicMerge:
        metadata:
          labels:
            team: "{{ request.userInfo.username }}"
          annotations:
            verdict.dev/mutated~by: webhook
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: pull-policy}
spec:
  rules:
  - name: always-pull
    match: {any: [{resources: {kinds: [Pod]}}]}
    mutate:
      patchStrategicMerge:
        spec:
          containers:
          - (name): "*"
            imagePullPolicy: Always
`

func TestMutatePatch(t *testing.T) {
	h := newHarness(t, staticSource(t, mutateLabels), testConfig())
	orig := pod("web", func(p map[string]any) {
		// An integer float64 cannot hold exactly must survive untouched.
		p["metadata"].(map[string]any)["annotations"] = map[string]any{"n": "1"}
		p["spec"].(map[string]any)["priority"] = json.Number("9007199254740993")
	})
	ar := reviewOf(t, admissionv1.Create, orig)
	resp := h.admit(PathMutate, ar)
	if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("response %+v", resp)
	}
	p, err := jsonpatch.DecodePatch(resp.Patch)
	if err != nil {
		t.Fatalf("patch %s: %v", resp.Patch, err)
	}
	patched, err := p.Apply(ar.Request.Object.Raw)
	if err != nil {
		t.Fatalf("apply %s: %v", resp.Patch, err)
	}
	want := `{"apiVersion":"v1","kind":"Pod",
	  "metadata":{"name":"web","namespace":"default","uid":"uid-web","annotations":{"n":"1","verdict.dev/mutated~by":"webhook"},"labels":{"team":"alice"}},
	  "spec":{"priority":9007199254740993,"containers":[{"name":"app","image":"registry.example.com/app:v1","imagePullPolicy":"Always"}]}}`
	if !jsonpatch.Equal(patched, []byte(want)) {
		t.Fatalf("patched object\n%s\nwant\n%s\npatch %s", patched, want, resp.Patch)
	}
	if !strings.Contains(string(resp.Patch), `"/metadata/annotations/verdict.dev~1mutated~0by"`) {
		t.Fatalf("annotation key not escaped as RFC 6901 says: %s", resp.Patch)
	}
	if strings.Contains(string(resp.Patch), "priority") {
		t.Fatalf("patch touches an unchanged number: %s", resp.Patch)
	}

	t.Run("nothing to change, no patch", func(t *testing.T) {
		done := pod("done", func(p map[string]any) {
			p["metadata"].(map[string]any)["labels"] = map[string]any{"team": "alice"}
			p["metadata"].(map[string]any)["annotations"] = map[string]any{"verdict.dev/mutated~by": "webhook"}
			p["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["imagePullPolicy"] = "Always"
		})
		resp := h.admit(PathMutate, reviewOf(t, admissionv1.Create, done))
		if !resp.Allowed || resp.Patch != nil || resp.PatchType != nil {
			t.Fatalf("response %+v", resp)
		}
	})
}

func TestMutateFailurePolicy(t *testing.T) {
	// The message of the denial is pinned by TestDenialMessages.
	t.Run("Fail denies", func(t *testing.T) {
		h := newHarness(t, staticSource(t, brokenMutation("Fail"), mutateLabels), testConfig())
		resp := h.admit(PathMutate, reviewOf(t, admissionv1.Create, pod("web")))
		if resp.Allowed || resp.Result == nil || resp.Patch != nil {
			t.Fatalf("response %+v", resp)
		}
	})
	t.Run("Ignore skips the policy", func(t *testing.T) {
		h := newHarness(t, staticSource(t, brokenMutation("Ignore"), mutateLabels), testConfig())
		resp := h.admit(PathMutate, reviewOf(t, admissionv1.Create, pod("web")))
		if !resp.Allowed || resp.Patch == nil {
			t.Fatalf("response %+v", resp)
		}
		if strings.Contains(string(resp.Patch), "broken") {
			t.Fatalf("patch of the failed policy applied: %s", resp.Patch)
		}
		if len(resp.Warnings) != 1 || !strings.HasPrefix(resp.Warnings[0], "policy broken.remove-missing: ") {
			t.Fatalf("warnings %q", resp.Warnings)
		}
	})
}

func TestNamespaceSelector(t *testing.T) {
	const pol = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: prod-only}
spec:
  validationFailureAction: Enforce
  rules:
  - name: need-owner
    match:
      any:
      - resources:
          kinds: [Pod]
          namespaceSelector: {matchLabels: {env: prod}}
    validate:
      message: owner label required
      pattern: {metadata: {labels: {owner: "?*"}}}
`
	h := newHarness(t, staticSource(t, pol), testConfig(), WithNamespaceLister(StaticNamespaces{"prod": {"env": "prod"}}))
	if resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("a", inNamespace("prod")))); resp.Allowed {
		t.Fatal("pod in a prod namespace admitted without owner")
	}
	if resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("b", inNamespace("dev")))); !resp.Allowed {
		t.Fatalf("pod outside prod denied: %v", resp.Result)
	}
}

const generateNetpol = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: default-deny, uid: gen-uid, resourceVersion: "3"}
spec:
  rules:
  - name: netpol
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate:
      apiVersion: networking.k8s.io/v1
      kind: NetworkPolicy
      name: default-deny
      namespace: "{{ request.object.metadata.name }}"
      synchronize: true
      data:
        spec: {podSelector: {}, policyTypes: [Ingress]}
  - name: clone-secret
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate:
      apiVersion: v1
      kind: Secret
      name: regcred
      namespace: "{{ request.object.metadata.name }}"
      clone: {namespace: default, name: regcred}
`

func namespaceObj(name string) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "uid": "ns-uid-" + name, "resourceVersion": "1"},
	}
}

func TestGenerateTriggersWork(t *testing.T) {
	h := newHarness(t, staticSource(t, generateNetpol), testConfig())
	resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, namespaceObj("team-a")))
	if !resp.Allowed {
		t.Fatalf("denied: %v", resp.Result)
	}
	items := h.work.Items()
	if len(items) != 2 {
		t.Fatalf("%d work items, want 2: %+v", len(items), items)
	}
	it := items[0]
	want := WorkItem{
		Kind:       evt.WorkGenerate,
		Policy:     PolicyRef{Key: "default-deny", UID: "gen-uid", ResourceVersion: "3"},
		Rule:       "netpol",
		Trigger:    ResourceRef{APIVersion: "v1", Kind: "Namespace", Name: "team-a", UID: "ns-uid-team-a"},
		Operation:  "CREATE",
		UserInfo:   engine.UserInfo{Username: "alice", UID: "u-1", Groups: []string{"dev", "system:authenticated"}},
		Targets:    []ResourceRef{{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy", Namespace: "team-a", Name: "default-deny"}},
		RequestUID: "req-team-a",
		Timestamp:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	if !reflect.DeepEqual(it, want) {
		t.Fatalf("work item\n%+v\nwant\n%+v", it, want)
	}
	if items[1].Rule != "clone-secret" || len(items[1].Targets) != 1 || items[1].Targets[0].Name != "regcred" {
		t.Fatalf("clone work item %+v", items[1])
	}
	if got := counter(t, h.reg, "verdict_webhook_work_published_total", nil); got != 2 {
		t.Fatalf("work published %v", got)
	}

	t.Run("dry run publishes no work", func(t *testing.T) {
		h.admit(PathValidate, reviewOf(t, admissionv1.Create, namespaceObj("team-dry"), dryRun))
		if n := len(h.work.Items()); n != 2 {
			t.Fatalf("%d items after a dry run", n)
		}
	})

	// Only a webhook that requires the API server's client certificate
	// vouches for the requester (issue 28, finding 2).
	t.Run("with mutual TLS the requester is verified", func(t *testing.T) {
		caFile := filepath.Join(t.TempDir(), "client-ca.crt")
		if err := os.WriteFile(caFile, newTestCA(t, "webhook-client-ca").pem, 0o600); err != nil {
			t.Fatal(err)
		}
		mutual := newHarness(t, staticSource(t, generateNetpol), testConfig(func(c *Config) { c.ClientCAFile = caFile }))
		mutual.admit(PathValidate, reviewOf(t, admissionv1.Create, namespaceObj("team-b")))
		got := mutual.work.Items()
		if len(got) != 2 || !got[0].RequesterVerified || !got[1].RequesterVerified {
			t.Fatalf("items %+v, want 2 with the requester verified", got)
		}
	})
}

func TestGenerateWorkFailure(t *testing.T) {
	errQueueDown := errors.New("jetstream: no responders")
	cases := map[string]struct {
		mode        WorkFailureMode
		sink        *MemoryWorkSink
		wantAllowed bool
		reason      string
	}{
		"error, deny":    {mode: WorkFailureDeny, sink: &MemoryWorkSink{Fail: errQueueDown}, reason: reasonError},
		"error, allow":   {mode: WorkFailureAllow, sink: &MemoryWorkSink{Fail: errQueueDown}, wantAllowed: true, reason: reasonError},
		"timeout, deny":  {mode: WorkFailureDeny, sink: &MemoryWorkSink{Delay: time.Minute}, reason: reasonTimeout},
		"timeout, allow": {mode: WorkFailureAllow, sink: &MemoryWorkSink{Delay: time.Minute}, wantAllowed: true, reason: reasonTimeout},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := testConfig(func(c *Config) {
				c.OnWorkPublishFailure = tc.mode
				c.WorkPublishTimeout = 50 * time.Millisecond
			})
			h := newHarness(t, staticSource(t, generateNetpol), cfg, WithWorkSink(tc.sink))
			start := time.Now()
			resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, namespaceObj("team-b")))
			if elapsed := time.Since(start); elapsed > 5*time.Second {
				t.Fatalf("answer took %s", elapsed)
			}
			if resp.Allowed != tc.wantAllowed {
				t.Fatalf("allowed %v, want %v: %+v", resp.Allowed, tc.wantAllowed, resp.Result)
			}
			// The message of a denial is pinned by TestDenialMessages.
			if tc.wantAllowed && (len(resp.Warnings) == 0 || !strings.Contains(resp.Warnings[0], "generate work could not be queued")) {
				t.Fatalf("warnings %q", resp.Warnings)
			}
			if got := counter(t, h.reg, "verdict_webhook_work_publish_failures_total", map[string]string{"reason": tc.reason}); got < 1 {
				t.Fatalf("failures counted %v", got)
			}
		})
	}
}

// A request waiting for JetStream to take its generate work (seconds
// while a stream elects a leader) has given its evaluation slot back: with
// one slot, a Pod is admitted meanwhile instead of answered 429.
func TestWorkWaitGivesSlotBack(t *testing.T) {
	sink := &MemoryWorkSink{Delay: time.Second}
	h := newHarness(t, staticSource(t, generateNetpol), testConfig(func(c *Config) {
		c.MaxConcurrentEvaluations = 1
		c.EvaluationQueueTimeout = 100 * time.Millisecond
		c.WorkPublishTimeout = 10 * time.Second
	}), WithWorkSink(sink))
	trigger := mustJSON(t, reviewOf(t, admissionv1.Create, namespaceObj("team-c")))
	done := make(chan int, 1)
	go func() {
		resp, err := h.client.Post(h.url+PathValidate, "application/json", bytes.NewReader(trigger))
		if err != nil {
			done <- 0
			return
		}
		_ = resp.Body.Close()
		done <- resp.StatusCode
	}()
	testkit.EventuallyTrue(t, 10*time.Second, "the trigger waiting on its work", func() bool { return sink.Waiting.Load() == 1 })
	if resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("meanwhile"))); !resp.Allowed {
		t.Fatalf("Pod during the wait: %+v", resp.Result)
	}
	if got := counter(t, h.reg, "verdict_webhook_overload_rejections_total", nil); got != 0 {
		t.Fatalf("%v requests answered overloaded during the wait", got)
	}
	if code := <-done; code != http.StatusOK {
		t.Fatalf("trigger: status %d", code)
	}
	if n := len(sink.Items()); n != 2 { // the policy's two generate rules
		t.Fatalf("%d work items, want 2", n)
	}
}

// The wait for JetStream ends a second before the request's deadline (the
// API server's ?timeout=), whatever WorkPublishTimeout says, so the API
// server gets the webhook's answer instead of timing out.
func TestWorkWaitWithinRequestDeadline(t *testing.T) {
	h := newHarness(t, staticSource(t, generateNetpol), testConfig(func(c *Config) {
		c.WorkPublishTimeout = time.Minute
		c.OnWorkPublishFailure = WorkFailureDeny
	}), WithWorkSink(&MemoryWorkSink{Delay: time.Minute}))
	start := time.Now()
	resp := h.admit(PathValidate+"?timeout=3s", reviewOf(t, admissionv1.Create, namespaceObj("team-d")))
	took := time.Since(start)
	if took >= 3*time.Second {
		t.Fatalf("answered after %s, past the request's 3s deadline", took)
	}
	if resp.Allowed || !strings.Contains(resp.Result.Message, "could not be queued") {
		t.Fatalf("want the work-failure denial, got %+v", resp.Result)
	}
	if got := counter(t, h.reg, "verdict_webhook_work_publish_failures_total", map[string]string{"reason": reasonTimeout}); got != 1 {
		t.Fatalf("timeouts counted %v", got)
	}
}

// A DELETE of a trigger of a synchronized rule queues the removal of its
// downstream; when JetStream cannot take it, the delete is still allowed
// (with a warning), whatever OnWorkPublishFailure says: deletes are how a
// cluster heals, and a Namespace must go with JetStream down.
func TestDeleteDownstreamNeverDenies(t *testing.T) {
	cfg := testConfig(func(c *Config) {
		c.OnWorkPublishFailure = WorkFailureDeny
		c.WorkPublishTimeout = 50 * time.Millisecond
	})
	sink := &MemoryWorkSink{Fail: errors.New("jetstream: no responders")}
	h := newHarness(t, staticSource(t, generateNetpol), cfg, WithWorkSink(sink))
	ns := namespaceObj("team-gone")
	resp := h.admit(PathValidate, reviewOf(t, admissionv1.Delete, ns))
	if !resp.Allowed {
		t.Fatalf("a delete was denied because its downstream's removal could not be queued: %+v", resp.Result)
	}
	if len(resp.Warnings) != 1 || !strings.Contains(resp.Warnings[0], "could not be queued; it stays") {
		t.Fatalf("warnings %q", resp.Warnings)
	}
	// With JetStream up, the removal is queued for the synchronized rule
	// only, as a deleteDownstream item naming the deleted object.
	ok := &MemoryWorkSink{}
	h = newHarness(t, staticSource(t, generateNetpol), cfg, WithWorkSink(ok))
	if resp := h.admit(PathValidate, reviewOf(t, admissionv1.Delete, ns)); !resp.Allowed {
		t.Fatalf("delete denied: %+v", resp.Result)
	}
	items := ok.Items()
	if len(items) != 1 || items[0].Action != evt.WorkDeleteDownstream || items[0].Rule != "netpol" || items[0].Trigger.UID != "ns-uid-team-gone" {
		t.Fatalf("items %+v", items)
	}
}

func TestNoWorkSinkConfigured(t *testing.T) {
	cert, _, _ := selfSigned(t, "x")
	s, err := New(testConfig(), WithPolicySource(staticSource(t, generateNetpol)), WithCertSource(certs.Static(cert)), WithLogger(testLogger(t)))
	if err != nil {
		t.Fatal(err)
	}
	rv, err := decodeReview(mustJSON(t, reviewOf(t, admissionv1.Create, namespaceObj("n"))))
	if err != nil {
		t.Fatal(err)
	}
	d, err := s.validateIn(t.Context(), rv, scopeAll)
	if err != nil {
		t.Fatal(err)
	}
	if d.resp.Allowed || !strings.Contains(d.resp.Result.Message, ErrWorkSinkUnavailable.Error()) {
		t.Fatalf("decision %+v", d.resp.Result)
	}
}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ValidatingPolicies answer in Kyverno's words for them: with Deny, a
// failure denies ("Policy <name> failed: <message>", joined with "; "
// when several do); with Warn it is a warning; with Audit only, nothing
// is said to the client.
func TestValidatingPolicyOutcomes(t *testing.T) {
	vpol := func(name, action, expr string) string {
		return `apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: ` + name + `}
spec:
  validationActions: [` + action + `]
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "` + expr + `", message: "` + name + ` says no"}]
`
	}
	h := newHarness(t, staticSource(t,
		vpol("deny-a", "Deny", "false"), vpol("deny-b", "Deny", "false"),
		vpol("warn", "Warn", "false"), vpol("audit", "Audit", "false")), testConfig())
	resp := h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("p")))
	if resp.Allowed || resp.Result.Message != "Policy deny-a failed: deny-a says no; Policy deny-b failed: deny-b says no" {
		t.Fatalf("denial %+v", resp.Result)
	}
	h = newHarness(t, staticSource(t, vpol("warn", "Warn", "false"), vpol("audit", "Audit", "false"), vpol("ok", "Deny", "true")), testConfig())
	resp = h.admit(PathValidate, reviewOf(t, admissionv1.Create, pod("p")))
	if !resp.Allowed || !reflect.DeepEqual(resp.Warnings, []string{"Policy warn failed: warn says no"}) {
		t.Fatalf("allowed %v, warnings %q", resp.Allowed, resp.Warnings)
	}
}
