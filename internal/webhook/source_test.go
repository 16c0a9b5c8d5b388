package webhook

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
	"github.com/verdict-dev/verdict/pkg/engine"
)

func TestLoadStaticSource(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("a.yaml", enforcePrivileged+"---\n"+`apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: no-rules}
spec: {rules: []}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: ignored}
`)
	write("sub/b.yml", auditLatest)
	write("sub/exception.yaml", `apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: ex, namespace: default}
spec:
  match: {any: [{resources: {kinds: [Pod]}}]}
  exceptions: [{policyName: disallow-latest, ruleNames: [no-latest]}]
`)
	write("c.yaml", "key: [unclosed\n")
	write(".hidden/d.yaml", auditLatest)
	write("notes.txt", "not a manifest")

	eng, err := engine.New()
	if err != nil {
		t.Fatal(err)
	}
	src, err := LoadStaticSource(eng, []string{dir}, testLogger(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	set, _ := src.Set(t.Context())
	var names []string
	for _, p := range set.Policies {
		names = append(names, p.Name())
	}
	if len(names) != 2 || names[0] != "disallow-privileged" || names[1] != "disallow-latest" || len(set.Exceptions) != 1 {
		t.Fatalf("policies %v, %d exceptions", names, len(set.Exceptions))
	}
	inv := src.Invalid()
	if len(inv) != 2 || inv[0].Key != "no-rules" || inv[1].Kind != "file" {
		t.Fatalf("invalid %v", inv)
	}
	if _, err := LoadStaticSource(eng, []string{filepath.Join(dir, "missing")}, testLogger(t), nil); err == nil {
		t.Fatal("a missing path is not an error")
	}
}

// TestStaticExceptionsReach: files mode honours --policy-exceptions and
// --exception-namespaces as the cluster does (policycache's Admit): by
// default an exception exempts its own namespace only, one in a listed
// namespace reaches every namespace, others are then left out, and with
// exceptions off none counts; an exception that would reach only its own
// namespace and names none is left out with the reason, not kept to
// exempt nothing. Before, the flags were accepted in files mode and had
// no effect.
func TestStaticExceptionsReach(t *testing.T) {
	dir := t.TempDir()
	exception := func(name, ns string) string {
		meta := "{name: " + name + "}"
		if ns != "" {
			meta = "{name: " + name + ", namespace: " + ns + "}"
		}
		return `apiVersion: kyverno.io/v2
kind: PolicyException
metadata: ` + meta + `
spec:
  match: {any: [{resources: {kinds: [Pod]}}]}
  exceptions: [{policyName: disallow-latest, ruleNames: [no-latest]}]
`
	}
	content := auditLatest + "---\n" + exception("platform", "platform") + "---\n" + exception("team", "team") + "---\n" + exception("nowhere", "")
	if err := os.WriteFile(filepath.Join(dir, "p.yaml"), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	eng, err := engine.New()
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]struct {
		cfg *policycache.ExceptionConfig
		// want is each exception kept, with whether it reaches every
		// namespace; left the ones left out, by name.
		want map[string]bool
		left []string
	}{
		"no admission given":   {want: map[string]bool{"platform": false, "team": false}, left: []string{"nowhere"}},
		"the defaults":         {cfg: &policycache.ExceptionConfig{}, want: map[string]bool{"platform": false, "team": false}, left: []string{"nowhere"}},
		"platform reaches all": {cfg: &policycache.ExceptionConfig{Namespaces: []string{"platform"}}, want: map[string]bool{"platform": true}, left: []string{"team", "nowhere"}},
		"exceptions off":       {cfg: &policycache.ExceptionConfig{Disabled: true}, want: map[string]bool{}, left: []string{"platform", "team", "nowhere"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var admit ExceptionAdmission
			if tc.cfg != nil {
				admit = tc.cfg.Admit
			}
			src, err := LoadStaticSource(eng, []string{dir}, testLogger(t), admit)
			if err != nil {
				t.Fatal(err)
			}
			set, _ := src.Set(t.Context())
			got := map[string]bool{}
			for _, e := range set.Exceptions {
				got[e.Metadata.Name] = e.ClusterWide
			}
			if !maps.Equal(got, tc.want) {
				t.Errorf("exceptions kept (name: reaches every namespace) %v, want %v", got, tc.want)
			}
			var left []string
			for _, e := range src.Invalid() {
				left = append(left, strings.TrimPrefix(strings.TrimPrefix(e.Key, "platform/"), "team/"))
				if e.Err == nil || e.Err.Error() == "" {
					t.Errorf("%s left out without a reason", e.Key)
				}
			}
			if !slices.Equal(left, tc.left) {
				t.Errorf("left out %v, want %v", left, tc.left)
			}
		})
	}
}
