package patch

import (
	"encoding/json"
	"reflect"
	"testing"

	"sigs.k8s.io/yaml"
)

// doc parses YAML into a JSON-compatible value (numbers as float64).
func doc(t testing.TB, s string) any {
	t.Helper()
	j, err := yaml.YAMLToJSON([]byte(s))
	if err != nil {
		t.Fatalf("yaml: %v\n%s", err, s)
	}
	var v any
	if err := json.Unmarshal(j, &v); err != nil {
		t.Fatalf("json: %v", err)
	}
	return v
}

func docMap(t testing.TB, s string) map[string]any {
	t.Helper()
	m, ok := doc(t, s).(map[string]any)
	if !ok {
		t.Fatalf("not a map:\n%s", s)
	}
	return m
}

func toYAML(v any) string {
	b, err := yaml.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

func assertDoc(t testing.TB, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Errorf("document mismatch\n--- got:\n%s--- want:\n%s", toYAML(got), toYAML(want))
	}
}
