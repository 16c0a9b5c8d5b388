package platform

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/internal/platform/policyhttp"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// parseLimits parses args as a service does, from the defaults.
func parseLimits(t *testing.T, args ...string) (EvaluationLimits, error) {
	t.Helper()
	l := DefaultEvaluationLimits()
	fs := flag.NewFlagSet("svc", flag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	BindEvaluationLimitFlags(fs, &l)
	if err := fs.Parse(args); err != nil {
		return l, err
	}
	return l, l.Validate()
}

func TestEvaluationLimitFlags(t *testing.T) {
	cases := map[string]struct {
		args []string
		want EvaluationLimits
		// errs are what the error names; none: valid.
		errs []string
	}{
		"defaults are the engine's": {
			want: EvaluationLimits{
				MaxForEachElements: engine.DefaultMaxForEachElements, MaxForEachDepth: engine.DefaultMaxForEachDepth,
				WorkBudget: engine.DefaultWorkBudget, MaxExpressionSteps: engine.DefaultMaxExpressionSteps, MemoryBudget: engine.DefaultMemoryBudget,
			},
		},
		"every flag": {
			args: []string{"--max-foreach-elements=100", "--max-foreach-depth=2", "--work-budget=5000", "--max-expression-steps=700", "--memory-budget=8Mi"},
			want: EvaluationLimits{MaxForEachElements: 100, MaxForEachDepth: 2, WorkBudget: 5000, MaxExpressionSteps: 700, MemoryBudget: 8 << 20},
		},
		"memory budget in bytes": {
			args: []string{"--memory-budget=1048576"},
			want: func() EvaluationLimits { l := DefaultEvaluationLimits(); l.MemoryBudget = 1 << 20; return l }(),
		},
		"zero foreach elements": {args: []string{"--max-foreach-elements=0"}, errs: []string{"--max-foreach-elements 0: must be positive (the default is 10000)"}},
		"negative depth":        {args: []string{"--max-foreach-depth=-1"}, errs: []string{"--max-foreach-depth -1: must be positive (the default is 4)"}},
		"zero work budget":      {args: []string{"--work-budget=0"}, errs: []string{"--work-budget 0: must be positive (the default is 1000000)"}},
		"zero expression steps": {args: []string{"--max-expression-steps=0"}, errs: []string{"--max-expression-steps 0: must be positive"}},
		"zero memory budget":    {args: []string{"--memory-budget=0"}, errs: []string{"--memory-budget 0: must be positive (the default is 64Mi)"}},
		"negative memory":       {args: []string{"--memory-budget=-1Mi"}, errs: []string{"--memory-budget -1048576: must be positive"}},
		"every problem reported": {
			args: []string{"--work-budget=0", "--max-foreach-depth=0"},
			errs: []string{"--work-budget 0", "--max-foreach-depth 0"},
		},
		"not a number":         {args: []string{"--work-budget=lots"}, errs: []string{`invalid value "lots" for flag -work-budget`}},
		"not a quantity":       {args: []string{"--memory-budget=64MB"}, errs: []string{`invalid value "64MB" for flag -memory-budget`}},
		"fraction of a byte":   {args: []string{"--memory-budget=0.5"}, errs: []string{"not a whole number of bytes"}},
		"int overflow refused": {args: []string{"--work-budget=99999999999999999999"}, errs: []string{"value out of range"}},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := parseLimits(t, tc.args...)
			if len(tc.errs) == 0 {
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want {
					t.Fatalf("limits %+v, want %+v", got, tc.want)
				}
				if _, err := engine.New(got.Options()...); err != nil {
					t.Fatalf("the engine refuses valid limits: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("limits %+v accepted", got)
			}
			for _, want := range tc.errs {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q lacks %q", err, want)
				}
			}
		})
	}
}

// nowhereClients are a service's clients over a kubeconfig whose API
// server does not answer: what the engine reads there fails, so what it
// refuses before reading is told apart.
func nowhereClients(t *testing.T) *Clients {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	const kubeconfig = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	kc, err := KubeConfig{Kubeconfig: path, QPS: 50, Burst: 100}.Clients("verdict-test")
	if err != nil {
		t.Fatal(err)
	}
	return kc
}

// configMapPolicy is a policy of rules on ConfigMaps, each "name: body"
// with body the YAML of the rule after its match; namespace "" makes a
// ClusterPolicy.
func configMapPolicy(t *testing.T, eng *Engine, namespace string, rules ...string) *engine.Policy {
	t.Helper()
	var b strings.Builder
	if namespace == "" {
		b.WriteString("apiVersion: kyverno.io/v1\nkind: ClusterPolicy\nmetadata: {name: p}\n")
	} else {
		fmt.Fprintf(&b, "apiVersion: kyverno.io/v1\nkind: Policy\nmetadata: {name: p, namespace: %s}\n", namespace)
	}
	b.WriteString("spec:\n  validationFailureAction: Enforce\n  rules:\n")
	for _, r := range rules {
		n, body, _ := strings.Cut(r, ": ")
		fmt.Fprintf(&b, "  - name: %s\n    match: {any: [{resources: {kinds: [ConfigMap]}}]}\n    %s\n", n, body)
	}
	docs, err := policy.Parse([]byte(b.String()), "test")
	if err != nil || len(docs.Policies) != 1 {
		t.Fatalf("parse: %v", err)
	}
	p, err := eng.Compile(docs.Policies[0])
	if err != nil {
		t.Fatalf("compile: %v", err)
	}
	return p
}

// configMapReview is the CREATE of a ConfigMap in namespace with n keys
// and data.target set.
func configMapReview(namespace string, n int, target string) *engine.Request {
	data := map[string]any{"target": target}
	for i := range n {
		data[fmt.Sprintf("key-%04d", i)] = fmt.Sprintf("value-%d", i)
	}
	return &engine.Request{Operation: engine.OpCreate, Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "cm", "namespace": namespace},
		"data":     data,
	}}
}

const (
	flatForEach   = `flat: validate: {foreach: [{list: "request.object.data", deny: {conditions: {any: [{key: "{{ element.key }}", operator: Equals, value: forbidden}]}}}]}`
	nestedForEach = `nested: validate: {foreach: [{list: "request.object.data", foreach: [{list: "request.object.data", deny: {conditions: {any: [{key: "{{ element0.key }}", operator: Equals, value: "{{ element1.value }}"}]}}}]}]}`
	quadratic     = `quadratic: context: [{name: n, variable: {jmesPath: "length(keys(request.object.data)[?contains(keys($.request.object.data), @)])"}}]
    validate: {deny: {conditions: {any: [{key: "{{ n }}", operator: Equals, value: -1}]}}}`
	padded = "padded: context: [{name: s, variable: {jmesPath: \"pad_left('a', `2000000`, 'x')\"}}]\n    validate: {deny: {conditions: {any: [{key: \"{{ length(s) }}\", operator: Equals, value: 0}]}}}"
)

// TestNewEngineLimits: a service started with a tighter limit flag
// refuses, through the one set-up, an evaluation over it, which its
// defaults let through.
func TestNewEngineLimits(t *testing.T) {
	kc := nowhereClients(t)
	stopped := engine.StoppedPrefix + engine.ErrLimitExceeded.Error() + ": "
	cases := map[string]struct {
		args []string
		rule string
		keys int
		// want is the start of the rule's message after stopped; empty:
		// the rule passes.
		want string
	}{
		"foreach within the default":   {rule: flatForEach, keys: 50},
		"foreach over the flag":        {args: []string{"--max-foreach-elements=10"}, rule: flatForEach, keys: 50, want: "foreach list request.object.data has 51 elements, more than the limit of 10"},
		"nesting within the default":   {rule: nestedForEach, keys: 5},
		"nesting over the flag":        {args: []string{"--max-foreach-depth=1"}, rule: nestedForEach, keys: 5, want: "foreach nested deeper than the limit of 1"},
		"work within the default":      {rule: flatForEach, keys: 500},
		"work over the flag":           {args: []string{"--work-budget=100"}, rule: flatForEach, keys: 500, want: "work budget of 100 steps spent"},
		"expression within default":    {rule: quadratic, keys: 200},
		"expression over the flag":     {args: []string{"--max-expression-steps=10000"}, rule: quadratic, keys: 200, want: "expression over the step limit of 10000"},
		"memory within the default":    {rule: padded},
		"memory over the flag":         {args: []string{"--memory-budget=1Mi"}, rule: padded, want: "memory budget of 1048576 bytes spent"},
		"a tighter flag leaves others": {args: []string{"--max-foreach-elements=1000"}, rule: flatForEach, keys: 500},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			limits, err := parseLimits(t, tc.args...)
			if err != nil {
				t.Fatal(err)
			}
			eng, err := NewEngine(kc, EngineConfig{Namespace: "verdict", Limits: limits})
			if err != nil {
				t.Fatal(err)
			}
			p := configMapPolicy(t, eng, "", tc.rule)
			resp := eng.Validate(t.Context(), configMapReview("team-a", tc.keys, ""), p, nil)
			if len(resp.Rules) != 1 {
				t.Fatalf("rules %+v, want one", resp.Rules)
			}
			rr := resp.Rules[0]
			if tc.want == "" {
				if rr.Status != engine.StatusPass {
					t.Fatalf("%s %q, want a pass", rr.Status, rr.Message)
				}
				return
			}
			if rr.Status != engine.StatusError || !strings.HasPrefix(rr.Message, stopped+tc.want) {
				t.Fatalf("%s %q, want an error starting %q", rr.Status, rr.Message, stopped+tc.want)
			}
		})
	}
}

// TestNewEngineGuards: whatever the service, the one set-up keeps
// Verdict's Secrets from every policy's apiCall and a namespaced policy's
// apiCalls in its namespace; both are refused before the API server is
// asked (which here does not answer).
func TestNewEngineGuards(t *testing.T) {
	kc := nowhereClients(t)
	apiCall := `call: context: [{name: r, apiCall: {urlPath: "/api/v1/namespaces/{{ request.object.data.target }}"}}]
    validate: {deny: {conditions: {any: [{key: "{{ r }}", operator: Equals, value: x}]}}}`
	cases := map[string]struct {
		policyNamespace string
		target          string
		text            string
	}{
		"a cluster policy reads Verdict's Secrets": {
			target: "verdict/secrets/verdict-webhook-tls", text: "protected: Verdict's own Secrets",
		},
		"a cluster policy lists Verdict's Secrets": {
			target: "verdict/secrets", text: "protected: Verdict's own Secrets",
		},
		"a namespaced policy reads another namespace": {
			policyNamespace: "team-a", target: "team-b/configmaps/settings", text: "names namespace team-b; a namespaced policy reads only its own namespace, team-a",
		},
		"a namespaced policy reads its own": {
			policyNamespace: "team-a", target: "team-a/configmaps/settings", text: "127.0.0.1:1",
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			for _, opts := range [][]EngineOption{nil, {WithClusterLister()}} {
				eng, err := NewEngine(kc, EngineConfig{Namespace: "verdict", Limits: DefaultEvaluationLimits()}, opts...)
				if err != nil {
					t.Fatal(err)
				}
				p := configMapPolicy(t, eng, tc.policyNamespace, apiCall)
				resp := eng.Validate(t.Context(), configMapReview("team-a", 0, tc.target), p, nil)
				if len(resp.Rules) != 1 {
					t.Fatalf("rules %+v, want one", resp.Rules)
				}
				if rr := resp.Rules[0]; rr.Status != engine.StatusError || !strings.Contains(rr.Message, tc.text) {
					t.Fatalf("%s %q, want an error naming %q", rr.Status, rr.Message, tc.text)
				}
			}
		})
	}
}

func TestNewEngineRefuses(t *testing.T) {
	kc := nowhereClients(t)
	valid := EngineConfig{Namespace: "verdict", Limits: DefaultEvaluationLimits()}
	cases := map[string]struct {
		kc   *Clients
		cfg  func(c *EngineConfig)
		want string
	}{
		"no clients":   {cfg: func(*EngineConfig) {}, want: "needs the Kubernetes"},
		"no namespace": {kc: kc, cfg: func(c *EngineConfig) { c.Namespace = "" }, want: "needs Verdict's namespace"},
		"zero limits":  {kc: kc, cfg: func(c *EngineConfig) { c.Limits = EvaluationLimits{} }, want: "--work-budget 0"},
		"bad policy HTTP entry": {kc: kc, cfg: func(c *EngineConfig) {
			c.PolicyHTTP = policyhttp.Config{Enabled: true, Blocklist: []string{"10.0.0.0/99"}}
		}, want: "10.0.0.0/99"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := valid
			tc.cfg(&cfg)
			_, err := NewEngine(tc.kc, cfg)
			if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one wrapping ErrInvalidConfig naming %q", err, tc.want)
			}
		})
	}
	if _, err := NewEngine(kc, valid); err != nil {
		t.Fatal(err)
	}
}

// TestEngineOptionsCarryTheSetUp: an engine built from Options (the
// webhook's admission server's) keeps the set-up's limits.
func TestEngineOptionsCarryTheSetUp(t *testing.T) {
	limits, err := parseLimits(t, "--max-foreach-elements=10")
	if err != nil {
		t.Fatal(err)
	}
	set, err := NewEngine(nowhereClients(t), EngineConfig{Namespace: "verdict", Limits: limits})
	if err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New(set.Options()...)
	if err != nil {
		t.Fatal(err)
	}
	built := &Engine{Engine: eng}
	p := configMapPolicy(t, built, "", flatForEach)
	rr := eng.Validate(context.Background(), configMapReview("team-a", 20, ""), p, nil).Rules[0]
	if rr.Status != engine.StatusError || !strings.Contains(rr.Message, "more than the limit of 10") {
		t.Fatalf("%s %q, want the set-up's foreach limit", rr.Status, rr.Message)
	}
}
