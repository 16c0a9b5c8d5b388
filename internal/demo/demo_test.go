package demo

import (
	"bytes"
	"strings"
	"testing"
)

// TestDemoOnce runs the demo as `DEMO_ONCE=1 make demo` does and checks
// its story: the enforced policies deny, a generate rule writes a
// NetworkPolicy, the cleaner deletes what a cleanup policy selects and
// what a TTL label makes due, the reports are printed with the audit
// failures counted.
func TestDemoOnce(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the real control plane; skipped under -short")
	}
	var out bytes.Buffer
	if err := Run(t.Context(), Options{Out: &out, Once: true}); err != nil {
		t.Fatalf("demo: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []string{
		"root-shell       DENIED",
		"sniffer          DENIED",
		"web              admitted",
		"$ kubectl get policyreport -A -o wide",
		"generated NetworkPolicy team-payments/default-deny (policy add-networkpolicy, rule default-deny, field manager verdict-generator)",
		"Pod report-1 deleted by the cleanup policy",
		"Pod report-2 deleted by the cleanup policy",
		"ConfigMap scratch deleted when its TTL was due",
		"Pod report-3 (not finished) stays",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("output misses %q:\n%s", want, s)
		}
	}
	var cacheLine string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, " Pod ") && strings.Contains(l, " cache ") {
			cacheLine = l
		}
	}
	if f := strings.Fields(cacheLine); len(f) < 9 || f[4] != "2" || f[5] != "3" {
		t.Fatalf("report of the cache pod should show 2 pass, 3 fail: %q\n%s", cacheLine, s)
	}
}
