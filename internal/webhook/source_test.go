package webhook

import (
	"os"
	"path/filepath"
	"testing"

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
	src, err := LoadStaticSource(eng, []string{dir}, testLogger(t))
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
	if _, err := LoadStaticSource(eng, []string{filepath.Join(dir, "missing")}, testLogger(t)); err == nil {
		t.Fatal("a missing path is not an error")
	}
}
