package engine_test

import (
	"context"
	"slices"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// objects is a ResourceLister over a fixed list, as the CLI's test files
// serve one.
type objects []map[string]any

func (o objects) GetResource(_ context.Context, apiVersion, kind, namespace, name string) (map[string]any, error) {
	for _, obj := range o {
		if document.String(obj, "kind") == kind && document.String(obj, "metadata", "namespace") == namespace && document.String(obj, "metadata", "name") == name {
			return obj, nil
		}
	}
	return nil, engine.ErrNotFound
}

func (o objects) ListResources(_ context.Context, apiVersion, kind, namespace string, selector *policy.LabelSelector) ([]map[string]any, error) {
	var out []map[string]any
	for _, obj := range o {
		if document.String(obj, "kind") != kind || (namespace != "" && document.String(obj, "metadata", "namespace") != namespace) {
			continue
		}
		if selector != nil && !engine.MatchSelector(selector, document.StringMap(obj, "metadata", "labels")) {
			continue
		}
		out = append(out, obj)
	}
	return out, nil
}

// TestMutateExisting: a mutate-existing rule finds its targets (by name in
// a namespace, by name in every namespace, by selector, with variables
// from the trigger), sees each as `target`, honours the target's own
// preconditions, and patches it; admission's Mutate leaves the rule to
// the background.
func TestMutateExisting(t *testing.T) {
	secrets := objects{
		obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: s1, namespace: staging, labels: {tier: db}}}`),
		obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: s1, namespace: prod}}`),
		obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: s2, namespace: staging, labels: {tier: db, frozen: "yes"}}}`),
	}
	eng := newEngine(t, engine.WithResourceLister(secrets))
	p := compile(t, eng, `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: by-name
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    mutate:
      targets:
      - {apiVersion: v1, kind: Secret, name: s1, namespace: "{{ request.object.metadata.namespace }}"}
      patchStrategicMerge: {metadata: {labels: {from: "{{ request.object.metadata.name }}"}}}
  - name: everywhere
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    mutate:
      targets:
      - {apiVersion: v1, kind: Secret, name: s1}
      patchStrategicMerge: {metadata: {labels: {seen: "yes"}}}
  - name: by-selector
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    mutate:
      targets:
      - apiVersion: v1
        kind: Secret
        namespace: staging
        selector: {matchLabels: {tier: db}}
        preconditions:
          all:
          - {key: "{{ target.metadata.labels.frozen || '' }}", operator: NotEquals, value: "yes"}
      patchStrategicMerge: {metadata: {annotations: {owner: "{{ target.metadata.name }}"}}}
  - name: missing
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    mutate:
      targets:
      - {apiVersion: v1, kind: Secret, name: nope, namespace: staging}
      patchStrategicMerge: {metadata: {labels: {x: "y"}}}
`)
	cm := obj(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: dict, namespace: staging}}`)
	req := &engine.Request{Operation: engine.OpCreate, Object: cm}
	resp := eng.MutateExisting(t.Context(), req, p, nil)
	got := map[string]engine.RuleResponse{}
	for _, rr := range resp.Rules {
		got[rr.Name] = rr
	}
	if _, ok := got["missing"]; ok || len(got) != 3 {
		t.Fatalf("rules %v, want by-name, everywhere, by-selector", got)
	}
	byName := got["by-name"]
	if byName.Status != engine.StatusPass || len(byName.Targets) != 1 || document.String(byName.Targets[0].Patched, "metadata", "labels", "from") != "dict" ||
		byName.Targets[0].Message != "mutated Secret/s1 in namespace staging" {
		t.Errorf("by-name: %+v", byName)
	}
	var namespaces []string
	for _, tr := range got["everywhere"].Targets {
		if tr.Status == engine.StatusPass {
			namespaces = append(namespaces, document.String(tr.Patched, "metadata", "namespace"))
		}
	}
	slices.Sort(namespaces)
	if !slices.Equal(namespaces, []string{"prod", "staging"}) {
		t.Errorf("everywhere patched %v", namespaces)
	}
	sel := got["by-selector"]
	if sel.Status != engine.StatusPass || len(sel.Targets) != 2 {
		t.Fatalf("by-selector: %+v", sel)
	}
	for _, tr := range sel.Targets {
		name := document.String(tr.Resource, "metadata", "name")
		switch {
		case name == "s1" && (tr.Status != engine.StatusPass || document.String(tr.Patched, "metadata", "annotations", "owner") != "s1"):
			t.Errorf("s1: %+v", tr)
		case name == "s2" && tr.Status != engine.StatusSkip:
			t.Errorf("s2 (frozen) should be skipped: %+v", tr)
		}
	}
	if document.String(secrets[0], "metadata", "labels", "from") != "" {
		t.Error("the lister's object was changed in place")
	}
	// Admission leaves mutate-existing rules to the background: it only
	// says which rules the request triggers, targets unread.
	for _, rr := range eng.Mutate(t.Context(), req, p, nil).Rules {
		if rr.Status != engine.StatusSkip || !rr.Background || len(rr.Targets) != 0 {
			t.Errorf("Mutate %s: %+v", rr.Name, rr)
		}
	}
	triggered := eng.MutateExistingTriggers(t.Context(), req, p, nil).Rules
	if len(triggered) != 4 {
		t.Fatalf("MutateExistingTriggers: %d rules, want all 4 (targets are not looked up)", len(triggered))
	}
	for _, rr := range triggered {
		if !rr.Background || len(rr.Targets) != 0 {
			t.Errorf("MutateExistingTriggers %s: %+v", rr.Name, rr)
		}
	}
	other := obj(t, `{apiVersion: v1, kind: Secret, metadata: {name: x, namespace: staging}}`)
	if rs := eng.MutateExistingTriggers(t.Context(), &engine.Request{Operation: engine.OpCreate, Object: other}, p, nil).Rules; len(rs) != 0 {
		t.Errorf("a Secret triggers %v", rs)
	}
}
