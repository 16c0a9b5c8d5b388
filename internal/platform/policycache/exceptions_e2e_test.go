package policycache_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/internal/testkit/controlplane"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// TestE2EExceptionReach: PolicyExceptions (both shapes) stored in the
// real API server, read by the cache under each operator setting. By
// default an exception in team-b does not exempt a Pod in team-a; with
// the exception namespace policy-admin, one there exempts everywhere
// and one in team-b exempts nothing (and is a Problem); disabled, none
// exempts.
func TestE2EExceptionReach(t *testing.T) {
	cp := controlplane.StartForTest(t)
	cfg := cp.RESTConfig()
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)
	ctx := t.Context()
	for _, ns := range []string{"team-a", "team-b", "policy-admin"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, y := range []string{`apiVersion: verdict.dev/v1
kind: ClusterPolicy
metadata: {name: need-labels}
spec:
  rules:
  - name: r
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate: {pattern: {metadata: {labels: {app: "?*"}}}}
`, `apiVersion: verdict.dev/v1
kind: ValidatingPolicy
metadata: {name: need-labels-cel}
spec:
  validationActions: [Deny]
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}]}
  validations: [{expression: "has(object.metadata.labels)"}]
`} {
		u := testkit.Unstructured(t, y)
		gvr := policycache.ClusterPolicies
		if u.GetKind() == "ValidatingPolicy" {
			gvr = policycache.ValidatingPolicies
		}
		if _, err := dyn.Resource(gvr).Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Each namespace's exceptions select Pods named after it, wherever
	// they are.
	for _, ns := range []string{"team-b", "policy-admin"} {
		for _, y := range []string{`apiVersion: verdict.dev/v1
kind: PolicyException
metadata: {name: classic, namespace: ` + ns + `}
spec:
  exceptions: [{policyName: need-labels, ruleNames: [r]}]
  match: {any: [{resources: {kinds: [Pod], names: [` + ns + `-*]}}]}
`, `apiVersion: verdict.dev/v1
kind: PolicyException
metadata: {name: cel, namespace: ` + ns + `}
spec:
  policyRefs: [{name: need-labels-cel, kind: ValidatingPolicy}]
  matchConditions: [{name: named, expression: "object.metadata.name.startsWith('` + ns + `-')"}]
`} {
			if _, err := dyn.Resource(policycache.PolicyExceptions).Namespace(ns).Create(ctx, testkit.Unstructured(t, y), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	type pod struct{ namespace, name string }
	for name, tc := range map[string]struct {
		config policycache.ExceptionConfig
		exempt map[pod]bool
		// leftOut wraps the error of each exception left out.
		leftOut map[string]error
	}{
		"default: each exception in its own namespace": {
			exempt: map[pod]bool{
				{"team-a", "team-b-x"}: false, {"team-b", "team-b-x"}: true,
				{"team-a", "policy-admin-x"}: false, {"policy-admin", "policy-admin-x"}: true,
			},
		},
		"exception namespace policy-admin": {
			config: policycache.ExceptionConfig{Namespaces: []string{"policy-admin"}},
			exempt: map[pod]bool{
				{"team-a", "policy-admin-x"}: true, {"team-b", "policy-admin-x"}: true,
				{"team-a", "team-b-x"}: false, {"team-b", "team-b-x"}: false,
			},
			leftOut: map[string]error{"team-b/classic": policycache.ErrExceptionNamespace, "team-b/cel": policycache.ErrExceptionNamespace},
		},
		"disabled": {
			config: policycache.ExceptionConfig{Disabled: true},
			exempt: map[pod]bool{{"team-b", "team-b-x"}: false, {"policy-admin", "policy-admin-x"}: false},
			leftOut: map[string]error{
				"team-b/classic": policycache.ErrExceptionsDisabled, "team-b/cel": policycache.ErrExceptionsDisabled,
				"policy-admin/classic": policycache.ErrExceptionsDisabled, "policy-admin/cel": policycache.ErrExceptionsDisabled,
			},
		},
	} {
		t.Run(name, func(t *testing.T) {
			eng, err := engine.New()
			if err != nil {
				t.Fatal(err)
			}
			cctx, cancel := context.WithCancel(ctx)
			defer cancel()
			c := policycache.New(eng, dyn, kube, zerolog.Nop()).WithExceptions(tc.config)
			if err := c.Start(cctx); err != nil {
				t.Fatal(err)
			}
			var set *engine.Set
			for deadline := time.Now().Add(10 * time.Second); set == nil || len(set.Policies) < 2; time.Sleep(50 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatal("the policies never reached the set")
				}
				set, _ = c.Set(cctx)
			}
			got := map[string]error{}
			for _, p := range c.Problems() {
				got[p.Key] = p.Err
			}
			if len(got) != len(tc.leftOut) {
				t.Errorf("left out %v, want %v", got, tc.leftOut)
			}
			for key, want := range tc.leftOut {
				if !errors.Is(got[key], want) {
					t.Errorf("%s left out with %v, want %v", key, got[key], want)
				}
			}
			for p, exempt := range tc.exempt {
				obj := testkit.Unstructured(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: "+p.name+", namespace: "+p.namespace+"}\n").Object
				resps, _ := eng.Apply(cctx, &engine.Request{Operation: engine.OpCreate, Object: obj}, set)
				if len(resps) != 2 {
					t.Fatalf("%v: %d responses", p, len(resps))
				}
				for _, r := range resps {
					if skipped := r.Rules[0].Status == engine.StatusSkip; skipped != exempt {
						t.Errorf("%s/%s, policy %s: %s %q, want exempt %v", p.namespace, p.name, r.Policy.Name(), r.Rules[0].Status, r.Rules[0].Message, exempt)
					}
				}
			}
		})
	}
}
