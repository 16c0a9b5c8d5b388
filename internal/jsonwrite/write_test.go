package jsonwrite

import (
	"encoding/json"
	"testing"
)

// FuzzString: String writes what json.Marshal writes for a string.
func FuzzString(f *testing.F) {
	for _, s := range []string{"", "plain", `"q" \ <a&b>`, "\x00\x1f\t\n\r\b\f", "é\u2028\u2029", "\xff\xfe", "日本語"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := String(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}
