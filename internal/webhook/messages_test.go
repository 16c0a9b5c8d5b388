package webhook

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	yamlv2 "go.yaml.in/yaml/v2"
	"sigs.k8s.io/yaml"

	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// kyvernoBlockedMessage is the denial message made as Kyverno makes it:
// sigs.k8s.io/yaml (a JSON round trip, then yaml.v2).
func kyvernoBlockedMessage(t testing.TB, obj map[string]any, failures map[string]map[string]string) string {
	t.Helper()
	results, err := yaml.Marshal(failures)
	if err != nil {
		t.Fatal(err)
	}
	resource := fmt.Sprintf("%s/%s/%s", document.String(obj, "kind"), document.String(obj, "metadata", "namespace"), document.String(obj, "metadata", "name"))
	return fmt.Sprintf("\n\nresource %s was blocked due to the following policies \n\n%s", resource, results)
}

// TestBlockedMessageAsKyverno: the denial message is byte for byte the one
// Kyverno's way gives, over messages that exercise yaml.v2's choices:
// plain, single- and double-quoted and literal scalars, folding at 80
// columns, strings YAML would read as another type, indicators, invalid
// UTF-8, and rule names that sort numerically.
func TestBlockedMessageAsKyverno(t *testing.T) {
	words := []string{
		"validation", "error:", "Privileged", "mode", "is", "disallowed.", "The", "fields", "spec.containers[*].securityContext.privileged,",
		"must", "be", "unset", "or", "set", "to", "`false`.", "rule", "privileged-containers", "failed", "at", "path",
		"/spec/containers/0/securityContext/privileged/", "'quoted'", "\"double\"", "a: b", "#hash", "x #y", "-", "- dash", "?", ":",
		"true", "yes", "no", "on", "null", "~", "1", "1.5", "0x1F", "1e3", "12:30", "<html>", "&amp;", "tab\there", "line\nbreak",
		"ünïcödé", "日本語", "\xff\xfe", "{brace}", "[bracket]", "%percent", "@at", "*star", "!bang", "|pipe", ">gt", " ", "",
		strings.Repeat("long", 30), "trailing ", " leading",
	}
	rng := rand.New(rand.NewPCG(16, 16))
	phrase := func(max int) string {
		n := rng.IntN(max)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = words[rng.IntN(len(words))]
		}
		return strings.Join(parts, " ")
	}
	obj := map[string]any{"kind": "Pod", "metadata": map[string]any{"namespace": "team", "name": "web-1"}}
	for i := range 3000 {
		failures := map[string]map[string]string{}
		for range 1 + rng.IntN(3) {
			policy := []string{"disallow-privileged-containers", "require-labels", "p" + fmt.Sprint(rng.IntN(12)), phrase(3)}[rng.IntN(4)]
			rules := map[string]string{}
			for range 1 + rng.IntN(3) {
				rule := []string{"check", "rule" + fmt.Sprint(rng.IntN(12)), phrase(2)}[rng.IntN(3)]
				rules[rule] = phrase(40)
			}
			failures[policy] = rules
		}
		got, err := blockedMessage(obj, failures)
		if err != nil {
			t.Fatal(err)
		}
		if want := kyvernoBlockedMessage(t, obj, failures); got != want {
			t.Fatalf("case %d, %q:\n%s\nwant\n%s", i, failures, got, want)
		}
	}
}

// TestBlockedYAMLDirect: names and messages of printable ASCII that start
// with a letter are written directly, byte for byte as yaml.v2 writes
// them: plain and single-quoted, folded at 80 columns, quotes doubled,
// names that sort numerically.
func TestBlockedYAMLDirect(t *testing.T) {
	words := []string{
		"validation", "error:", "Privileged", "mode", "is", "disallowed.", "spec.containers[*].securityContext.privileged,",
		"`false`.", "rule", "failed", "at", "path", "/spec/containers/0/", "'quoted'", "it's", `"double"`, "a:b", "a:", ":",
		"#hash", "x#y", "#", "-", "?", "{brace}", "[bracket]", "%", "@", "*", "!", "|", ">", "", "", "1", "0x1F", "12:30",
		strings.Repeat("long", 25), "(AUDIT_WRITE,", "CHOWN)", "=", "&amp;", "<html>", "true", "no", "~",
	}
	rng := rand.New(rand.NewPCG(17, 17))
	phrase := func(first string, n int) string {
		parts := []string{first}
		for range n {
			parts = append(parts, words[rng.IntN(len(words))])
		}
		return strings.Join(parts, " ")
	}
	names := []string{"check", "rule", "r", "p", "a0", "a00", "a1", "a01", "a10", "a9", "b2c10", "b2c9", "x-y", "x_y", "X", "pod:", "pod #1", "it's"}
	for i := range 5000 {
		failures := map[string]map[string]string{}
		for range 1 + rng.IntN(3) {
			rules := map[string]string{}
			for range 1 + rng.IntN(4) {
				rules[names[rng.IntN(len(names))]+fmt.Sprint(rng.IntN(3))] = phrase([]string{"v", "Any", "x"}[rng.IntN(3)], rng.IntN(40))
			}
			failures[names[rng.IntN(len(names))]] = rules
		}
		got, ok := appendBlockedYAML(nil, failures)
		if !ok {
			t.Fatalf("case %d, %q: not written directly", i, failures)
		}
		want, err := yamlv2.Marshal(failures)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("case %d, %q:\n%s\nwant\n%s", i, failures, got, want)
		}
	}
	// What the direct path leaves to yaml.v2.
	for _, f := range []map[string]map[string]string{
		{}, {"p": {}}, {"p": {"r": ""}}, {"p": {"r": "true"}}, {"p": {"r": "1 pod"}}, {"p": {"r": "tab\there"}},
		{"p": {"r": "line\nbreak"}}, {"p": {"r": "ünïcödé"}}, {"p": {"r": " leading"}}, {"p": {strings.Repeat("r", 129): "m"}},
	} {
		if _, ok := appendBlockedYAML(nil, f); ok {
			t.Errorf("%q: written directly", f)
		}
	}
}

// FuzzBlockedYAML: whatever the direct path writes, yaml.v2 writes the
// same.
func FuzzBlockedYAML(f *testing.F) {
	f.Add("disallow-privileged-containers", "privileged-containers", "validation error: Privileged mode is disallowed. The fields spec.containers[*].securityContext.privileged must be unset", "p10", "r9", "it's: #1 ")
	f.Fuzz(func(t *testing.T, p1, r1, m1, p2, r2, m2 string) {
		failures := map[string]map[string]string{p1: {r1: m1}}
		if failures[p2] == nil {
			failures[p2] = map[string]string{}
		}
		failures[p2][r2] = m2
		got, ok := appendBlockedYAML(nil, failures)
		if !ok {
			return
		}
		want, err := yamlv2.Marshal(failures)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Fatalf("%q:\n%s\nwant\n%s", failures, got, want)
		}
	})
}

// BenchmarkBlockedMessage: the denial message of three Pod Security
// policies, as the webhook makes it (directly), the YAML alone as yaml.v2
// writes it (the webhook's fallback), and the message as Kyverno's way
// would make it (sigs.k8s.io/yaml).
//
//	go test -run '^$' -bench BlockedMessage -benchmem ./internal/webhook/
func BenchmarkBlockedMessage(b *testing.B) {
	obj := map[string]any{"kind": "Pod", "metadata": map[string]any{"namespace": "team", "name": "web-1"}}
	failures := map[string]map[string]string{
		"disallow-privileged-containers": {"privileged-containers": "validation error: Privileged mode is disallowed. The fields spec.containers[*].securityContext.privileged, spec.initContainers[*].securityContext.privileged, and spec.ephemeralContainers[*].securityContext.privileged must be unset or set to `false`. rule privileged-containers failed at path /spec/containers/0/securityContext/privileged/"},
		"disallow-host-namespaces":       {"host-namespaces": "validation error: Sharing the host namespaces is disallowed. The fields spec.hostNetwork, spec.hostIPC, and spec.hostPID must be unset or set to `false`. rule host-namespaces failed at path /spec/hostNetwork/"},
		"disallow-capabilities":          {"adding-capabilities": "Any capabilities added beyond the allowed list (AUDIT_WRITE, CHOWN, DAC_OVERRIDE, FOWNER, FSETID, KILL, MKNOD, NET_BIND_SERVICE, SETFCAP, SETGID, SETPCAP, SETUID, SYS_CHROOT) are disallowed."},
	}
	b.Run("impl=direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := blockedMessage(obj, failures); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=yaml.v2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := blockedYAMLv2(failures); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("impl=sigs.k8s.io-yaml", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = kyvernoBlockedMessage(b, obj, failures)
		}
	})
}
