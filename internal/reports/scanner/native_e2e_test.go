package scanner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/reports/scanner"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
)

// TestE2ENativePolicyScan: a ValidatingAdmissionPolicy and its binding
// (Audit, the binding selecting one namespace by label), stored in the
// real API server, are scanned like Verdict's own policies: each Pod of
// the namespace gets the policy's result in its PolicyReport, named
// after the policy with its kind, pass or fail as the API server's CEL
// library evaluates it; Pods of other namespaces get none. Changing the
// binding so that it selects nothing retracts the results.
func TestE2ENativePolicyScan(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := scanNamespace(e, "native-")
	other := e.Namespace("native-other-").Name
	labelled := createPod(e, ns, "labelled", map[string]string{"app": "web"})
	bare := createPod(e, ns, "bare", nil)
	outside := createPod(e, other, "outside", nil)

	name := "require-app-" + ns
	create := func(gvrRes string, y string) *unstructured.Unstructured {
		t.Helper()
		v, err := document.Decode([]byte(y))
		if err != nil {
			t.Fatal(err)
		}
		gvr := policycache.ValidatingAdmissionPolicies
		if gvrRes == "binding" {
			gvr = policycache.ValidatingAdmissionPolicyBindings
		}
		o, err := e.Dyn.Resource(gvr).Create(ctx, &unstructured.Unstructured{Object: v.(map[string]any)}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			_ = e.Dyn.Resource(gvr).Delete(context.WithoutCancel(ctx), o.GetName(), metav1.DeleteOptions{})
		})
		return o
	}
	vap := create("policy", fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: %s}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  validations:
  - expression: "has(object.metadata.labels) && 'app' in object.metadata.labels"
    message: label app is required
`, name))
	binding := create("binding", fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec:
  policyName: %[1]s
  validationActions: [Audit]
  matchResources:
    namespaceSelector: {matchLabels: {verdict-scan: %[2]s}}
`, name, ns))

	e.StartProjector(e.Connect())
	startScannerCache(e, e.Dyn, true, scanner.WithInterval(2*time.Second))

	key := bus.PolicyRef{Key: name, Kind: policy.KindValidatingAdmissionPolicy}.ResultKey()
	testkit.Eventually(t, 45*time.Second, "a result per Pod of the namespace", func() error {
		got := policyResults(e, key)
		if len(got) != 2 {
			return fmt.Errorf("%d results, want 2", len(got))
		}
		return nil
	})
	results := policyResults(e, key)
	for uid, want := range map[string]engine.Status{string(labelled.UID): engine.StatusPass, string(bare.UID): engine.StatusFail} {
		ev := results[uid]
		if len(ev.Rules) != 1 || ev.Rules[0].Status != want || ev.Rules[0].Name != name || ev.Policy.UID != string(vap.GetUID()) || ev.Admission {
			t.Fatalf("result of %s: %+v; want a background %s of the policy", uid, ev, want)
		}
		if want == engine.StatusFail && ev.Rules[0].Message != "label app is required" {
			t.Fatalf("message %q; want the validation's", ev.Rules[0].Message)
		}
	}
	if _, ok := results[string(outside.UID)]; ok {
		t.Fatalf("a result for a Pod the binding does not select")
	}
	testkit.Eventually(t, 30*time.Second, "the Pods' reports", func() error {
		rep := e.Report(ns, string(bare.UID))
		if rep == nil {
			return testkit.ErrNotYet
		}
		entries, _, _ := unstructured.NestedSlice(rep.Object, "results")
		for _, en := range entries {
			m := en.(map[string]any)
			props, _ := m["properties"].(map[string]any)
			if m["policy"] == name && m["result"] == "fail" && props[model.PropertyPolicyKind] == policy.KindValidatingAdmissionPolicy {
				return nil
			}
		}
		return fmt.Errorf("report results %v; want the policy's failure with its kind", entries)
	})

	// The binding now selects another label: the results are retracted.
	cur, err := e.Dyn.Resource(policycache.ValidatingAdmissionPolicyBindings).Get(ctx, binding.GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedStringMap(cur.Object, map[string]string{"verdict-scan": "nowhere"}, "spec", "matchResources", "namespaceSelector", "matchLabels"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Dyn.Resource(policycache.ValidatingAdmissionPolicyBindings).Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testkit.Eventually(t, 45*time.Second, "the results retracted", func() error {
		got := policyResults(e, key)
		if len(got) != 2 {
			return fmt.Errorf("%d results, want 2", len(got))
		}
		for uid, ev := range got {
			if ev.Retracted == "" {
				return fmt.Errorf("result of %s not retracted: %+v", uid, ev)
			}
		}
		return nil
	})
}

// TestE2ENativeMutatingPolicyScan: a MutatingAdmissionPolicy (v1, which
// the API server of 1.36 serves) and its binding: the API server applies
// the mutation to what is created after it, and the scan reports each
// Pod of the namespace: a Pod created before lacks the mutation ("mutation
// is not applied", fail), one created after holds it (pass).
func TestE2ENativeMutatingPolicyScan(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := scanNamespace(e, "native-map-")
	before := createPod(e, ns, "before", nil)
	name := "label-scanned-" + ns
	gvr, _ := policycache.VerdictAPI.Resource(policy.KindMutatingAdmissionPolicy)
	bgvr := gvr
	bgvr.Resource = "mutatingadmissionpolicybindings"
	for _, c := range []struct {
		res  string
		yaml string
	}{
		{gvr.Resource, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: %s}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: "Object{metadata: Object.metadata{labels: {'scanned': 'yes'}}}"
`, name)},
		{bgvr.Resource, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: %[1]s}
spec:
  policyName: %[1]s
  matchResources:
    namespaceSelector: {matchLabels: {verdict-scan: %[2]s}}
`, name, ns)},
	} {
		v, err := document.Decode([]byte(c.yaml))
		if err != nil {
			t.Fatal(err)
		}
		r := gvr
		r.Resource = c.res
		o, err := e.Dyn.Resource(r).Create(ctx, &unstructured.Unstructured{Object: v.(map[string]any)}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = e.Dyn.Resource(r).Delete(context.WithoutCancel(ctx), o.GetName(), metav1.DeleteOptions{}) })
	}
	// The API server applies the policy once its informers have it.
	var after *corev1.Pod
	testkit.Eventually(t, 30*time.Second, "the API server mutates a new Pod", func() error {
		p, err := e.Kube.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("after-%d", time.Now().UnixNano())},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if p.Labels["scanned"] == "yes" {
			after = p
			return nil
		}
		if err := e.Kube.CoreV1().Pods(ns).Delete(ctx, p.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		return testkit.ErrNotYet
	})

	e.StartProjector(e.Connect())
	startScannerCache(e, e.Dyn, true, scanner.WithInterval(2*time.Second))
	key := bus.PolicyRef{Key: name, Kind: policy.KindMutatingAdmissionPolicy}.ResultKey()
	testkit.Eventually(t, 45*time.Second, "a result per Pod", func() error {
		got := policyResults(e, key)
		for uid, want := range map[string]engine.Status{string(before.UID): engine.StatusFail, string(after.UID): engine.StatusPass} {
			ev, ok := got[uid]
			if !ok || len(ev.Rules) != 1 || ev.Rules[0].Status != want || ev.Rules[0].Type != engine.TypeMutation {
				return fmt.Errorf("result of %s: %+v; want %s", uid, ev, want)
			}
		}
		if m := got[string(before.UID)].Rules[0].Message; m != "mutation is not applied" {
			return fmt.Errorf("message %q", m)
		}
		return nil
	})
}

// scanNamespace is a new namespace labelled verdict-scan=<its name>, for
// a binding to select.
func scanNamespace(e *reportertest.Env, prefix string) string {
	e.T.Helper()
	ns := e.Namespace(prefix)
	if ns.Labels == nil {
		ns.Labels = map[string]string{}
	}
	ns.Labels["verdict-scan"] = ns.Name
	if _, err := e.Kube.CoreV1().Namespaces().Update(e.T.Context(), ns, metav1.UpdateOptions{}); err != nil {
		e.T.Fatal(err)
	}
	return ns.Name
}
