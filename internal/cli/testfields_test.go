package cli

import (
	"context"
	"strings"
	"testing"
)

// A policy whose rule denies unless an apiCall (by service URL) says
// allowed and a global context entry counts at least one deployment.
const mockedPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: check
    match: {any: [{resources: {kinds: [Pod]}}]}
    context:
    - name: allowed
      apiCall:
        service: {url: "https://checks.example.com/{{request.object.metadata.name}}"}
        jmesPath: allowed
    - name: count
      globalReference: {name: deployments.count}
    validate:
      failureAction: Enforce
      deny:
        conditions:
          any:
          - {key: "{{ allowed }}", operator: Equals, value: false}
          - {key: "{{ count }}", operator: LessThan, value: 1}
`

const mockedPods = `apiVersion: v1
kind: Pod
metadata: {name: yes, namespace: default}
spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: Pod
metadata: {name: no, namespace: default}
spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: Pod
metadata: {name: down, namespace: default}
spec: {containers: [{name: c, image: nginx}]}
`

const mockedHeader = `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: t}
policies: [policy.yaml]
resources: [pods.yaml]
`

const mockedGlobal = `globalContextEntries:
- name: deployments
  resourceFiles: [gce/deployments.yaml]
  projections: [{name: count, path: "length(@)"}]
`

// TestTestFileMocks runs test files that use apiCallResponses and
// globalContextEntries.
func TestTestFileMocks(t *testing.T) {
	tests := map[string]struct {
		test string
		code int
		// out holds substrings of the output.
		out []string
	}{
		"mocked service and global context": {
			test: mockedHeader + mockedGlobal + `apiCallResponses:
- {url: "https://checks.example.com/yes", response: {body: {allowed: true}}}
- {url: "https://checks.example.com/no", response: {statusCode: 200, body: {allowed: false}}}
- {url: "https://checks.example.com/down", response: {statusCode: 500, body: {allowed: true}}}
results:
- {policy: p, rule: check, kind: Pod, resources: [yes], result: pass}
- {policy: p, rule: check, kind: Pod, resources: [no], result: fail}
- {policy: p, rule: check, kind: Pod, resources: [down], result: error}
`,
			code: ExitOK, out: []string{"3 passed, 0 failed\n"},
		},
		"a non-2xx answer is an error, not the body": {
			test: mockedHeader + mockedGlobal + `apiCallResponses:
- {url: "https://checks.example.com/down", response: {statusCode: 404, body: {allowed: true}}}
results:
- {policy: p, rule: check, kind: Pod, resources: [down], result: pass}
`,
			code: ExitFailed, out: []string{"want pass, got error", "answers HTTP 404"},
		},
		"a global context entry that is not mocked": {
			test: mockedHeader + `globalContextEntries: [{name: other, data: {}}]
apiCallResponses: [{url: "https://checks.example.com/yes", response: {body: {allowed: true}}}]
results:
- {policy: p, rule: check, kind: Pod, resources: [yes], result: pass}
`,
			code: ExitFailed, out: []string{`want pass, got error`, `no global context entry "deployments"`},
		},
		"an invalid apiCallResponses entry names the file and field": {
			test: mockedHeader + `apiCallResponses: [{url: "https://checks.example.com/yes", method: PATCH, response: {body: {}}}]
results:
- {policy: p, rule: check, kind: Pod, resources: [yes], result: pass}
`,
			code: ExitFailed, out: []string{`ERROR `, `kyverno-test.yaml: invalid mock: apiCallResponses[0]: method "PATCH" must be GET or POST`},
		},
		"a resource file outside the test's folder": {
			test: mockedHeader + `globalContextEntries: [{name: deployments, resourceFiles: [../pods.yaml]}]
results:
- {policy: p, rule: check, kind: Pod, resources: [yes], result: pass}
`,
			code: ExitFailed, out: []string{`kyverno-test.yaml: invalid mock: globalContextEntries[0] "deployments": resourceFiles[0] "../pods.yaml": the path must not leave the test file's folder`},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"policy.yaml":          mockedPolicy,
				"pods.yaml":            mockedPods,
				"gce/deployments.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d, namespace: default}\n",
				"kyverno-test.yaml":    tc.test,
			})
			code, out, _ := run(t, "test", dir)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			for _, want := range tc.out {
				if !strings.Contains(out, want) {
					t.Errorf("output does not contain %q:\n%s", want, out)
				}
			}
		})
	}
}

const labelPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: add-label}
spec:
  rules:
  - name: add
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    mutate:
      patchStrategicMerge: {metadata: {labels: {foo: bar}}}
`

const labelConfigMaps = `apiVersion: v1
kind: ConfigMap
metadata: {name: a, namespace: default}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: b, namespace: default}
`

// TestFailOnMissingResources checks what becomes of a mutation result when
// the patchedResources file has no document for the resource, and of a
// result about a targetResources resource.
func TestFailOnMissingResources(t *testing.T) {
	tests := map[string]struct {
		result string
		// outcome of the one assertion; reason, a substring of its reason.
		outcome, reason string
	}{
		"in the file": {
			result:  `{policy: add-label, rule: add, kind: ConfigMap, resources: [a], result: pass, patchedResources: patched.yaml}`,
			outcome: "passed",
		},
		"in the file, differing": {
			result:  `{policy: add-label, rule: add, kind: ConfigMap, resources: [a], result: fail, patchedResources: other.yaml}`,
			outcome: "passed",
		},
		"not in the file: left out": {
			result:  `{policy: add-label, rule: add, kind: ConfigMap, resources: [b], result: pass, patchedResources: patched.yaml}`,
			outcome: "skipped", reason: "no document for the resource in patched.yaml",
		},
		"not in the file, expecting fail: left out": {
			result:  `{policy: add-label, rule: add, kind: ConfigMap, resources: [b], result: fail, patchedResources: patched.yaml}`,
			outcome: "skipped",
		},
		"not in the file, failOnMissingResources": {
			result:  `{policy: add-label, rule: add, kind: ConfigMap, resources: [b], result: fail, patchedResources: patched.yaml, failOnMissingResources: true}`,
			outcome: "failed", reason: "no document for ConfigMap default/b in",
		},
		"another apiVersion is another resource": {
			result:  `{policy: add-label, rule: add, kind: ConfigMap, resources: [a], result: pass, patchedResources: v2.yaml}`,
			outcome: "skipped",
		},
		"a targetResources resource no mutate-existing rule reaches": {
			result:  `{policy: add-label, rule: add, kind: Secret, resources: [s], result: pass, patchedResources: patched.yaml}`,
			outcome: "failed", reason: "the rule did not reach the target",
		},
		"a targetResources resource a mutate-existing rule patches": {
			result:  `{policy: label-secrets, rule: label, kind: Secret, resources: [s], result: pass, patchedResources: patched-secret.yaml}`,
			outcome: "passed",
		},
		"a patched target that differs from the file": {
			result:  `{policy: label-secrets, rule: label, kind: Secret, resources: [s], result: pass, patchedResources: targets.yaml}`,
			outcome: "failed", reason: "patched target differs",
		},
		"neither a resource nor a target": {
			result:  `{policy: add-label, rule: add, kind: Secret, resources: [nope], result: pass}`,
			outcome: "failed", reason: "resource not found in the test's resources",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"policy.yaml":         labelPolicy,
				"cms.yaml":            labelConfigMaps,
				"targets.yaml":        "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default}\n",
				"patched-secret.yaml": "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: default, labels: {from: a}}\n",
				"secrets-policy.yaml": `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: label-secrets}
spec:
  rules:
  - name: label
    match: {any: [{resources: {kinds: [ConfigMap], names: [a]}}]}
    mutate:
      targets: [{apiVersion: v1, kind: Secret, name: s, namespace: default}]
      patchStrategicMerge: {metadata: {labels: {from: "{{ request.object.metadata.name }}"}}}
`,
				"patched.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default, labels: {foo: bar}}\n",
				"other.yaml":   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default, labels: {foo: baz}}\n",
				"v2.yaml":      "apiVersion: v2\nkind: ConfigMap\nmetadata: {name: a, namespace: default, labels: {foo: bar}}\n",
				"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: t}
policies: [policy.yaml, secrets-policy.yaml]
resources: [cms.yaml]
targetResources: [targets.yaml]
results:
- ` + tc.result + "\n",
			})
			sum, err := RunTests(context.Background(), TestOptions{Dirs: []string{dir}, JSON: true}, &strings.Builder{})
			if err != nil {
				t.Fatal(err)
			}
			if len(sum.Assertions) != 1 {
				t.Fatalf("got %d assertions, want 1: %+v", len(sum.Assertions), sum)
			}
			a := sum.Assertions[0]
			if a.Outcome != tc.outcome || !strings.Contains(a.Reason, tc.reason) {
				t.Fatalf("outcome %s (%s), want %s (%s)", a.Outcome, a.Reason, tc.outcome, tc.reason)
			}
			if tc.outcome == "skipped" && (sum.Skipped != 1 || sum.Passed != 0 || sum.Failed != 0 || sum.Rows != 0) {
				t.Fatalf("a skipped assertion counts as neither passed nor failed: %+v", sum)
			}
		})
	}
}

// TestSkippedSummary: the text summary names skipped assertions only when
// there are some.
func TestSkippedSummary(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"policy.yaml":  labelPolicy,
		"cms.yaml":     labelConfigMaps,
		"patched.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: default, labels: {foo: bar}}\n",
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: t}
policies: [policy.yaml]
resources: [cms.yaml]
results:
- {policy: add-label, rule: add, kind: ConfigMap, resources: [a, b], result: pass, patchedResources: patched.yaml}
`,
	})
	code, out, _ := run(t, "test", dir)
	if code != ExitOK || !strings.HasSuffix(out, "1 passed, 0 failed, 1 skipped (resource not in the patchedResources file)\n") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}

const denyDelete = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: deny-delete}
spec:
  validationFailureAction: Enforce
  rules:
  - name: block
    match: {any: [{resources: {kinds: [Pod], operations: [DELETE]}}]}
    validate:
      message: no deleting
      deny: {conditions: {all: [{key: "{{request.operation}}", operator: Equals, value: DELETE}]}}
`

// TestResultOperation: a result's operation evaluates the resources as
// that operation; results without one keep the default run.
func TestResultOperation(t *testing.T) {
	tests := map[string]struct {
		results string
		code    int
		out     string
	}{
		"delete": {
			results: `- {policy: deny-delete, rule: block, kind: Pod, resources: [bad], result: fail, operation: DELETE}
- {policy: deny-delete, rule: block, kind: Pod, resources: [bad], result: skip}
- {policy: deny-delete, rule: block, kind: Pod, resources: [bad], result: skip, operation: CREATE}
`,
			code: ExitOK, out: "3 passed, 0 failed\n",
		},
		"the default run is not the delete run": {
			results: `- {policy: deny-delete, rule: block, kind: Pod, resources: [bad], result: fail}
`,
			code: ExitFailed, out: "want fail, but no rule of the policy applied",
		},
		"an operation the reference refuses": {
			results: `- {policy: deny-delete, rule: block, kind: Pod, resources: [bad], result: fail, operation: CONNECT}
`,
			code: ExitFailed, out: `kyverno-test.yaml: results[0]: operation "CONNECT" must be one of CREATE, UPDATE or DELETE`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"policy.yaml": denyDelete,
				"pods.yaml":   twoPods,
				"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: t}
policies: [policy.yaml]
resources: [pods.yaml]
results:
` + tc.results,
			})
			code, out, _ := run(t, "test", dir)
			if code != tc.code || !strings.Contains(out, tc.out) {
				t.Fatalf("exit %d (want %d), output without %q:\n%s", code, tc.code, tc.out, out)
			}
		})
	}
}

// A test file may hold several Test documents, each a test of its own
// with its own resources (as the reference CLI reads them): every one is
// run and judged.
func TestMultiDocumentTestFile(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"policy.yaml": labelPolicy,
		"cms.yaml":    labelConfigMaps,
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: first}
policies: [policy.yaml]
resources: [cms.yaml]
results:
- {policy: add-label, rule: add, kind: ConfigMap, resources: [a], result: pass}
---
apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: second}
policies: [policy.yaml]
resources: [cms.yaml]
results:
- {policy: add-label, rule: add, kind: ConfigMap, resources: [b], result: fail}
`,
	})
	code, out, _ := run(t, "test", dir)
	if code != ExitFailed || !strings.HasSuffix(out, "1 passed, 1 failed\n") {
		t.Fatalf("exit %d, want both documents judged (one pass, one wrong expectation):\n%s", code, out)
	}
}

// A CEL policy that did not apply to a resource: the reference CLI keeps
// the empty response of a ValidatingPolicy whose matchConstraints select
// by labels (or are otherwise more than one plain resource rule) and
// counts the resource as excluded, a pass; the empty response of a
// policy of one plain resource rule is dropped, and the assertion fails.
func TestCELPolicyExcludedResource(t *testing.T) {
	vpol := func(name, selector string) string {
		return `apiVersion: policies.kyverno.io/v1beta1
kind: ValidatingPolicy
metadata: {name: ` + name + `}
spec:
  matchConstraints:
` + selector + `    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: "false"
`
	}
	dir := writeFiles(t, map[string]string{
		"policy.yaml": vpol("by-label", "    objectSelector: {matchLabels: {prod: nginx}}\n") + "---\n" + vpol("plain", ""),
		"deploy.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default, labels: {app: web}}
spec: {template: {spec: {containers: [{name: c, image: nginx}]}}}
`,
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: t}
policies: [policy.yaml]
resources: [deploy.yaml]
results:
- {isValidatingPolicy: true, policy: by-label, kind: Deployment, resources: [web], result: pass}
- {isValidatingPolicy: true, policy: plain, kind: Deployment, resources: [web], result: fail}
`,
	})
	code, out, _ := run(t, "test", dir)
	if code != ExitOK || !strings.Contains(out, "2 passed, 0 failed") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	// The plain policy applied (and failed); by-label did not apply and
	// passes as excluded. Now a resource the plain one does not select.
	dir = writeFiles(t, map[string]string{
		"policy.yaml": vpol("plain", ""),
		"cm.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm, namespace: default}\n",
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: t}
policies: [policy.yaml]
resources: [cm.yaml]
results:
- {isValidatingPolicy: true, policy: plain, kind: ConfigMap, resources: [cm], result: pass}
`,
	})
	code, out, _ = run(t, "test", dir)
	if code != ExitFailed || !strings.Contains(out, "want pass, but no rule of the policy applied") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
}

// The result fields of Kyverno 1.19's test files: resourceSpecs select
// resources by namespace and name; generatedResources pass when each
// generated resource equals one of their documents, and fail when one
// equals none.
func TestResultSpecsAndGeneratedResources(t *testing.T) {
	policy := `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: p}
spec:
  rules:
  - name: team-label
    match: {any: [{resources: {kinds: [Pod]}}]}
    validate:
      message: team label required
      pattern: {metadata: {labels: {team: "?*"}}}
  - name: quota
    match: {any: [{resources: {kinds: [Namespace]}}]}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: defaults
      namespace: "{{ request.object.metadata.name }}"
      data: {data: {team: "{{ request.object.metadata.name }}"}}
`
	resources := `apiVersion: v1
kind: Pod
metadata: {name: web, namespace: shop, labels: {team: a}}
spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: lab}
spec: {containers: [{name: c, image: nginx}]}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a}
`
	test := func(generated string) string {
		return `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: t}
policies: [policy.yaml]
resources: [resources.yaml]
results:
- {policy: p, rule: team-label, kind: Pod, resourceSpecs: [{version: v1, kind: Pod, namespace: shop, name: web}], result: pass}
- {policy: p, rule: team-label, kind: Pod, resourceSpecs: [{version: v1, kind: Pod, namespace: lab, name: web}], result: fail}
- {policy: p, rule: quota, kind: Namespace, resources: [team-a], result: pass, generatedResources: [` + generated + `]}
`
	}
	files := map[string]string{
		"policy.yaml":    policy,
		"resources.yaml": resources,
		"other.yaml":     "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: team-a}\n",
		"defaults.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: defaults, namespace: team-a}\ndata: {team: team-a}\n",
	}
	files["kyverno-test.yaml"] = test("other.yaml, defaults.yaml")
	code, out, _ := run(t, "test", writeFiles(t, files))
	if code != ExitOK || !strings.HasSuffix(out, "3 passed, 0 failed\n") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	files["kyverno-test.yaml"] = test("other.yaml")
	code, out, _ = run(t, "test", writeFiles(t, files))
	if code != ExitFailed || !strings.Contains(out, "generated resources differ: ConfigMap defaults matches none of [other.yaml]") {
		t.Fatalf("exit %d:\n%s", code, out)
	}
}
