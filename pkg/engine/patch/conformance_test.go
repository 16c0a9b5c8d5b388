package patch

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// conformanceDir holds the kyverno/policies corpus with its CLI tests,
// shared beside the repository checkout.
const conformanceDir = "../../../../shared/conformance/kyverno-policies"

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

func readDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	var out []map[string]any
	for _, part := range docSeparator.Split(string(raw), -1) {
		if strings.TrimSpace(part) == "" {
			continue
		}
		j, err := yaml.YAMLToJSON([]byte(part))
		if err != nil {
			t.Fatalf("parse %s: %v", path, err)
		}
		var m map[string]any
		if err := json.Unmarshal(j, &m); err != nil {
			t.Fatalf("decode %s: %v", path, err)
		}
		if m != nil {
			out = append(out, m)
		}
	}
	return out
}

// mutateRule is a policy rule this package can apply alone: a plain
// patchStrategicMerge or patchesJson6902 without variables, context,
// preconditions or foreach, matched by kind only.
type mutateRule struct {
	name      string
	kinds     []string
	overlay   any
	jsonPatch string
	supported bool
}

func parseRules(policy map[string]any) []mutateRule {
	spec, _ := policy["spec"].(map[string]any)
	rules, _ := spec["rules"].([]any)
	var out []mutateRule
	for _, r := range rules {
		rm, _ := r.(map[string]any)
		mutate, ok := rm["mutate"].(map[string]any)
		if !ok {
			continue
		}
		name, _ := rm["name"].(string)
		rule := mutateRule{name: name, supported: true}
		raw, _ := json.Marshal(rm)
		_, hasPre := rm["preconditions"]
		_, hasCtx := rm["context"]
		_, hasExclude := rm["exclude"]
		if hasPre || hasCtx || hasExclude || strings.Contains(string(raw), "{{") {
			rule.supported = false
		}
		switch {
		case mutate["patchStrategicMerge"] != nil && len(mutate) == 1:
			rule.overlay = mutate["patchStrategicMerge"]
		case mutate["patchesJson6902"] != nil && len(mutate) == 1:
			rule.jsonPatch, _ = mutate["patchesJson6902"].(string)
		default:
			rule.supported = false
		}
		kinds, selectorsOnly := matchKinds(rm["match"])
		rule.kinds = kinds
		if !selectorsOnly {
			rule.supported = false
		}
		out = append(out, rule)
	}
	return out
}

// matchKinds collects the kinds of a match block; ok is false when the
// block filters on anything else.
func matchKinds(match any) ([]string, bool) {
	mm, _ := match.(map[string]any)
	var blocks []any
	for key, v := range mm {
		switch key {
		case "any", "all":
			l, _ := v.([]any)
			blocks = append(blocks, l...)
		case "resources":
			blocks = append(blocks, map[string]any{"resources": v})
		default:
			return nil, false
		}
	}
	var kinds []string
	for _, b := range blocks {
		bm, _ := b.(map[string]any)
		for key := range bm {
			if key != "resources" {
				return nil, false
			}
		}
		res, _ := bm["resources"].(map[string]any)
		for key := range res {
			if key != "kinds" {
				return nil, false
			}
		}
		l, _ := res["kinds"].([]any)
		for _, k := range l {
			s, _ := k.(string)
			kinds = append(kinds, s)
		}
	}
	return kinds, true
}

func (r mutateRule) matches(resource map[string]any) bool {
	kind, _ := resource["kind"].(string)
	for _, k := range r.kinds {
		if k == kind || strings.HasSuffix(k, "/"+kind) {
			return true
		}
	}
	return false
}

func findByName(docs []map[string]any, ref string) map[string]any {
	ns, name, found := strings.Cut(ref, "/")
	if !found {
		name, ns = ref, ""
	}
	for _, d := range docs {
		md, _ := d["metadata"].(map[string]any)
		if md["name"] != name {
			continue
		}
		if ns != "" {
			if dns, ok := md["namespace"].(string); ok && dns != ns {
				continue
			}
		}
		return d
	}
	return nil
}

// TestConformance applies the mutate rules of the kyverno/policies corpus
// that need no other engine feature and compares status and patched
// resources with the CLI test expectations.
func TestConformance(t *testing.T) {
	tests, _ := filepath.Glob(filepath.Join(conformanceDir, "*", "*", ".kyverno-test", "kyverno-test.yaml"))
	if len(tests) == 0 {
		t.Skipf("conformance corpus not found at %s", conformanceDir)
	}
	sort.Strings(tests)
	checked := 0
	for _, testFile := range tests {
		dir := filepath.Dir(testFile)
		spec := readDocs(t, testFile)[0]
		var rules []mutateRule
		policies, _ := spec["policies"].([]any)
		for _, p := range policies {
			ps, _ := p.(string)
			for _, pol := range readDocs(t, filepath.Join(dir, ps)) {
				rules = append(rules, parseRules(pol)...)
			}
		}
		if len(rules) == 0 {
			continue
		}
		var resources []map[string]any
		files, _ := spec["resources"].([]any)
		for _, f := range files {
			fs, _ := f.(string)
			resources = append(resources, readDocs(t, filepath.Join(dir, fs))...)
		}
		results, _ := spec["results"].([]any)
		for i, r := range results {
			rm, _ := r.(map[string]any)
			ruleName, _ := rm["rule"].(string)
			want, _ := rm["result"].(string)
			refs, _ := rm["resources"].([]any)
			patchedFile, _ := rm["patchedResources"].(string)
			if patchedFile == "" {
				patchedFile, _ = rm["patchedResource"].(string)
			}
			for _, ref := range refs {
				refName, _ := ref.(string)
				resource := findByName(resources, refName)
				if resource == nil {
					continue
				}
				name := filepath.Base(filepath.Dir(dir)) + "/" + ruleName + "/" + refName
				if !runConformanceCase(t, name, rules, ruleName, want, resource, dir, patchedFile, i) {
					continue
				}
				checked++
			}
		}
	}
	t.Logf("checked %d conformance cases", checked)
	if checked < 20 {
		t.Errorf("only %d conformance cases were checked", checked)
	}
}

// runConformanceCase applies the policy's rules in order to one resource,
// as the CLI does. It returns false when the case needs features outside
// this package.
func runConformanceCase(t *testing.T, name string, rules []mutateRule, ruleName, want string,
	resource map[string]any, dir, patchedFile string, idx int,
) bool {
	var target *mutateRule
	for i := range rules {
		if rules[i].name == ruleName {
			target = &rules[i]
		}
	}
	if target == nil {
		return false
	}
	for _, r := range rules {
		if !r.supported && (r.kinds == nil || r.matches(resource)) {
			return false
		}
	}
	t.Run(name, func(t *testing.T) {
		current := resource
		status := ""
		for _, r := range rules {
			if !r.matches(current) {
				continue
			}
			var res Result
			var err error
			if r.overlay != nil {
				res, err = StrategicMerge(current, r.overlay)
			} else {
				res, err = JSON6902(current, r.jsonPatch)
			}
			st := "pass"
			switch {
			case err != nil:
				st = "error"
				t.Logf("rule %s: %v", r.name, err)
			case res.Skipped:
				st = "skip"
			default:
				current = res.Object
			}
			if r.name == ruleName {
				status = st
			}
		}
		if status == "" {
			status = "skip" // the rule does not match the resource
		}
		// "fail" with a patched resource: the CLI found the mutation result
		// to differ from the expected resource.
		wantDiff := want == "fail" && patchedFile != ""
		if wantDiff {
			want = "pass"
		}
		if status != want {
			t.Fatalf("rule %s: status %s, want %s", ruleName, status, want)
		}
		if want != "pass" || patchedFile == "" {
			return
		}
		md, _ := resource["metadata"].(map[string]any)
		expected := findByName(readDocs(t, filepath.Join(dir, patchedFile)), md["name"].(string))
		if expected == nil {
			if wantDiff {
				return
			}
			t.Fatalf("result %d: %s has no resource named %v", idx, patchedFile, md["name"])
		}
		// The CLI defaults the namespace of namespaced resources.
		got := deepCopy(current).(map[string]any)
		expected = deepCopy(expected).(map[string]any)
		for _, d := range []map[string]any{got, expected} {
			if md, ok := d["metadata"].(map[string]any); ok {
				delete(md, "namespace")
			}
		}
		if wantDiff {
			if reflect.DeepEqual(got, expected) {
				t.Fatalf("patched resource matches %s, want a difference", patchedFile)
			}
			return
		}
		assertDoc(t, any(got), any(expected))
	})
	return true
}
