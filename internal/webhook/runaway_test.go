package webhook

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
)

// runawayForeach is a nested foreach whose work grows with the square of
// a ConfigMap's size: 10,000 keys make 100 million deny evaluations.
const runawayForeach = `apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: runaway, uid: pol-runaway, resourceVersion: "1"}
spec:
  validationFailureAction: Enforce
  rules:
  - name: nested
    match: {any: [{resources: {kinds: [ConfigMap]}}]}
    validate:
      message: never
      foreach:
      - list: "items(request.object.data, 'key', 'value')"
        foreach:
        - list: "items(request.object.data, 'key', 'value')"
          deny:
            conditions:
              any:
              - key: "{{ element.key }}"
                operator: Equals
                value: never-there
`

// bigConfigMap has n data keys.
func bigConfigMap(name string, n int) map[string]any {
	data := make(map[string]any, n)
	for i := range n {
		data[fmt.Sprintf("key-%05d", i)] = "v"
	}
	return map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": name, "namespace": "default", "uid": "uid-" + name},
		"data":     data,
	}
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(t testing.TB) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// A runaway evaluation is answered within the request timeout with a clear
// error (denied: failurePolicy Fail), and the CPU it used is given back:
// nothing keeps running after the answer. A flood past the concurrency
// bound is answered at once.
func TestRunawayEvaluationIsBounded(t *testing.T) {
	if testing.Short() {
		t.Skip("measures CPU over seconds")
	}
	const timeout = 2 * time.Second
	h := newHarness(t, staticSource(t, runawayForeach), testConfig(func(c *Config) {
		c.RequestTimeout = timeout
		c.MaxConcurrentEvaluations = 2
		c.EvaluationQueueTimeout = 200 * time.Millisecond
	}))
	ar := reviewOf(t, admissionv1.Create, bigConfigMap("huge", 10_000), resourceOf("", "configmaps"))
	review := mustJSON(t, ar)

	start := time.Now()
	resp := h.admit(PathValidate, ar)
	took := time.Since(start)
	if resp.Allowed || resp.Result == nil || !strings.Contains(resp.Result.Message, "runaway") {
		t.Fatalf("runaway evaluation not denied with its policy named: %+v", resp.Result)
	}
	if took > timeout+time.Second {
		t.Fatalf("answered after %s, request timeout %s", took, timeout)
	}
	t.Logf("answered in %s: %s", took, resp.Result.Message)

	// A flood: two requests take the slots, the rest are answered 429 at
	// once rather than queued.
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	var slowest429 time.Duration
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := time.Now()
			code, _ := h.post(PathValidate, "application/json", review)
			d := time.Since(s)
			mu.Lock()
			defer mu.Unlock()
			codes[code]++
			if code == http.StatusTooManyRequests && d > slowest429 {
				slowest429 = d
			}
		}()
	}
	wg.Wait()
	if codes[http.StatusTooManyRequests] == 0 || codes[http.StatusOK]+codes[http.StatusTooManyRequests] != 12 || slowest429 > time.Second {
		t.Fatalf("flood answered %v, slowest 429 after %s", codes, slowest429)
	}

	// The CPU goes back to idle within a second of the last answer.
	time.Sleep(time.Second)
	before := cpuTime(t)
	time.Sleep(time.Second)
	if used := cpuTime(t) - before; used > 150*time.Millisecond {
		t.Fatalf("the process used %s of CPU in the second after the answers: evaluation kept running", used)
	}
}
