package engine_test

import (
	"context"
	"fmt"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// A ClusterPolicy of the Kyverno language, compiled once and evaluated
// against two Pods: what a webhook, a scan or the CLI does with each
// resource.
func Example() {
	docs, err := policy.Parse([]byte(`
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata:
  name: require-team
spec:
  validationFailureAction: Enforce
  rules:
  - name: team-label
    match:
      any:
      - resources:
          kinds: [Pod]
    validate:
      message: "label 'team' is required"
      pattern:
        metadata:
          labels:
            team: "?*"
`), "example.yaml")
	if err != nil {
		panic(err)
	}
	eng, err := engine.New()
	if err != nil {
		panic(err)
	}
	p, err := eng.Compile(docs.Policies[0])
	if err != nil {
		panic(err)
	}
	set := &engine.Set{Policies: []*engine.Policy{p}}
	for _, pod := range []string{
		`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web", "namespace": "shop", "labels": {"team": "checkout"}}}`,
		`{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "job", "namespace": "shop"}}`,
	} {
		obj, err := document.Decode([]byte(pod))
		if err != nil {
			panic(err)
		}
		req := &engine.Request{Operation: engine.OpCreate, Object: obj.(map[string]any)}
		responses, _ := eng.Apply(context.Background(), req, set)
		for _, resp := range responses {
			for _, r := range resp.Rules {
				fmt.Printf("%s: %s/%s %s", document.String(req.Object, "metadata", "name"), resp.Policy.Name(), r.Name, r.Status)
				if r.Message != "" {
					fmt.Printf(": %s", r.Message)
				}
				fmt.Println()
			}
		}
	}
	// Output:
	// web: require-team/team-label pass: validation rule 'team-label' passed.
	// job: require-team/team-label fail: validation error: label 'team' is required. rule team-label failed at path /metadata/labels/
}
