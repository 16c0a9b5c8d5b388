package cli

import (
	"encoding/json"
	"testing"
)

// replicaLimitPolicy reads the most replicas a Deployment may have from a
// ConfigMap, in the Deployment's namespace (paramRef names none), and
// refuses Deployments when there is none (parameterNotFoundAction Deny).
const replicaLimitPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: replica-limit}
spec:
  background: false
  rules:
  - name: replicas
    match: {any: [{resources: {kinds: [Deployment]}}]}
    validate:
      failureAction: Enforce
      cel:
        paramKind: {apiVersion: v1, kind: ConfigMap}
        paramRef: {name: replica-limit, parameterNotFoundAction: Deny}
        expressions:
        - expression: "object.spec.replicas <= int(params.data.max)"
          messageExpression: "'at most ' + params.data.max + ' replicas in ' + object.metadata.namespace"
---
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: allowed-names}
spec:
  background: false
  rules:
  - name: names
    match: {any: [{resources: {kinds: [Namespace]}}]}
    validate:
      failureAction: Enforce
      cel:
        # Every PriorityClass labelled naming: "true" is a params
        # resource (cluster-scoped: no namespace); each must hold.
        paramKind: {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass}
        paramRef:
          selector: {matchLabels: {naming: "true"}}
        expressions:
        - expression: "!object.metadata.name.startsWith(params.metadata.annotations.forbiddenPrefix)"
          messageExpression: "'names may not start with ' + params.metadata.annotations.forbiddenPrefix"
`

var replicaLimitResources = `apiVersion: v1
kind: ConfigMap
metadata: {name: replica-limit, namespace: small}
data: {max: "2"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: replica-limit, namespace: large}
data: {max: "10"}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: naming-a, labels: {naming: "true"}, annotations: {forbiddenPrefix: tmp-}}
value: 1
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: naming-b, labels: {naming: "true"}, annotations: {forbiddenPrefix: old-}}
value: 2
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: unrelated, annotations: {forbiddenPrefix: team-}}
value: 3
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
---
apiVersion: v1
kind: Namespace
metadata: {name: old-team}
` + deployment("small", "web", 3) + deployment("large", "web", 3) + deployment("nolimit", "web", 1)

func deployment(ns, name string, replicas int) string {
	return `---
apiVersion: apps/v1
kind: Deployment
metadata: {name: ` + name + `, namespace: ` + ns + `}
spec:
  replicas: ` + string(rune('0'+replicas)) + `
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: nginx}]}
`
}

// TestValidateCELParams: validate.cel rules read params resources by name
// (in the resource's namespace for a namespaced kind) or by selector (a
// cluster-scoped kind, each one evaluated), as Kyverno does; a missing
// one under parameterNotFoundAction Deny is an error.
func TestValidateCELParams(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"policy.yaml":    replicaLimitPolicy,
		"resources.yaml": replicaLimitResources,
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: params}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: replica-limit, rule: replicas, kind: Deployment, resources: [small/web], result: fail}
- {policy: replica-limit, rule: replicas, kind: Deployment, resources: [large/web], result: pass}
- {policy: replica-limit, rule: replicas, kind: Deployment, resources: [nolimit/web], result: error}
- {policy: allowed-names, rule: names, kind: Namespace, resources: [team-a], result: pass}
- {policy: allowed-names, rule: names, kind: Namespace, resources: [old-team], result: fail}
`,
	})
	code, out, errOut := run(t, "test", dir, "--json")
	var got struct {
		Passed, Failed int
		Assertions     []struct{ Resource, Message string }
	}
	if err := json.Unmarshal([]byte(out), &got); err != nil || code != 0 || got.Passed != 5 || got.Failed != 0 {
		t.Fatalf("exit %d (%v):\n%s\n%s", code, err, out, errOut)
	}
	want := map[string]string{
		"small/web":   "at most 2 replicas in small",
		"nolimit/web": `error in parameterized resource: v1 ConfigMap "nolimit/replica-limit" not found`,
		"old-team":    "names may not start with old-",
	}
	for _, a := range got.Assertions {
		if w, ok := want[a.Resource]; ok && a.Message != w {
			t.Errorf("%s: message %q, want %q", a.Resource, a.Message, w)
		}
	}
}
