package scanner_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/internal/reports/model"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/reports/scanner"
	"github.com/verdict-dev/verdict/internal/testkit"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// TestE2EAuditAnnotationsInReports: a ValidatingPolicy's audit
// annotations, evaluated in a background scan of Pods stored in the real
// API server, are the properties of its results in the PolicyReports (as
// Kyverno reports them), on a pass and on a failure, which also names the
// validation that failed; one whose value is null or empty is left out,
// and Verdict's own properties stay.
func TestE2EAuditAnnotationsInReports(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx := t.Context()
	ns := scanNamespace(e, "audit-")
	labelled := createPod(e, ns, "labelled", map[string]string{"app": "web"})
	bare := createPod(e, ns, "bare", nil)

	name := "require-app-" + ns
	v, err := document.Decode(fmt.Appendf(nil, `apiVersion: verdict.dev/v1
kind: ValidatingPolicy
metadata: {name: %s}
spec:
  validationActions: [Audit]
  matchConstraints:
    namespaceSelector: {matchLabels: {verdict-scan: %s}}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [pods]}
  validations:
  - expression: "has(object.metadata.labels) && 'app' in object.metadata.labels"
    message: label app is required
  auditAnnotations:
  - key: app
    valueExpression: "object.metadata.?labels['app'].orValue('none')"
  - key: image
    valueExpression: "object.spec.containers[0].image"
  - key: nothing
    valueExpression: "null"
  - key: empty
    valueExpression: "''"
`, name, ns))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Dyn.Resource(policycache.ValidatingPolicies).Create(ctx, &unstructured.Unstructured{Object: v.(map[string]any)}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.Dyn.Resource(policycache.ValidatingPolicies).Delete(context.WithoutCancel(ctx), name, metav1.DeleteOptions{})
	})

	e.StartProjector(e.Connect())
	startScannerCache(e, e.Dyn, false, scanner.WithInterval(2*time.Second))

	for uid, want := range map[string]struct{ result, app, index string }{
		string(labelled.UID): {"pass", "web", ""},
		string(bare.UID):     {"fail", "none", "0"},
	} {
		testkit.Eventually(t, 45*time.Second, "the report of "+uid, func() error {
			rep := e.Report(ns, uid)
			if rep == nil {
				return testkit.ErrNotYet
			}
			entries, _, _ := unstructured.NestedSlice(rep.Object, "results")
			for _, en := range entries {
				m := en.(map[string]any)
				if m["policy"] != name {
					continue
				}
				props, _ := m["properties"].(map[string]any)
				_, nothing := props["nothing"]
				_, empty := props["empty"]
				index, _ := props[engine.PropertyValidationIndex].(string)
				if m["result"] != want.result || props["app"] != want.app || props["image"] != "registry.example/app:1" || nothing || empty || index != want.index ||
					props[model.PropertyPolicyKind] != policy.KindValidatingPolicy {
					return fmt.Errorf("result %v with properties %v; want %s with app=%s and the image", m["result"], props, want.result, want.app)
				}
				return nil
			}
			return fmt.Errorf("no result of %s in %v", name, entries)
		})
	}
}
