package engine_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

const benchDir = "../../../shared/bench"

// loadBench compiles the 22 Pod Security policies and reads the 1,000 pods.
func loadBench(tb testing.TB) (*engine.Engine, *engine.Set, []map[string]any) {
	return loadWorkload(tb, "pss-classic")
}

// loadWorkload compiles the policies of a workload folder of
// ../shared/bench and reads the 1,000 pods.
func loadWorkload(tb testing.TB, dir string) (*engine.Engine, *engine.Set, []map[string]any) {
	tb.Helper()
	if _, err := os.Stat(benchDir); err != nil {
		tb.Skipf("benchmark workloads not found at %s", benchDir)
	}
	eng, err := engine.New()
	if err != nil {
		tb.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(benchDir, dir, "*.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	set := &engine.Set{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			tb.Fatal(err)
		}
		docs, err := policy.Parse(data, f)
		if err != nil {
			tb.Fatal(err)
		}
		for _, p := range docs.Policies {
			cp, err := eng.Compile(p)
			if err != nil {
				tb.Fatal(err)
			}
			set.Policies = append(set.Policies, cp)
		}
	}
	data, err := os.ReadFile(filepath.Join(benchDir, "pods-1000.yaml"))
	if err != nil {
		tb.Fatal(err)
	}
	docs, err := document.DecodeAll(data)
	if err != nil {
		tb.Fatal(err)
	}
	pods := make([]map[string]any, len(docs))
	for i, d := range docs {
		pods[i] = d.Object
	}
	return eng, set, pods
}

// BenchmarkPodAgainstPSS measures the marginal cost of one pod against
// the 22 Pod Security policies (24 rules): one op is one pod.
func BenchmarkPodAgainstPSS(b *testing.B) {
	eng, set, pods := loadBench(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := &engine.Request{Operation: engine.OpCreate, Object: pods[i%len(pods)]}
		eng.Apply(b.Context(), req, set)
	}
}

// BenchmarkPodAgainstVPol measures the marginal cost of one pod against
// the 16 ValidatingPolicies of pss-vpol; BenchmarkPodAgainstCEL against
// the validate.cel ClusterPolicies of pss-cel. One op is one pod.
func BenchmarkPodAgainstVPol(b *testing.B) { benchPods(b, "pss-vpol") }

func BenchmarkPodAgainstCEL(b *testing.B) { benchPods(b, "pss-cel") }

func benchPods(b *testing.B, dir string) {
	eng, set, pods := loadWorkload(b, dir)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		req := &engine.Request{Operation: engine.OpCreate, Object: pods[i%len(pods)]}
		eng.Apply(b.Context(), req, set)
	}
}

// TestCELWorkloads checks the reference CLI's counts on the CEL
// workloads: pss-vpol 14,955 pass and 1,045 fail, pss-cel 17,905 and
// 1,095.
func TestCELWorkloads(t *testing.T) {
	for dir, want := range map[string]engine.Counts{"pss-vpol": {Pass: 14955, Fail: 1045}, "pss-cel": {Pass: 17905, Fail: 1095}} {
		eng, set, pods := loadWorkload(t, dir)
		var c engine.Counts
		for _, pod := range pods {
			resps, _ := eng.Apply(t.Context(), &engine.Request{Object: pod}, set)
			for _, r := range resps {
				for _, rr := range r.Rules {
					c.Add(rr.Status)
				}
			}
		}
		if c != want {
			t.Errorf("%s: counts %+v, want %+v", dir, c, want)
		}
	}
}

// TestPSSWorkload checks the reference figures of the benchmark workload:
// 20,892 pass and 3,108 fail, and exactly the 495 violating pods fail.
func TestPSSWorkload(t *testing.T) {
	eng, set, pods := loadBench(t)
	var c engine.Counts
	failing := 0
	for _, pod := range pods {
		resps, _ := eng.Apply(t.Context(), &engine.Request{Operation: engine.OpCreate, Object: pod}, set)
		failed := false
		for _, r := range resps {
			for _, rr := range r.Rules {
				c.Add(rr.Status)
				if rr.Status == engine.StatusFail {
					failed = true
				}
			}
		}
		if failed {
			failing++
		}
	}
	if c.Pass != 20892 || c.Fail != 3108 || c.Error != 0 || c.Skip != 0 || c.Warn != 0 {
		t.Fatalf("counts = %+v, want 20892 pass and 3108 fail only", c)
	}
	if failing != 495 {
		t.Fatalf("%d pods fail, want the 495 violating pods", failing)
	}
}
