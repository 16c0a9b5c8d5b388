package pss

import (
	"os"
	"path/filepath"
	"testing"
)

// benchPods is the shared benchmark workload: 1,000 deterministic Pods, 505
// of which comply with the restricted profile.
const benchPods = "../../../../shared/bench/pods-1000.yaml"

func loadBenchPods(tb testing.TB) []map[string]any {
	tb.Helper()
	if _, err := os.Stat(benchPods); err != nil {
		tb.Skipf("benchmark workload not available: %v", err)
	}
	return readDocsTB(tb, filepath.Clean(benchPods))
}

func TestBenchWorkloadVerdicts(t *testing.T) {
	pods := loadBenchPods(t)
	if len(pods) != 1000 {
		t.Fatalf("%d pods, want 1000", len(pods))
	}
	pass := 0
	for _, p := range pods {
		res, err := Check("restricted", "latest", nil, p)
		if err != nil {
			t.Fatalf("%s: %v", name(p), err)
		}
		if res.Allowed {
			pass++
		}
	}
	if pass != 505 {
		t.Fatalf("%d pods comply with restricted, want 505", pass)
	}
}

// BenchmarkCheck checks one pod with a profile prepared once, as the
// engine does.
func BenchmarkCheck(b *testing.B) {
	pods := loadBenchPods(b)
	p, err := NewProfile("restricted", "latest")
	if err != nil {
		b.Fatal(err)
	}
	excludes := []Exclude{{ControlName: "Capabilities", Images: []string{"registry.example.com/*"}}}
	for name, ex := range map[string][]Exclude{"plain": nil, "exclusions": excludes} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := p.Check(ex, pods[i%len(pods)]); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkNewProfile measures what Check adds to Profile.Check: parsing
// the level and version and selecting the checks.
func BenchmarkNewProfile(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := NewProfile("restricted", "v1.29"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkToPodJSON(b *testing.B) {
	pods := loadBenchPods(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := toPodJSON(pods[i%len(pods)]); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkToPod(b *testing.B) {
	pods := loadBenchPods(b)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := ToPod(pods[i%len(pods)]); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckWorkload evaluates the whole 1,000-pod workload per op.
func BenchmarkCheckWorkload(b *testing.B) {
	pods := loadBenchPods(b)
	b.ReportAllocs()
	prof, err := NewProfile("restricted", "latest")
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for _, p := range pods {
			if _, err := prof.Check(nil, p); err != nil {
				b.Fatal(err)
			}
		}
	}
}
