package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// Every review sent has its own request uid and object uid, as the API
// server gives them, and is otherwise the review built from the Pod.
func TestReviewsHaveUniqueUIDs(t *testing.T) {
	pods := filepath.Join(t.TempDir(), "pods.yaml")
	if err := os.WriteFile(pods, []byte("apiVersion: v1\nkind: Pod\nmetadata:\n  name: a\n  uid: from-the-file\nspec:\n  containers:\n  - name: c\n    image: nginx\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: b\n  namespace: team\nspec:\n  containers:\n  - name: c\n    image: nginx\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	rs, err := reviews(config{podsFile: pods, operation: "CREATE"})
	if err != nil || len(rs) != 2 {
		t.Fatalf("%d reviews, %v", len(rs), err)
	}
	seen := map[string]bool{}
	for n := range uint64(2000) {
		var ar struct {
			Request struct {
				UID       string `json:"uid"`
				Name      string `json:"name"`
				Namespace string `json:"namespace"`
				Object    struct {
					Metadata struct {
						UID string `json:"uid"`
					} `json:"metadata"`
				} `json:"object"`
			} `json:"request"`
		}
		r := rs[n%2]
		if err := json.Unmarshal(r.withUIDs(n+1<<47), &ar); err != nil {
			t.Fatal(err)
		}
		req, uid := ar.Request.UID, ar.Request.Object.Metadata.UID
		if len(req) != 36 || len(uid) != 36 || seen[req] || seen[uid] || req == uid {
			t.Fatalf("review %d: request uid %q, object uid %q (seen before: %v, %v)", n, req, uid, seen[req], seen[uid])
		}
		seen[req], seen[uid] = true, true
		if want := []string{"a", "b"}[n%2]; ar.Request.Name != want || ar.Request.Namespace != []string{"default", "team"}[n%2] {
			t.Fatalf("review %d names %s/%s", n, ar.Request.Namespace, ar.Request.Name)
		}
	}
}

func TestMetricValue(t *testing.T) {
	exposition := []byte("# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.\n# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total 12.34\nprocess_cpu_seconds_total_other 1\ngo_memstats_mallocs_total 1.2345e+06\n")
	if got, err := metricValue(exposition, "process_cpu_seconds_total"); err != nil || got != 12.34 {
		t.Fatalf("%v, %v", got, err)
	}
	if got, err := metricValue(exposition, "go_memstats_mallocs_total"); err != nil || got != 1234500 {
		t.Fatalf("%v, %v", got, err)
	}
	if _, err := metricValue([]byte("go_goroutines 3\n"), "process_cpu_seconds_total"); err == nil {
		t.Fatal("no error without the metric")
	}
}
