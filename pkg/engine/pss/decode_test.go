package pss

import (
	"path/filepath"
	"reflect"
	"testing"
)

// TestDecodeMatchesJSON checks, on every pod of the corpus and of the
// benchmark workload, that the direct decoder and the JSON round trip give
// identical results at every level, with and without exclusions.
func TestDecodeMatchesJSON(t *testing.T) {
	var docs []map[string]any
	files, _ := filepath.Glob(filepath.Join(corpusDir, "pod-security", "*", "*", ".chainsaw-test", "*.yaml"))
	more, _ := filepath.Glob(filepath.Join(corpusDir, "pod-security", "*", "*", "*", ".chainsaw-test", "*.yaml"))
	for _, f := range append(files, more...) {
		for _, d := range readDocs(t, f) {
			if p, err := PodFromResource(str(d["kind"]), d); err == nil {
				docs = append(docs, p)
			}
		}
	}
	if len(docs) == 0 {
		t.Skip("corpus not available")
	}
	docs = append(docs, loadBenchPods(t)...)
	excludes := [][]Exclude{
		nil,
		{{ControlName: "Capabilities", Images: []string{"*"}}, {ControlName: "Running as Non-root"}},
		{{ControlName: "Host Ports", Images: []string{"*"}, RestrictedField: "spec.containers[*].ports[*].hostPort", Values: []string{"8*"}}},
	}
	for _, doc := range docs {
		viaJSON, jerr := toPodJSON(doc)
		direct, derr := decodePod(doc)
		if (jerr == nil) != (derr == nil) {
			t.Fatalf("%s: JSON error %v, direct error %v", name(doc), jerr, derr)
		}
		if jerr != nil {
			continue
		}
		for _, level := range []string{"baseline", "restricted"} {
			for _, ex := range excludes {
				p, _ := NewProfile(level, "latest")
				want := p.CheckPod(ex, viaJSON, nil)
				got := p.CheckPod(ex, direct, NewMemo(direct))
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("%s at %s with %v:\n direct %+v\n   json %+v", name(doc), level, ex, got, want)
				}
			}
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	tests := map[string]map[string]any{
		"spec not object":        {"spec": "x"},
		"name not string":        {"metadata": map[string]any{"name": 1.0}},
		"annotation not string":  {"metadata": map[string]any{"annotations": map[string]any{"a": true}}},
		"hostPID not bool":       {"spec": map[string]any{"hostPID": "true"}},
		"runAsUser fraction":     {"spec": map[string]any{"securityContext": map[string]any{"runAsUser": 1.5}}},
		"hostPort too big":       {"spec": map[string]any{"containers": []any{map[string]any{"ports": []any{map[string]any{"hostPort": 1e10}}}}}},
		"capability not string":  {"spec": map[string]any{"containers": []any{map[string]any{"securityContext": map[string]any{"capabilities": map[string]any{"add": []any{1.0}}}}}}},
		"volume source not map":  {"spec": map[string]any{"volumes": []any{map[string]any{"name": "v", "nfs": "server"}}}},
		"container not object":   {"spec": map[string]any{"containers": []any{"nginx"}}},
		"probe host not string":  {"spec": map[string]any{"containers": []any{map[string]any{"livenessProbe": map[string]any{"httpGet": map[string]any{"host": 1.0}}}}}},
		"sysctls not a list":     {"spec": map[string]any{"securityContext": map[string]any{"sysctls": map[string]any{}}}},
		"privileged not boolean": {"spec": map[string]any{"containers": []any{map[string]any{"securityContext": map[string]any{"privileged": "true"}}}}},
	}
	for name, doc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := decodePod(doc); err == nil {
				t.Fatal("decodePod accepted the document")
			}
			if _, err := toPodJSON(doc); err == nil {
				t.Fatal("JSON decoding accepted the document")
			}
		})
	}
}
