package conditions

import (
	"encoding/json"
	"sort"
	"testing"
)

// FuzzEvaluate feeds arbitrary JSON documents as key and value to every
// operator: evaluation must never panic and must only fail for unknown
// operators.
func FuzzEvaluate(f *testing.F) {
	seeds := [][2]string{
		{`"kube-system"`, `["default","kube-*"]`},
		{`["a","b"]`, `"[\"a\",\"b\"]"`},
		{`"5"`, `"1-10"`},
		{`"-5-5"`, `"|5-10"`},
		{`"1Gi"`, `"512Mi"`},
		{`"1h"`, `3600`},
		{`"1.2.3"`, `"1.10.0"`},
		{`1e308`, `"1e309"`},
		{`{"a":[1,null,true]}`, `{"a":[1,null,true]}`},
		{`null`, `null`},
		{`"é?"`, `"?*"`},
		{`[1,2,3]`, `2`},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1], uint8(0))
	}
	names := make([]string, 0, len(operators)+1)
	for name := range operators {
		names = append(names, name)
	}
	sort.Strings(names) // stable indexes, so corpus entries replay the same operator
	names = append(names, "nosuchoperator")
	f.Fuzz(func(t *testing.T, keyJSON, valueJSON string, op uint8) {
		var key, value any
		if json.Unmarshal([]byte(keyJSON), &key) != nil {
			key = keyJSON
		}
		if json.Unmarshal([]byte(valueJSON), &value) != nil {
			value = valueJSON
		}
		name := names[int(op)%len(names)]
		_, err := Evaluate(key, name, value)
		if (err != nil) != (name == "nosuchoperator") {
			t.Fatalf("Evaluate(%#v, %q, %#v): error %v", key, name, value, err)
		}
	})
}
