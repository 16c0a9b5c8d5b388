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

// BenchmarkString: a Pod Security message, as result events carry one per
// rule.
//
//	go test -run '^$' -bench String -benchmem ./pkg/jsonwrite/
func BenchmarkString(b *testing.B) {
	s := "validation error: Privileged mode is disallowed. The fields spec.containers[*].securityContext.privileged, spec.initContainers[*].securityContext.privileged, and spec.ephemeralContainers[*].securityContext.privileged must be unset or set to `false`. rule privileged-containers failed at path /spec/containers/0/securityContext/privileged/"
	buf := make([]byte, 0, 512)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = String(buf[:0], s)
	}
}
