package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A policy whose message prints what it read: the ConfigMap's token.
const leakingPolicy = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: leak}
spec:
  validationFailureAction: Enforce
  rules:
  - name: print
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate:
      message: "token {{ request.object.data.token }}"
      deny: {}
`

const runnerSecret = "s3cr3t-runner-token"

// TestPathsOutsideTheSuite: a test file (a pull request's) names a file
// of the CI runner outside the suite, through every field that names a
// path, as an absolute path, through a symbolic link, or a directory
// holding one: the test is refused with an error naming the field, and
// nothing of the file reaches the output. With
// --allow-paths-outside-suite, the same suite prints the runner's
// secret, as every suite did before.
func TestPathsOutsideTheSuite(t *testing.T) {
	tmp := t.TempDir()
	secret := filepath.Join(tmp, "runner", "token.yaml")
	suite := filepath.Join(tmp, "suite")
	for path, data := range map[string]string{
		secret:                                 "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: token, namespace: default}\ndata: {token: " + runnerSecret + "}\n",
		filepath.Join(suite, "policy.yaml"):    leakingPolicy,
		filepath.Join(suite, "cm.yaml"):        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: token, namespace: default}\ndata: {token: harmless}\n",
		filepath.Join(suite, "dir", "ok.yaml"): "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other, namespace: default}\n",
	} {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("../runner/token.yaml", filepath.Join(suite, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../runner/token.yaml", filepath.Join(suite, "dir", "link.yaml")); err != nil {
		t.Fatal(err)
	}
	// A link that stays inside is fine.
	if err := os.Symlink("cm.yaml", filepath.Join(suite, "inside.yaml")); err != nil {
		t.Fatal(err)
	}
	const result = "results: [{policy: leak, rule: print, kind: ConfigMap, resources: [token], result: pass}]\n"
	for name, tc := range map[string]struct {
		// fields of the test file; policies and resources default to the
		// suite's own.
		fields string
		// field is the refused field; empty: the test loads.
		field string
		allow bool
	}{
		"resources, ../":           {fields: "resources: [../runner/token.yaml]", field: "resources[0]"},
		"resources, absolute":      {fields: "resources: [" + secret + "]", field: "resources[0]"},
		"resources, a link":        {fields: "resources: [link.yaml]", field: "resources[0]"},
		"resources, a directory":   {fields: "resources: [dir]", field: "resources[0]"},
		"resources, second":        {fields: "resources: [cm.yaml, ../runner/token.yaml]", field: "resources[1]"},
		"policies":                 {fields: "policies: [policy.yaml, ../runner/token.yaml]", field: "policies[1]"},
		"exceptions":               {fields: "exceptions: [../runner/token.yaml]", field: "exceptions[0]"},
		"variables":                {fields: "variables: ../runner/token.yaml", field: "variables"},
		"userinfo":                 {fields: "userinfo: ../runner/token.yaml", field: "userinfo"},
		"context":                  {fields: "context: ../runner/token.yaml", field: "context"},
		"targetResources":          {fields: "targetResources: [../runner/token.yaml]", field: "targetResources[0]"},
		"clusterResources":         {fields: "clusterResources: [../runner/token.yaml]", field: "clusterResources[0]"},
		"jsonPayloads":             {fields: "jsonPayloads: [../runner/token.yaml]", field: "jsonPayloads[0]"},
		"patchedResource":          {fields: "results: [{policy: leak, rule: print, kind: ConfigMap, resources: [token], result: pass, patchedResource: ../runner/token.yaml}]", field: "results[0].patchedResource"},
		"generatedResource":        {fields: "results: [{policy: leak, rule: print, kind: ConfigMap, resources: [token], result: pass, generatedResource: /etc/hostname}]", field: "results[0].generatedResource"},
		"cloneSourceResource":      {fields: "results: [{policy: leak, rule: print, kind: ConfigMap, resources: [token], result: pass, cloneSourceResource: ../runner/token.yaml}]", field: "results[0].cloneSourceResource"},
		"global context file":      {fields: "globalContextEntries: [{name: e, resourceFiles: [link.yaml]}]", field: `globalContextEntries "e" resourceFiles[0]`},
		"a link that stays inside": {fields: "resources: [inside.yaml]"},
		"allowed":                  {fields: "resources: [../runner/token.yaml]", allow: true},
	} {
		t.Run(name, func(t *testing.T) {
			doc := "apiVersion: cli.kyverno.io/v1alpha1\nkind: Test\nmetadata: {name: t}\n" + tc.fields + "\n"
			if !strings.Contains(tc.fields, "policies:") {
				doc += "policies: [policy.yaml]\n"
			}
			if !strings.Contains(tc.fields, "resources: [") || strings.Contains(tc.fields, "Resources: [") {
				doc += "resources: [cm.yaml]\n"
			}
			if !strings.Contains(tc.fields, "results:") {
				doc += result
			}
			path := filepath.Join(suite, "kyverno-test.yaml")
			if err := os.WriteFile(path, []byte(doc), 0o600); err != nil {
				t.Fatal(err)
			}
			var out strings.Builder
			sum, err := RunTests(t.Context(), TestOptions{Dirs: []string{suite}, JSON: true, AllowPathsOutsideSuite: tc.allow}, &out)
			if err != nil {
				t.Fatal(err)
			}
			leaked := strings.Contains(out.String(), runnerSecret)
			as, runErr := runTestFile(t.Context(), path, &suiteRoot{dir: suite, given: "suite", allowOutside: tc.allow})
			var outside *OutsidePathError
			switch {
			case tc.allow:
				if !leaked || runErr != nil {
					t.Errorf("allowed: the runner's file was not read (%v): %s", runErr, out.String())
				}
			case tc.field == "":
				if runErr != nil || leaked || len(as) == 0 {
					t.Errorf("refused a path inside the suite: %v", runErr)
				}
			default:
				if leaked {
					t.Errorf("the runner's secret reached the output: %s", out.String())
				}
				if !errors.Is(runErr, ErrPathOutsideSuite) || !errors.As(runErr, &outside) || outside.Field != tc.field || outside.TestFile != path {
					t.Errorf("error %v, want one naming %s of %s", runErr, tc.field, path)
				}
				if len(sum.Errors) != 1 {
					t.Errorf("summary errors %v", sum.Errors)
				}
			}
		})
	}
}
