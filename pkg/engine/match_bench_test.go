package engine_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// matchBlocks are match and exclude blocks of the forms the policy
// library uses (names, namespaces, annotations, selectors, subjects,
// roles, wildcards in each), one rule each; most do not select the
// benchmark's Pod, so that matching is most of the work.
var matchBlocks = []string{
	`match: {any: [{resources: {kinds: [Pod], names: ["web-*"]}}]}`,
	`match: {any: [{resources: {kinds: [Pod], namespaces: ["prod-?", "staging*", "team-*-dev"]}}]}`,
	`match: {any: [{resources: {kinds: [Pod], annotations: {"team": "pay*"}}}]}`,
	`match: {any: [{resources: {kinds: [Pod], annotations: {"*.acme.io/*": "?*"}}}]}`,
	`match: {any: [{resources: {kinds: [Pod], selector: {matchLabels: {app: "web*"}}}}]}`,
	`match: {any: [{resources: {kinds: [Pod], selector: {matchLabels: {"app.kubernetes.io/*": "*"}}}}]}`,
	`match: {any: [{resources: {kinds: [Pod], namespaceSelector: {matchLabels: {tier: "gold"}}}}]}`,
	`match: {any: [{subjects: [{kind: User, name: "admin-*"}], resources: {kinds: [Pod]}}]}`,
	`match: {any: [{subjects: [{kind: Group, name: "system:*"}], resources: {kinds: [Pod]}}]}`,
	`match: {any: [{subjects: [{kind: ServiceAccount, namespace: "kube-*", name: "*"}], resources: {kinds: [Pod]}}]}`,
	`match: {any: [{clusterRoles: ["cluster-admin", "*-operator"], resources: {kinds: [Pod]}}]}`,
	`match: {any: [{roles: ["prod:deployer"], resources: {kinds: [Pod]}}]}`,
	`match: {any: [{resources: {kinds: [Pod]}}]}
    exclude: {any: [{resources: {namespaces: ["kube-*", "verdict"]}}, {resources: {annotations: {"skip.acme.io/*": "true"}}}, {subjects: [{kind: Group, name: "system:masters"}]}]}`,
	`match: {all: [{resources: {kinds: [Pod], namespaces: ["prod"]}}, {resources: {selector: {matchLabels: {app: "?eb"}}}}]}`,
	`match: {any: [{resources: {kinds: ["apps/v1/Deployment", "batch/*/Job"], names: ["*"]}}]}`,
	`match: {any: [{resources: {kinds: [Pod], names: ["*-canary", "*-blue", "*-green"], namespaces: ["*"]}}]}`,
}

// matchPolicies is one ClusterPolicy per match block, each of one rule
// with a small validate pattern.
func matchPolicies(tb testing.TB, eng *engine.Engine) *engine.Set {
	set := &engine.Set{}
	for i, block := range matchBlocks {
		y := fmt.Sprintf(`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: match-%d}
spec:
  validationFailureAction: Audit
  rules:
  - name: r
    %s
    validate: {pattern: {metadata: {name: "?*"}}}
`, i, block)
		set.Policies = append(set.Policies, compile(tb, eng, y))
	}
	return set
}

// matchPod is a Pod with the labels and annotations of a real workload.
func matchPod() map[string]any {
	labels := map[string]any{"app": "web", "pod-template-hash": "7d9f8c6b5"}
	annotations := map[string]any{"team": "payments"}
	for i := range 8 {
		labels[fmt.Sprintf("app.kubernetes.io/label-%d", i)] = fmt.Sprintf("value-%d", i)
		annotations[fmt.Sprintf("example.com/annotation-%d", i)] = strings.Repeat("v", 40)
	}
	return map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   map[string]any{"name": "web-7d9f8c6b5-abcde", "namespace": "prod", "labels": labels, "annotations": annotations},
		"spec":       map[string]any{"containers": []any{map[string]any{"name": "web", "image": "nginx:1.25"}}},
	}
}

// BenchmarkMatch measures one Pod against sixteen policies whose match
// and exclude blocks use every wildcard form: one op is one Pod, a new
// request each time, as the webhook makes them.
func BenchmarkMatch(b *testing.B) {
	eng := newEngine(b)
	set := matchPolicies(b, eng)
	pod := matchPod()
	user := engine.UserInfo{
		Username:     "system:serviceaccount:ci:builder",
		Groups:       []string{"system:serviceaccounts", "system:serviceaccounts:ci", "system:authenticated"},
		Roles:        []string{"ci:builder"},
		ClusterRoles: []string{"view", "ci-runner"},
	}
	nsLabels := map[string]string{"tier": "silver", "kubernetes.io/metadata.name": "prod"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	defer cancel()
	b.ReportAllocs()
	for b.Loop() {
		req := &engine.Request{Operation: engine.OpCreate, Object: pod, UserInfo: user, NamespaceLabels: nsLabels}
		eng.Apply(ctx, req, set)
	}
}
