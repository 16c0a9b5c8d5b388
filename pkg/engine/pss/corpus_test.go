package pss

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// corpusDir is the policy-library corpus shared beside the repository.
const corpusDir = "../../../../shared/conformance/kyverno-policies"

func corpus(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(corpusDir, "pod-security")
	if _, err := os.Stat(dir); err != nil {
		t.Skipf("conformance corpus not available: %v", err)
	}
	return dir
}

var docSeparator = regexp.MustCompile(`(?m)^---\s*$`)

// readDocs reads every YAML document of a file as a JSON-compatible map.
func readDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	return readDocsTB(t, path)
}

func readDocsTB(t testing.TB, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var docs []map[string]any
	for _, part := range docSeparator.Split(string(raw), -1) {
		if strings.TrimSpace(part) == "" {
			continue
		}
		var doc map[string]any
		if err := yaml.Unmarshal([]byte(part), &doc); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if doc != nil {
			docs = append(docs, doc)
		}
	}
	return docs
}

type podSecurityRule struct {
	name, level, version string
	excludes             []Exclude
}

// podSecurityRules reads the validate.podSecurity rules of a policy file.
func podSecurityRules(t *testing.T, path string) []podSecurityRule {
	t.Helper()
	var rules []podSecurityRule
	for _, doc := range readDocs(t, path) {
		specRules, _ := lookup(doc, "spec", "rules").([]any)
		for _, r := range specRules {
			rule, _ := r.(map[string]any)
			ps, ok := lookup(rule, "validate", "podSecurity").(map[string]any)
			if !ok {
				continue
			}
			out := podSecurityRule{name: str(rule["name"]), level: str(ps["level"]), version: str(ps["version"])}
			exs, _ := ps["exclude"].([]any)
			for _, e := range exs {
				m, _ := e.(map[string]any)
				out.excludes = append(out.excludes, Exclude{
					ControlName:     str(m["controlName"]),
					Images:          strs(m["images"]),
					RestrictedField: str(m["restrictedField"]),
					Values:          strs(m["values"]),
				})
			}
			rules = append(rules, out)
		}
	}
	return rules
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func strs(v any) []string {
	items, _ := v.([]any)
	var out []string
	for _, it := range items {
		out = append(out, str(it))
	}
	return out
}

// evalResource runs a rule on a Pod or pod controller document.
func evalResource(t *testing.T, rule podSecurityRule, doc map[string]any) Result {
	t.Helper()
	kind := str(doc["kind"])
	pod, err := PodFromResource(kind, doc)
	if err != nil {
		t.Fatalf("%s %s: %v", kind, name(doc), err)
	}
	res, err := Check(rule.level, rule.version, rule.excludes, pod)
	if err != nil {
		t.Fatalf("%s %s: %v", kind, name(doc), err)
	}
	return res
}

func name(doc map[string]any) string {
	return str(lookup(doc, "metadata", "name"))
}

// TestCorpusSubrules replays the kyverno/policies podSecurity subrule
// policies: their Kyverno CLI test results and their chainsaw good and bad
// Pods and controllers.
func TestCorpusSubrules(t *testing.T) {
	root := filepath.Join(corpus(t), "subrule")
	policies, err := filepath.Glob(filepath.Join(root, "*", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	more, _ := filepath.Glob(filepath.Join(root, "*", "*", "*.yaml"))
	policies = append(policies, more...)
	seen := 0
	for _, policyPath := range policies {
		if strings.HasSuffix(policyPath, "artifacthub-pkg.yml") {
			continue
		}
		rules := podSecurityRules(t, policyPath)
		if len(rules) != 1 {
			continue
		}
		rule := rules[0]
		dir := filepath.Dir(policyPath)
		seen++
		t.Run(filepath.Base(dir), func(t *testing.T) {
			// Kyverno CLI test: named resources and their expected result.
			testFile := filepath.Join(dir, ".kyverno-test", "kyverno-test.yaml")
			if _, err := os.Stat(testFile); err == nil {
				resources := map[string]map[string]any{}
				for _, d := range readDocs(t, filepath.Join(dir, ".kyverno-test", "resource.yaml")) {
					resources[name(d)] = d
				}
				for _, doc := range readDocs(t, testFile) {
					results, _ := doc["results"].([]any)
					for _, r := range results {
						res, _ := r.(map[string]any)
						want := str(res["result"])
						for _, n := range strs(res["resources"]) {
							got := evalResource(t, rule, resources[n])
							if got.Allowed != (want == "pass") {
								t.Errorf("kyverno-test %s: allowed=%v, want %s; failed: %s", n, got.Allowed, want, FormatChecks(got.Failed, "Pod"))
							}
						}
					}
				}
			}
			// Chainsaw: every good resource is admitted, every bad one denied.
			for file, wantAllowed := range map[string]bool{
				"pod-good.yaml": true, "podcontroller-good.yaml": true,
				"pod-bad.yaml": false, "podcontroller-bad.yaml": false,
			} {
				path := filepath.Join(dir, ".chainsaw-test", file)
				if _, err := os.Stat(path); err != nil {
					continue
				}
				for _, doc := range readDocs(t, path) {
					got := evalResource(t, rule, doc)
					if got.Allowed != wantAllowed {
						t.Errorf("%s %s %s: allowed=%v, want %v; failed: %s", file, str(doc["kind"]), name(doc), got.Allowed, wantAllowed, FormatChecks(got.Failed, str(doc["kind"])))
					}
				}
			}
		})
	}
	if seen == 0 {
		t.Fatal("no podSecurity policy found in the corpus")
	}
}

// controlsSkips lists the corpus files whose pattern-based policy disagrees
// with the Pod Security Standards on purpose.
var controlsSkips = map[string]string{
	"baseline/disallow-host-ports-range/pod-good.yaml":           "the policy allows a port range the standard forbids",
	"baseline/disallow-host-ports-range/podcontroller-good.yaml": "the policy allows a port range the standard forbids",
	"baseline/disallow-host-process/pod-good.yaml":               "Windows HostProcess pods need hostNetwork, which baseline forbids",
	"baseline/disallow-host-process/podcontroller-good.yaml":     "Windows HostProcess pods need hostNetwork, which baseline forbids",
	"baseline/disallow-proc-mount/pod-bad.yaml":                  "the standard allows any procMount in a user namespace (hostUsers: false) since 1.35",
	"baseline/disallow-proc-mount/podcontroller-bad.yaml":        "the standard allows any procMount in a user namespace (hostUsers: false) since 1.35",
	"baseline/disallow-selinux/pod-bad.yaml":                     "the standard allows container_engine_t since 1.31",
	"baseline/disallow-selinux/podcontroller-bad.yaml":           "the standard allows container_engine_t since 1.31",
}

// TestCorpusControls uses the pods of the pattern-based Pod Security
// Standards policies as reference data: each bad pod violates the control its
// policy enforces, so it must fail the profile of the policy's category, and
// the good pods of the baseline policies (which violate nothing else) must
// pass the baseline profile.
func TestCorpusControls(t *testing.T) {
	root := corpus(t)
	for _, level := range []string{"baseline", "restricted"} {
		dirs, _ := filepath.Glob(filepath.Join(root, level, "*"))
		for _, dir := range dirs {
			t.Run(level+"/"+filepath.Base(dir), func(t *testing.T) {
				for _, file := range []string{"pod-bad.yaml", "podcontroller-bad.yaml", "pod-good.yaml", "podcontroller-good.yaml"} {
					path := filepath.Join(dir, ".chainsaw-test", file)
					if _, err := os.Stat(path); err != nil {
						continue
					}
					bad := strings.Contains(file, "bad")
					if !bad && level != "baseline" {
						continue // restricted good pods may break other restricted controls
					}
					if reason, skip := controlsSkips[level+"/"+filepath.Base(dir)+"/"+file]; skip {
						t.Logf("%s skipped: %s", file, reason)
						continue
					}
					rule := podSecurityRule{level: level, version: "latest"}
					for _, doc := range readDocs(t, path) {
						got := evalResource(t, rule, doc)
						if got.Allowed == bad {
							t.Errorf("%s %s %s: allowed=%v; failed: %s", file, str(doc["kind"]), name(doc), got.Allowed, FormatChecks(got.Failed, str(doc["kind"])))
						}
					}
				}
			})
		}
	}
}
