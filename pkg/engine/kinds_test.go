package engine_test

import (
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
)

func TestSelectsKind(t *testing.T) {
	e, err := engine.New()
	if err != nil {
		t.Fatal(err)
	}
	cp := compile(t, e, `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: kinds}
spec:
  rules:
  - name: pods
    match:
      any:
      - resources: {kinds: [Pod]}
    validate:
      pattern: {metadata: {labels: {app: "?*"}}}
  - name: services-status
    match:
      any:
      - resources: {kinds: [Service/status, apps/v1/StatefulSet]}
    validate:
      pattern: {metadata: {name: "?*"}}
  - name: everything
    match:
      any:
      - resources: {kinds: ["*"]}
    validate:
      pattern: {metadata: {name: "?*"}}
  - name: secrets-mutate
    match:
      any:
      - resources: {kinds: [Secret]}
    mutate:
      patchStrategicMerge: {metadata: {labels: {x: y}}}
`)
	for _, c := range []struct {
		group, version, kind string
		want                 engine.KindMatch
	}{
		{"", "v1", "Pod", engine.KindNamed},
		{"apps", "v1", "Deployment", engine.KindNamed}, // autogen of the pods rule
		{"batch", "v1", "CronJob", engine.KindNamed},
		{"apps", "v1", "StatefulSet", engine.KindNamed},
		{"apps", "v1beta1", "StatefulSet", engine.KindNamed}, // autogen names StatefulSet too, any version
		{"", "v1", "Service", engine.KindByWildcard},         // only its status subresource is named
		{"", "v1", "ConfigMap", engine.KindByWildcard},
		{"", "v1", "Secret", engine.KindByWildcard}, // the mutate rule does not count
	} {
		if got := cp.SelectsKind(engine.TypeValidation, c.group, c.version, c.kind); got != c.want {
			t.Errorf("%s/%s/%s: %v, want %v", c.group, c.version, c.kind, got, c.want)
		}
	}
	if got := cp.SelectsKind(engine.TypeMutation, "", "v1", "Secret"); got != engine.KindNamed {
		t.Errorf("mutate Secret: %v", got)
	}
	if got := cp.SelectsKind(engine.TypeGeneration, "", "v1", "Pod"); got != engine.KindNotSelected {
		t.Errorf("generate Pod: %v", got)
	}
}
