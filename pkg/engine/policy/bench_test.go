package policy_test

import (
	"bytes"
	"os"
	"strconv"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

const benchPolicies = "testdata/bench-policies.yaml"

// distinct returns data with every JMESPath expression changed by a
// prefix that n makes unique, so that nothing parsed before is met again.
func distinct(data []byte, n int) []byte {
	tag := []byte("'" + strconv.Itoa(n) + "' && ")
	for _, at := range []string{"{{ ", `jmesPath: "`, `list: "`} {
		data = bytes.ReplaceAll(data, []byte(at), append([]byte(at), tag...))
	}
	return data
}

// BenchmarkLoad measures what loading policies costs: parsing and
// validating them (Parse), then compiling them (Engine.Compile, which
// validates again). One op loads the three policies of
// testdata/bench-policies.yaml (8 rules, 33 JMESPath expressions) into
// one engine: "same" loads the same text every time, "distinct" policies
// whose expressions were never seen (as a process loading its policies
// does).
func BenchmarkLoad(b *testing.B) {
	data, err := os.ReadFile(benchPolicies)
	if err != nil {
		b.Fatal(err)
	}
	for name, vary := range map[string]bool{"same": false, "distinct": true} {
		b.Run(name, func(b *testing.B) {
			eng, err := engine.New()
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				in := data
				if vary {
					n++
					in = distinct(data, n)
				}
				docs, err := policy.Parse(in, benchPolicies)
				if err != nil {
					b.Fatal(err)
				}
				if len(docs.Policies) != 3 {
					b.Fatalf("%d policies, want 3", len(docs.Policies))
				}
				for _, p := range docs.Policies {
					if _, err := eng.Compile(p); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkValidate measures policy.Validate alone on the same policies.
func BenchmarkValidate(b *testing.B) {
	data, err := os.ReadFile(benchPolicies)
	if err != nil {
		b.Fatal(err)
	}
	docs, err := policy.Parse(data, benchPolicies)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, p := range docs.Policies {
			if errs := policy.Validate(p); len(errs) > 0 {
				b.Fatal(errs.ToAggregate())
			}
		}
	}
}
